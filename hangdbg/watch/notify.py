"""What ``watch`` tells others after a stall's dump: the suspects' places and the webhook.

``--notify-webhook URL`` POSTs one JSON object (``Content-Type: application/json``, UTF-8) made by
:func:`json.dumps` from :func:`webhook_payload`, never by pasting text into a template: a headline
that quotes source (``with open(path, "rb") as f:``), backslashes or newlines stays one JSON string,
and text from the job cannot add fields. Slack's, Mattermost's and most chat "incoming webhooks"
take such a POST (they read ``text``, which the payload carries too). A webhook that fails is a
warning; the watch goes on.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError
from ..model import Finding, RankDump
from ..redact import MASK

__all__ = ["suspect_places", "suspect_hosts", "webhook_payload", "check_webhook_url", "post_webhook", "shown_url", "WEBHOOK_TIMEOUT"]

WEBHOOK_TIMEOUT = 10.0
"""Seconds a webhook POST may take (connection and answer) before it is given up (a warning)."""


def suspect_places(findings: Sequence[Finding], ranks: Sequence[RankDump]) -> list[dict[str, Any]]:
    """The suspects' ranks and hosts, as ``[{"rank": R, "host": H}, ...]`` (``rank`` None for a
    finding about a node without a rank; ``host`` '' when unknown), sorted, without repeats.

    Only findings of severity ``suspect`` count: a rank that waits is never named here.
    A finding's own ``hosts`` name the node of its ranks when it has one host (the fan-out's
    suspects do); otherwise each rank's host is its dump's (:attr:`RankDump.host`).
    """
    host_of = {d.rank: d.host for d in ranks}
    out: set[tuple[int, str]] = set()
    for f in findings:
        if not f.is_suspect:
            continue
        for r in f.ranks:
            out.add((r, host_of.get(r) or (f.hosts[0] if len(f.hosts) == 1 else "")))
        if not f.ranks:
            out.update((-1, h) for h in f.hosts)
    return [{"rank": None if r < 0 else r, "host": h} for r, h in sorted(out)]


def suspect_hosts(findings: Sequence[Finding], ranks: Sequence[RankDump]) -> tuple[str, ...]:
    """The distinct hosts of :func:`suspect_places`, sorted (the nodes to leave out)."""
    return tuple(sorted({p["host"] for p in suspect_places(findings, ranks) if p["host"]}))


def webhook_payload(*, headline: str | None, suspects: list[dict[str, Any]], dump_dir: str, exit: int,
                    kind: str | None, command: str, time: str) -> dict[str, Any]:
    """The webhook's JSON object: ``headline``, ``suspects`` (ranks and hosts, see
    :func:`suspect_places`), ``dump_dir``, ``exit`` (the dump's exit status: 3 suspect named,
    0 none, 1 nothing read), ``kind`` (the first suspect's :class:`~hangdbg.kinds.Kind` value, or
    the top finding's, None when none), ``command`` (``watch``), ``time`` (ISO 8601 UTC), and
    ``text`` (the headline and the dump directory: what chat webhooks display)."""
    head = headline or "no answer from the stall dump"
    return {"headline": headline, "suspects": suspects, "dump_dir": dump_dir, "exit": exit, "kind": kind,
            "command": command, "time": time, "text": f"hangdbg {command}: {head} ({dump_dir})"}


def check_webhook_url(url: str) -> str:
    """``url`` when it is an ``http://`` or ``https://`` URL with a host.

    Raises:
        UsageError: another scheme (``file:``, ``ftp:``...) or no host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--notify-webhook takes an http:// or https:// URL, not {url!r}")
    return url


def shown_url(url: str) -> str:
    """``url`` as it may be written down (run markers, ``-v`` lines): its scheme and host, the path
    and query masked, since they hold the hook's secret (Slack's ``/services/T.../B.../SECRET``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/{MASK}" if parts.path.strip("/") or parts.query else f"{parts.scheme}://{host}{port}"


def post_webhook(url: str, payload: dict[str, Any], timeout: float = WEBHOOK_TIMEOUT) -> str | None:
    """POST ``payload`` to ``url`` as JSON; None on success (a 2xx answer), else why it failed.

    Never raises for a network or HTTP failure (the caller warns and goes on).

    Raises:
        UsageError: ``url`` is not http(s) (:func:`check_webhook_url`).
    """
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(check_webhook_url(url), data=body, method="POST",
                                 headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": "hangdbg"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (http(s) only, checked above)
            status = resp.status
    except urllib.error.HTTPError as exc:
        return f"the webhook answered HTTP {exc.code} {exc.reason}"
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections
        return f"the webhook could not be reached: {getattr(exc, 'reason', exc)}"
    return None if 200 <= status < 300 else f"the webhook answered HTTP {status}"
