"""Secrets masked before anything is written: local variables named like a secret in py-spy's
``--locals`` text, and secret-looking arguments of command lines.

**Which names.** Sentry's default server-side data scrubbing removes "values whose keynames contain"
``password``, ``secret``, ``passwd``, ``api_key``, ``apikey``, ``auth``, ``credentials``,
``mysql_pwd``, ``privatekey``, ``private_key``, ``token``, ``bearer`` (docs.sentry.io,
"Server-Side Data Scrubbing"); its Python SDK's ``sentry_sdk/scrubber.py`` ``DEFAULT_DENYLIST``
adds ``session``, ``cookie``, ``csrf`` and ``authorization``. :data:`DENYLIST` is that list, matched
case-insensitively as a substring of the name (so ``api_token``, ``HF_TOKEN``, ``db_password``
are masked), plus ``credential`` (singular), ``webhook`` (an incoming webhook's URL is its own
credential: Slack's "Sending messages using incoming webhooks" says to keep it secret, and
``--notify-webhook URL`` is one) and names ending in ``_key`` (``access_key``,
``aws_secret_access_key``); a plain ``key``/``keys`` (a loop variable) is not masked.

**What is masked.** The value is replaced by :data:`MASK` (``[Filtered]``, Sentry's own
replacement text), the name is kept: the reader still sees that a token was there.

* py-spy ``--locals`` text (py-spy 0.3/0.4 ``dump`` format: ``Arguments:``/``Locals:`` headers,
  then ``NAME: REPR`` lines indented deeper than the frame line): :func:`redact_pyspy_text`;
  inside any value, a ``"token": "…"`` pair of a dict's repr is masked as well;
* URLs with a password (``scheme://user:PASSWORD@host``) anywhere in those values and in
  command lines;
* command lines (:func:`mask_argv`): ``--api-token X``, ``--api-token=X``, ``password=X``.

Pure functions, no I/O.
"""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["DENYLIST", "MASK", "secret_name", "redact_pyspy_text", "redact_value", "mask_argv", "scrub_pyspy_output"]

MASK = "[Filtered]"
"""The text that replaces a secret (Sentry's replacement text)."""

DENYLIST = ("password", "passwd", "secret", "api_key", "apikey", "auth", "credential", "mysql_pwd",
            "privatekey", "private_key", "token", "bearer", "session", "cookie", "csrf", "webhook")
"""Substrings of a name (lower-cased, ``-`` read as ``_``) that make its value a secret (module docstring)."""

_NOT = {"token": "(?!i[sz]|s)", "auth": "(?!ors?(?:_|$))"}
"""Words the denylist would catch that name no secret in ML code: ``tokenizer``/``tokenize``/
``tokens``/``num_tokens`` (text tokens), ``author``/``authors``."""

_NAME = re.compile("|".join(re.escape(w) + _NOT.get(w, "") for w in DENYLIST) + r"|.+_key$")

# py-spy dump --locals: "            NAME: REPR" (12 spaces in 0.3/0.4; any indent deeper than 8)
_LOCAL_LINE = re.compile(r"^(?P<indent>[ \t]{9,})(?P<name>[A-Za-z_][A-Za-z0-9_.]*): (?P<value>.*)$")
_HEADER = re.compile(r"^[ \t]+(?:Arguments|Locals):[ \t]*$")
# a quoted key of a dict repr followed by a quoted value: "token": "sk-…"  or 'token': 'sk-…'
_PAIR = re.compile(r"""(?P<key>(?P<q>["'])(?P<name>[^"'\\]{1,200})(?P=q)\s*:\s*)(?P<vq>["'])(?:\\.|(?!(?P=vq)).)*(?P=vq)""")
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/@'\"]{1,200}:)[^\s@/'\"]{1,500}(?=@)")


def secret_name(name: str) -> bool:
    """Whether a variable, key or option named ``name`` holds a secret (:data:`DENYLIST`)."""
    return bool(_NAME.search(name.lower().replace("-", "_").lstrip("_")))


def redact_value(text: str) -> str:
    """``text`` (a value's repr, a command-line word) with the passwords of URLs and the values of
    secret-named quoted dict keys replaced by :data:`MASK`."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    return _PAIR.sub(lambda m: m.group("key") + f'"{MASK}"' if secret_name(m.group("name")) else m.group(0), text)


def redact_pyspy_text(text: str) -> str:
    """py-spy ``dump --locals`` text with the values of secret-named arguments and locals replaced
    by ``"[Filtered]"``, and secrets inside the other values masked (:func:`redact_value`). Lines
    outside an ``Arguments:``/``Locals:`` block are returned unchanged.

    Args:
        text: py-spy's stdout (any size; processed line by line).
    """
    if "Locals:" not in text and "Arguments:" not in text and "://" not in text:
        return text
    out: list[str] = []
    in_block = False
    for line in text.split("\n"):
        if _HEADER.match(line):
            in_block = True
            out.append(line)
            continue
        m = _LOCAL_LINE.match(line) if in_block else None
        if m is None:
            in_block = in_block and line.startswith(" " * 9)
            out.append(_URL_PASSWORD.sub(lambda u: u.group("head") + MASK, line) if "://" in line else line)
            continue
        value = f'"{MASK}"' if secret_name(m.group("name")) else redact_value(m.group("value"))
        out.append(f"{m.group('indent')}{m.group('name')}: {value}")
    return "\n".join(out)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """A command line with its secrets masked: the word after a secret-named option
    (``--api-token X``), the value of ``--api-token=X`` and of ``password=X``, and the password
    of a URL (``https://user:PASS@host``). Other words are unchanged.

    Args:
        argv: the words of the command line (``/proc/PID/cmdline`` split at NULs).
    """
    out: list[str] = []
    mask_next = False
    for word in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        name, eq, _value = word.partition("=")
        if eq and secret_name(name.lstrip("-")) and not name.startswith("/"):
            out.append(f"{name}={MASK}")
            continue
        if word.startswith("-") and not eq and secret_name(word.lstrip("-")) and len(word.lstrip("-")) > 1:
            mask_next = True
        out.append(redact_value(word))
    return out


_PROCESS_LINE = re.compile(r"^(Process \d+: )(.{0,1048576}?)(?=\nPython v|\Z)", re.MULTILINE | re.DOTALL)
"""py-spy dump's header (src/dump.rs: ``Process {pid}: {cmdline}`` then ``Python v{version}``); the
command line may span lines (``python -c`` with a script)."""


def scrub_pyspy_output(text: str, redact: bool = True, cmdline: bool = True) -> str:
    """py-spy ``dump`` output as hangdbg keeps it: the ``Process PID: COMMAND LINE`` header's
    secrets masked (:func:`mask_argv`) or, with ``cmdline=False``, the command line dropped
    (``Process PID: ``); with ``redact`` the locals masked (:func:`redact_pyspy_text`).

    Args:
        text: py-spy's stdout.
        redact: mask secret-named locals and secret arguments (``--no-redact`` turns it off).
        cmdline: keep the command line (``--no-cmdline`` drops it).
    """
    if not cmdline:
        text = _PROCESS_LINE.sub(lambda m: m.group(1), text, count=1)
    elif redact:
        text = _PROCESS_LINE.sub(lambda m: m.group(1) + " ".join(mask_argv(m.group(2).split(" "))), text, count=1)
    return redact_pyspy_text(text) if redact else text
