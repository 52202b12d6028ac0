"""Mine the AWS OFI NCCL net plugin's WARN messages into hangdbg/catalog/data/nccl_ofi.toml.

aws/aws-ofi-nccl is the NCCL network plugin for AWS EFA (and other libfabric providers). Every warning
goes through ``NCCL_OFI_WARN(fmt, ...)`` (include/nccl_ofi_log.h), which hands NCCL's logger the
function name, the line and ``"NET/OFI " fmt``: NCCL prints ``host:pid:tid [dev] FUNC:LINE NCCL WARN
NET/OFI <message>``. This script reads the plugin's git directory (the search tool's ``fetch``), takes
the newest tag of every minor release, extracts each ``NCCL_OFI_WARN`` format (string literals and PRI
macros joined, with mine_nccl.py's C lexer) and classifies it by the rules in :data:`RULES` (written by
hand from what the plugin's code does at that call: the libfabric call that failed, the resource). Each
entry cites the newest tag and file:line that hold it; ``versions`` spans the tags that do.

    python scripts/catalog/mine_ofi.py /work/.mirror/aws+aws-ofi-nccl/repo [--out hangdbg/catalog/data]

Stdlib only (imports mine_nccl.py's lexer).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mine_nccl as mn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPO = "aws/aws-ofi-nccl"
PREFIX = "NET/OFI "
_CALL = re.compile(r"(?<![\w.>])NCCL_OFI_WARN\s*\(")
_TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)(?:-aws|aws)?$")
MIN_LITERAL = 12


def minor_tags(tags: list[str]) -> list[str]:
    """The newest tag of each minor release (``v1.7.4-aws`` for 1.7), oldest first."""
    return mn.newest_per_minor(tags, _TAG)


@dataclass
class Found:
    fmt: str
    tags: list[str]
    path: str
    line: int


def extract(git: mn.Git, tag: str) -> list[tuple[str, str, int]]:
    """``(format, path, line)`` of every NCCL_OFI_WARN call with a literal format at ``tag``."""
    out = []
    for under in ("src", "include"):
        try:
            files = git.tree(tag, under)
        except Exception:  # noqa: BLE001 - an old tag without that directory
            continue
        for path, blob in files:
            if not path.endswith(mn.SRC_EXT) or "/tests/" in path:
                continue
            src = mn.lex(path, git.blob(blob))
            for m in _CALL.finditer(src.code):
                if src.in_string(m.start()) or src.define_at(m.start()) is not None:
                    continue
                got = mn.call_args(src.code, m.end() - 1)
                if got is None or not got[0]:
                    continue
                pieces = mn.format_pieces(got[0][0])
                if pieces is None:
                    continue
                fmt = ""
                for kind, text in pieces:
                    if kind == "lit":
                        fmt += text
                    elif kind == "id" and text in mn._PRI:
                        fmt += "%" + mn._PRI[text]
                    else:
                        fmt = ""
                        break
                fmt = fmt.rstrip("\n").split("\n")[0].strip()
                if fmt and mn.literal_chars(fmt) >= MIN_LITERAL:
                    out.append((PREFIX + fmt, path, src.line_of(m.start())))
    return out


# (regex on the format, blame, role, severity, meaning, action), first match wins
ENV = ("check the node's EFA setup: fi_info -p efa lists the devices; the EFA installer (libfabric, driver) is "
       "recent enough for this NCCL and plugin; in a container, /dev/infiniband is mounted and the EFA device "
       "requested")
RULES: list[tuple[str, str, str, str, str, str]] = [
    (r"[Dd]e-?[Rr]egister|dereg|[Cc]lose|[Ff]ree|[Dd]estroy|[Ff]inaliz|[Rr]elease",
     "none", "consequence", "warning",
     "tearing down a plugin resource (closing, freeing, de-registering) failed: usually after an earlier "
     "failure, or at exit", "look for the plugin's or NCCL's first error before this line"),
    (r"optimal provider|find any provider|no provider|Couldn't find .*provider|Unable to find .*provider|"
     r"provider.*not (?:found|available)",
     "environment", "root", "suspect",
     "libfabric found no provider the plugin can use on this node (the EFA provider is missing: no EFA "
     "device, the EFA driver not loaded, libfabric too old, or /dev/infiniband not in the container); NCCL "
     "falls back to TCP sockets or fails", ENV),
    (r"register memory|[Rr]egistration|fi_mr_reg|regMr|register .*buffer|MR key",
     "environment", "root", "suspect",
     "registering GPU or host memory with libfabric failed: GPUDirect RDMA is not usable with this "
     "libfabric / driver (an EFA installer older than this NCCL needs, dma-buf or nvidia-peermem "
     "missing), or the locked-memory limit is too low",
     "upgrade the EFA installer (libfabric) to one this NCCL version supports, check the nvidia-peermem / "
     "dma-buf support, and raise ulimit -l (memlock) to unlimited"),
    (r"completed with error|prov_errno|fi_cq_readerr|[Cc]ompletion error|CQ error|cq_readerr",
     "peer", "root", "warning",
     "a libfabric operation to a peer completed with an error: the EFA path to that peer failed (the peer "
     "process died, the security group does not let the instances talk to each other, or a network fault)",
     "check that the peer is alive and that the EFA security group allows all traffic to and from itself; "
     "read prov_errno with fi_strerror / the EFA provider's error table"),
    (r"fi_getinfo|fi_fabric|fi_domain|fi_endpoint|fi_av_open|fi_cq_open|fi_enable|Couldn't open|Couldn't "
     r"allocate (?:domain|endpoint|fabric)|[Ff]ailed to (?:open|create|initialize) (?:fabric|domain|endpoint|"
     r"address vector|completion queue)",
     "environment", "root", "suspect",
     "setting up libfabric (fabric, domain, endpoint, queues) failed on this node: the EFA device or its "
     "driver is not usable from this process", ENV),
    (r"(?:set to )?invalid value|[Ii]nvalid (?:value|setting) for|is deprecated|must be (?:set|one of|"
     r"between)|not supported with|unsupported (?:value|configuration)",
     "launch", "root", "warning",
     "an OFI_NCCL_* / FI_* setting of the launch has a value the plugin rejects", "fix the named environment "
     "variable (see the plugin's README for its values)"),
    (r"fi_send|fi_recv|fi_write|fi_read|fi_inject|fi_senddata|fi_tsend|fi_trecv|[Uu]nable to (?:send|post|"
     r"receive)|[Ff]ailed to (?:send|post|receive|write|read)",
     "peer", "root", "warning",
     "posting a libfabric send, receive or RDMA operation failed: the connection to the peer is broken (it "
     "died, or the EFA path between the instances failed)", "check the peer's log and the EFA security group"),
    (r"[Oo]ut of memory|[Uu]nable to allocate|[Cc]ould not allocate|[Ff]ailed to allocate|malloc|calloc|"
     r"freelist|mmap",
     "self", "root", "warning",
     "the plugin could not allocate memory (host memory, pinned buffers or a free list) on this rank",
     "check host memory and the locked-memory limit (ulimit -l) on the node"),
    (r"[Cc]onnect|[Hh]andshake|[Cc]onnection",
     "peer", "root", "warning",
     "setting up the plugin's connection to a peer failed: the peer is not up, died, or the EFA path "
     "between the two instances is blocked", "check the peer's log and the EFA security group (all "
     "traffic to and from itself)"),
    (r"CUDA|cuda|GPU|gdr|GDR|dmabuf|dma-buf|nvidia",
     "environment", "root", "warning",
     "the plugin's use of the GPU (CUDA calls, GPUDirect RDMA, GDRCopy) failed on this node",
     "check the driver, nvidia-peermem / dma-buf support and the CUDA runtime the plugin loads"),
]
DEFAULT = ("environment", "root", "warning",
           "the AWS OFI NCCL plugin (NCCL over libfabric / EFA) reported an error on this node",
           "read the plugin's message; check the EFA setup (fi_info -p efa, the EFA installer version)")


def classify(fmt: str) -> tuple[str, str, str, str, str]:
    body = fmt[len(PREFIX):]
    return mn.first_rule(RULES, DEFAULT, body)


def slug(fmt: str) -> str:
    words = re.findall(r"[a-z0-9]+", mn.strip_placeholders(fmt[len(PREFIX):]).lower())
    return "-".join(words[:6]) or "warn"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitdir")
    ap.add_argument("--out", default=str(ROOT / "hangdbg" / "catalog" / "data"))
    args = ap.parse_args(argv)
    git = mn.Git(args.gitdir)
    tags = minor_tags(git.tags())
    found: dict[str, Found] = {}
    for tag in tags:  # oldest first: the newest tag that has a format gives its citation
        for fmt, path, line in extract(git, tag):
            f = found.get(fmt)
            if f is None:
                found[fmt] = Found(fmt, [tag], path, line)
            else:
                f.tags.append(tag)
                f.path, f.line = path, line
    seen: dict[str, int] = {}
    lines = ["# hangdbg error catalog: the AWS OFI NCCL net plugin's warnings (NCCL over libfabric / EFA).",
             f"# Generated by scripts/catalog/mine_ofi.py from {REPO} at {', '.join(tags)} - do not edit by hand.",
             "# Each format is NCCL_OFI_WARN's (include/nccl_ofi_log.h adds \"NET/OFI \"); classified by the script's RULES.",
             "", 'domain = "nccl"', ""]
    n = 0
    for fmt in sorted(found, key=lambda x: (found[x].path, found[x].line)):
        f = found[fmt]
        if mn.bad_conversions(fmt):
            continue
        b, r, s, m, a = classify(fmt)
        eid = mn.unique_id(seen, "nccl.ofi." + slug(fmt))
        newest = f.tags[-1]
        lines += mn.entry_lines(eid, "printf", fmt, f"{REPO} {newest} {f.path}:{f.line}", f.tags[0] + ".." + newest,
                                m, b, r, s, a)
        n += 1
    mn.write_data(Path(args.out) / "nccl_ofi.toml", lines, f"{n} entries from {len(tags)} tags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
