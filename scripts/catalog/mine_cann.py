"""Mine Huawei Ascend CANN's documented error codes into hangdbg/catalog/data/ascend.toml.

CANN (the NPU stack under torch_npu; HCCL is its collective library, HCCP its network process) prints a
failure as an error code line: ``EI0006: 2024-05-21-11:57:54.167.645 Getting socket times out. Reason: ...``,
in newer releases ``[PID: N] TIME Communication_Error_Get_Socket(EI0006): Getting socket times out. ...``.
Each code (``E`` + a component letter or digit + four digits: EI HCCL, EJ HCCP, EE runtime, EL driver, EH ACL,
EZ AI Core, E1 GE) is documented with its message template ("Symptom"), cause and solution: in the CANN error
code reference on www.hiascend.com (``maintenref/troubleshooting/atlaserrorcode_*``) and in CANN's own
repositories (hicann/runtime ``src/dfx/error_manager/error_code.json``, hicann/hcomm's docs, cann/ge's docs).

``scripts/catalog/cann_docs.jsonl`` holds those records as read from the documentation, one per line (code,
title, symptom, cause, solution, url, component, version), older wordings of a message as extra lines of the
same code. This script classifies each by :data:`RULES` (by hand, on the code's title and message: a timeout
waiting for another rank, a launch or rank-table configuration, an exhausted resource, a port or process left
over, a device or link fault, a kernel fault on the NPU) and writes one entry per message. A message of fewer
than :data:`MIN_LITERAL` literal characters (``Internal Error!``), or one that several codes share (``%s failed.
Reason: %s.``), or one that starts with a placeholder, is written with its code in front, so that only a line that carries the code finds it. Every
entry names its code (``msgcode``): the reader peels the code off a line and looks the entry up by it first.

    python scripts/catalog/mine_cann.py [--docs scripts/catalog/cann_docs.jsonl] [--out hangdbg/catalog/data]

Stdlib only (imports mine_nccl.py's TOML helpers).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mine_nccl as mn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOCS = Path(__file__).resolve().parent / "cann_docs.jsonl"
MIN_LITERAL = 30
_PLACEHOLDER = re.compile(r"\$\{\w+\}|<\w[\w ]{0,30}>|\{\w+\}")  # the documentation's other placeholder notations

WAITS = ("another rank did not reach the collective or its network peer stopped answering: this rank waited past "
         "its timeout, a consequence", "find the rank that failed or stalled first (its own error code line, an "
         "earlier error on other NPUs); raise HCCL_CONNECT_TIMEOUT / HCCL_EXEC_TIMEOUT only for a slow start")
# (regex on "title symptom", blame, role, severity, meaning, action), first match wins
RULES: list[tuple[str, str, str, str, str, str]] = [
    (r"[Tt]ime ?out|times out|did not send|wait(?:s|ing) (?:for|peer)", "peer", "consequence", "warning", *WAITS),
    (r"Package_Error|[Vv]ersions? (?:are |is )?inconsistent|version capability", "environment", "root", "suspect",
     "the CANN, driver or HCCL versions differ between the nodes or do not match each other",
     "install the same CANN, driver and firmware (and torch_npu) versions on every node"),
    (r"Config_Error|[Rr]anktable|rank table|[Ee]nvironment variable|Environment_Variable", "launch", "root", "suspect",
     "the launch configuration is invalid: an HCCL/CANN environment variable, the rank table file or a "
     "communicator setting", "fix the named setting (the HCCL_* / ASCEND_* variable, the rank table file) on every node"),
    (r"inconsistent between ranks", "self", "root", "suspect",
     "the ranks called a collective with different arguments (operator, data type, count, group): the program "
     "diverged between ranks", "make every rank call the same collectives with matching tensors; the local and "
     "remote rank in the message show which pair differs"),
    (r"Insufficient_(?:Device|Host)_Memory|Memory_Allocation|[Mm]emory resources are exhausted|bytes of (?:NPU|host|device)? ?memory",
     "environment", "root", "suspect", "memory of the NPU or of the host ran out",
     "lower memory use (batch size, cached blocks, HCCL_BUFFSIZE) or free the NPU of other processes"),
    (r"Bind_IP_Port|last training process|HCCP_Process|Resource_Busy|resources are busy", "environment", "root",
     "suspect", "a resource of this node is taken: a port already bound, an NPU still held by a previous "
     "training process", "kill the leftover training processes on the node (npu-smi info shows them), wait a few "
     "seconds, and start again; give each job its own ports"),
    (r"port is down|Device_Absent|Device not found|Invalid_Device_Access|device access is invalid", "hardware",
     "root", "suspect", "an NPU or its network port is absent, down or not accessible on this node",
     "check the NPU and its network port (npu-smi info, hccn_tool -i N -link -g); drain the node if it stays down"),
    (r"CQE|SDMA|Transport init|P2P_Communication|P2P communication|Get_Socket|socket", "environment", "root",
     "warning", "the connection or a transfer between two NPUs failed: a peer died or the link between them "
     "(device IPs, RoCE) is broken", "read the peer in the message and its own errors; check the device network "
     "of both (hccn_tool -i N -net_health -g, -link -g)"),
    (r"AI Core|aicore|aivec|[Kk]ernel execute failed", "self", "root", "suspect",
     "a kernel failed on this NPU (an AI Core or vector exception: an out-of-range access, bad input, an operator bug)",
     "rerun with ASCEND_LAUNCH_BLOCKING=1 to find the operator, and check its inputs; look for an earlier error"),
    (r"No_Permission|no permission", "environment", "root", "suspect",
     "the process has no permission to use the NPU or a CANN resource", "run as a user in the NPU's group "
     "(HwHiAiUser) or pass the devices into the container"),
    (r"Insufficient_\w+_Resources|resources are insufficient|Full_Service_Queue|Resource_Error", "environment",
     "root", "warning", "a device resource (streams, events, notifies, memory) ran out on this NPU",
     "lower the number of streams or models per NPU, or free the NPU of other processes"),
    (r"Not_Supported|not supported|unsupported", "environment", "root", "warning",
     "the CANN stack, driver or NPU does not support what was asked", "match the CANN, driver and torch_npu "
     "versions to the NPU model"),
    (r"Inner_Error|Internal Error|[Uu]nknown error", "none", "consequence", "warning",
     "a CANN component failed internally; the lines before it say what failed",
     "read the error code lines and the plog logs before it"),
    (r"Invalid_Argument|invalid|NULL pointer|must not be null", "self", "root", "warning",
     "a CANN API was called with an invalid argument: a bug of the program or of the framework above CANN",
     "read the named call and parameter"),
]
DEFAULT = ("self", "root", "warning", "a CANN error on this NPU", "read the error code line and the plog logs")


def classify(title: str, symptom: str) -> tuple[str, str, str, str, str]:
    return mn.first_rule(RULES, DEFAULT, f"{title} {symptom}")


def template(symptom: str) -> str:
    """The documented message as a printf format: the documentation's ``${x}`` / ``<x>`` / ``{x}`` as ``%s``."""
    return _PLACEHOLDER.sub("%s", symptom.strip())


def _ascii(text: str) -> str:
    t = " ".join(text.split())
    return t if t and t.upper() not in ("N/A", "NA") and sum(c.isascii() for c in t) > 0.9 * len(t) else ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", default=str(DOCS))
    ap.add_argument("--out", default=str(ROOT / "hangdbg" / "catalog" / "data"))
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in Path(args.docs).read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = ["# hangdbg error catalog: Huawei Ascend CANN's documented error codes (HCCL, HCCP, runtime, driver, ACL,",
             "# AI Core, GE). Generated by scripts/catalog/mine_cann.py from scripts/catalog/cann_docs.jsonl (the CANN",
             "# error code reference and CANN's repositories, each entry's source) - do not edit by hand.",
             "# Classified by the script's RULES; a short message is written with its code in front.", "",
             'domain = "ascend"', ""]
    seen: dict[str, int] = {}
    formats: set[str] = set()
    codes_of: dict[str, set[str]] = {}  # a message template -> the codes that document it
    for row in rows:
        codes_of.setdefault(template(row["symptom"]), set()).add(row["code"])
    for row in rows:
        code, title, fmt = row["code"], row.get("title", ""), template(row["symptom"])
        if not re.fullmatch(r"E[A-Z1-9]\d{4}", code) or not fmt:
            continue
        if mn.bad_conversions(fmt) or len(mn.strip_placeholders(fmt).strip()) < MIN_LITERAL or len(codes_of[fmt]) > 1 \
                or fmt.startswith("%"):
            fmt = f"{code}: {fmt}"  # too short or generic to know alone, or shared by codes: only with its code
        if fmt in formats:
            continue
        formats.add(fmt)
        b, r, s, m, a = classify(title, row["symptom"])
        words = title.replace("_", " ").strip()
        meaning = f"CANN {row.get('component', '')} error {code} ({words}): {m}".replace("  ", " ")
        cause = _ascii(row.get("cause", ""))
        if cause:
            meaning += f"; documented cause: {cause[:300]}"
        action = _ascii(row.get("solution", ""))[:400] or a
        eid = mn.unique_id(seen, f"ascend.cann.{code.lower()}")
        syntax = "printf" if mn.strip_placeholders(fmt) != fmt else "literal"
        lines += mn.entry_lines(eid, syntax, fmt, row["url"], str(row.get("version", "")), meaning, b, r, s, action)
        lines.insert(len(lines) - 1, f"msgcode = {mn.toml_str(code)}")
    mn.write_data(Path(args.out) / "ascend.toml", lines, f"{len(formats)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
