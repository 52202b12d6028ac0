"""Mine NVIDIA DCGM's health and diagnostic error messages into hangdbg/catalog/data/dcgm.toml.

DCGM (``dcgmi diag``, ``dcgmi health``, the DCGM exporter, Kubernetes GPU health checks) reports a GPU
problem as one of its error codes: ``DCGM_FR_VOLATILE_DBE_DETECTED`` prints ``Detected 2 volatile double-bit
ECC error(s) in GPU 3.``. ``dcgmlib/dcgm_errors.h`` defines, per code, the message (``DCGM_FR_X_MSG``, printf)
and the suggested next step (``DCGM_FR_X_NEXT``); ``dcgmlib/src/dcgm_errors.c``'s ``dcgmErrorMeta`` table gives
each code a severity (``DCGM_ERROR_ISOLATE``: the GPU cannot run work and should be isolated; ``RESET``: drain
and reset it; ``MONITOR``: it can still run work; ``CONFIG``: a setting; ``TRIAGE``) and a category
(``DCGM_FR_EC_HARDWARE_MEMORY``, ``..._NVLINK``, ``DCGM_FR_EC_SOFTWARE_CONFIG`` ...).

This script reads the NVIDIA/DCGM git directory (the search tool's ``fetch``) at the newest tag of every
minor release from 2.0, and writes one entry per message: blame from the category (hardware, the
environment for software and configuration, none for DCGM's own internals), severity from DCGM's
(:data:`SEVERITY`), the enum's comment as the meaning, the NEXT text as the action; each entry cites the
newest tag and line that define the message. A message of fewer than :data:`MIN_LITERAL` literal characters
or one that starts with a placeholder is left out (too generic to know in a log); a test skipped, disabled or
aborted is context (info), no fault.

    python scripts/catalog/mine_dcgm.py /work/.mirror/NVIDIA+DCGM/repo [--out hangdbg/catalog/data]

Stdlib only (imports mine_nccl.py's git reader and TOML helpers).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mine_nccl as mn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPO = "NVIDIA/DCGM"
HEADER = "dcgmlib/dcgm_errors.h"
TABLE = "dcgmlib/src/dcgm_errors.c"
_TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)$")
MIN_MAJOR = 2
MIN_LITERAL = 22
_DEFINE = re.compile(r"^#define\s+(\w+)\s+(.*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ENUM = re.compile(r"^\s*(DCGM_FR_\w+)\s*=\s*\d+\s*,?\s*//!<\s*\d+\s*(.*)$")
_ENTRY = re.compile(r"DCGM_ERROR_TABLE_ENTRY\(\s*(DCGM_FR_\w+)\s*,\s*(DCGM_ERROR_\w+)\s*,\s*(DCGM_FR_EC_\w+)\s*\)")

SEVERITY = {"DCGM_ERROR_ISOLATE": "suspect", "DCGM_ERROR_RESET": "suspect", "DCGM_ERROR_CONFIG": "suspect",
            "DCGM_ERROR_TRIAGE": "warning", "DCGM_ERROR_MONITOR": "warning", "DCGM_ERROR_UNKNOWN": "info",
            "DCGM_ERROR_NONE": "info"}
"""DCGM's severity of a code (dcgmErrorSeverity_t) as the catalog's: isolate, reset and config say what to do."""


CONFIG_CATEGORIES = ("DCGM_FR_EC_SOFTWARE_CONFIG", "DCGM_FR_EC_SOFTWARE_CUDA")
"""Categories in which DCGM's config severity names a setting of the node that breaks GPU work."""


def blame_of(category: str) -> tuple[str, str]:
    """(blame, role) of a DCGM error category (dcgmErrorCategory_t)."""
    if "HARDWARE" in category or "PERF" in category:
        return "hardware", "root"
    if "SOFTWARE" in category:
        return "environment", "root"
    return "none", "context"


def defines(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """The string macros of a header ({name: text}) with their line numbers; a macro of other macros and
    literals (``TRIAGE_RUN_FIELD_DIAG_MSG " ..."``) is resolved."""
    raw: dict[str, str] = {}
    where: dict[str, int] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _DEFINE.match(lines[i])
        start = i
        if m is None:
            i += 1
            continue
        body = m.group(2)
        while body.rstrip().endswith("\\") and i + 1 < len(lines):
            body = body.rstrip()[:-1] + " " + lines[i + 1].strip()
            i += 1
        raw[m.group(1)] = body.strip()
        where[m.group(1)] = start + 1
        i += 1
    out: dict[str, str] = {}
    for name, body in raw.items():
        parts = []
        for tok in re.findall(r'"(?:[^"\\]|\\.)*"|\w+', body):
            if tok.startswith('"'):
                parts.append(bytes(tok[1:-1], "utf-8").decode("unicode_escape"))
            elif tok in raw and raw[tok].startswith('"'):
                parts.append("".join(bytes(s, "utf-8").decode("unicode_escape") for s in _STRING.findall(raw[tok])))
        if parts:
            out[name] = "".join(parts)
    return out, where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitdir")
    ap.add_argument("--out", default=str(ROOT / "hangdbg" / "catalog" / "data"))
    args = ap.parse_args(argv)
    git = mn.Git(args.gitdir)
    tags = mn.newest_per_minor(git.tags(), _TAG, MIN_MAJOR)
    found: dict[str, dict] = {}  # format -> what the newest tag that has it says
    for tag in tags:  # oldest first: the newest tag that has a message gives its citation
        header, table = git.blob(f"{tag}:{HEADER}"), git.blob(f"{tag}:{TABLE}")
        if not header or not table:  # a release that kept them elsewhere
            continue
        text, where = defines(header)
        comment = {m.group(1): m.group(2).strip() for m in map(_ENUM.match, header.split("\n")) if m}
        meta = {m.group(1): (m.group(2), m.group(3)) for m in _ENTRY.finditer(table)}
        for code, (sev, cat) in meta.items():
            fmt = text.get(code + "_MSG", "").strip()
            if not fmt:
                continue
            f = found.setdefault(fmt, {"first": tag})
            f.update(code=code, tag=tag, line=where[code + "_MSG"], sev=sev, cat=cat,
                     what=comment.get(code, ""), next=text.get(code + "_NEXT", ""))
    lines = ["# hangdbg error catalog: NVIDIA DCGM's health and diagnostic error messages (dcgmlib/dcgm_errors.h).",
             f"# Generated by scripts/catalog/mine_dcgm.py from {REPO} at {', '.join(tags)} - do not edit by hand.",
             "# Blame from DCGM's error category, severity from DCGM's (isolate, reset, config: suspect).", "",
             'domain = "dcgm"', ""]
    seen: dict[str, int] = {}
    n = 0
    for fmt, f in sorted(found.items(), key=lambda kv: kv[1]["code"]):
        literal = len(mn.strip_placeholders(fmt).strip())
        if mn.bad_conversions(fmt) or literal < MIN_LITERAL or fmt.startswith("%") or f["sev"] == "DCGM_ERROR_NONE":
            continue
        blame, role = blame_of(f["cat"])
        if re.search(r"SKIP|DISABLED|ABORTED", f["code"]):
            blame, role = "none", "context"  # a test not run is no fault of the GPU or the node
        severity = SEVERITY.get(f["sev"], "warning") if role == "root" else "info"
        if f["sev"] == "DCGM_ERROR_CONFIG" and f["cat"] not in CONFIG_CATEGORIES:
            severity = "warning"  # DCGM's config severity on an abort or a file it could not write: no cause
        kind = f["cat"].removeprefix("DCGM_FR_EC_").replace("_", " ").lower()
        meaning = (f"DCGM reports {f['code']} ({f['what'] or kind}; category: {kind}, DCGM severity: "
                   f"{f['sev'].removeprefix('DCGM_ERROR_').lower()})")
        action = f["next"].strip() if f["next"].strip() not in ("", "N/A") else "read the DCGM diagnostic's full report"
        eid = mn.unique_id(seen, "dcgm." + f["code"].removeprefix("DCGM_FR_").lower().replace("_", "-"))
        lines += mn.entry_lines(eid, "printf", fmt, f"{REPO} {f['tag']} {HEADER}:{f['line']}",
                                f"{f['first']}..{f['tag']}", meaning, blame, role, severity, action)
        n += 1
    mn.write_data(Path(args.out) / "dcgm.toml", lines, f"{n} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
