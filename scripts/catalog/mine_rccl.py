"""Mine RCCL's own WARN messages into hangdbg/catalog/data/nccl_rccl.toml.

RCCL (ROCm/rccl) is AMD's fork of NCCL: it prints NCCL's log lines (``host:pid:tid [dev] NCCL WARN ...``) and
keeps most of NCCL's formats, which the NCCL part of the catalog already knows. This script reads the RCCL git
directory (the search tool's ``fetch``), takes the newest tag of every ROCm minor release from 5.0, extracts each
single-literal ``WARN("...")`` format of ``src/`` and keeps the ones no catalog entry reads yet (a line built from
the format is offered to the catalog, as tests/test_catalog.py does): RCCL's additions - XGMI topology, the
clique kernels' shared memory, MSCCL algorithms, the host settings it checks (amd_iommu, NUMA balancing,
HSA_FORCE_FINE_GRAIN_PCIE), ROCr failures. Each is classified by :data:`RULES` (by hand, from what RCCL's
code does at that call) and cites the newest tag and file:line that hold it; ``versions`` spans the tags.

    python scripts/catalog/mine_rccl.py /work/.mirror/ROCm+rccl/repo [--out hangdbg/catalog/data]

Reads, never runs, upstream code; imports hangdbg's catalog to tell the formats it already knows.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import mine_nccl as mn  # noqa: E402

REPO = "ROCm/rccl"
_TAG = re.compile(r"rocm-(\d+)\.(\d+)(?:\.(\d+))?$")
_WARN = re.compile(r'(?<![\w.>])WARN\(\s*"((?:[^"\\]|\\.)*)"\s*[,)]')
_CONV = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([diouxXsp])")
MIN_MAJOR = 5


def minor_tags(tags: list[str]) -> list[str]:
    """The newest tag of each ROCm minor release from :data:`MIN_MAJOR`, oldest first."""
    return mn.newest_per_minor(tags, _TAG, MIN_MAJOR)


def extract(gitdir: str, tag: str) -> list[tuple[str, str, int]]:
    """``(format, path, line)`` of every single-literal WARN call under src/ at ``tag``."""
    out = subprocess.run(["git", "-C", gitdir, "grep", "-n", "-E", r'WARN\(\s*"', tag, "--", "src"],
                         capture_output=True, text=True, check=False).stdout
    found = []
    for row in out.splitlines():
        _, path, no, code = row.split(":", 3)
        m = _WARN.search(code)
        if m is not None:
            fmt = m.group(1).replace('\\"', '"').replace("\\n", "").rstrip()
            found.append((fmt, path, int(no)))
    return found


def sample(fmt: str) -> str:
    """A line built from ``fmt`` (numbers for the integer conversions, a word for the others)."""
    return _CONV.sub(lambda m: "7" if m.group(1) in "diouxX" else "abc", fmt).replace("%%", "%")


# (regex on the format, blame, role, severity, meaning, action), first match wins
RULES: list[tuple[str, str, str, str, str, str]] = [
    (r"Duplicate virtualId detected", "launch", "root", "suspect",
     "two ranks of one communicator were given the same GPU (RCCL's virtual device id)",
     "give each rank its own GPU (HIP_VISIBLE_DEVICES / torch.cuda.set_device(local_rank))"),
    (r"amd_iommu|iommu=pt|HSA_FORCE_FINE_GRAIN_PCIE|NUMA auto balancing", "environment", "context", "warning",
     "RCCL found a host setting it warns about (kernel command line, NUMA balancing, an HSA variable): it can make "
     "collectives slow, unstable or hang on this node",
     "apply the setting the line names on every node (AMD's RCCL / ROCm system tuning guides)"),
    (r"ROCr failure|hsa_|HSA", "environment", "root", "warning",
     "a ROCm runtime (ROCr / HSA) call made by RCCL failed on this rank's node",
     "check the node's ROCm driver and runtime (rocm-smi, dmesg for amdgpu errors)"),
    (r"XGMI|rsmi|topology|link properties|node #|GPU id of node|rev link", "environment", "root", "warning",
     "RCCL could not read the node's GPU topology (XGMI links, the KFD topology files it reads instead of ROCm SMI)",
     "check the amdgpu driver and /sys/class/kfd/kfd/topology on that node; compare with a working node"),
    (r"Clique|clique|ShmObject|shm_open|shm_unlink|Message Queue|MsgQueue|pinned host memory|IPC handle",
     "environment", "root", "warning",
     "RCCL's single-node clique kernels could not set up their shared memory or IPC (RCCL then falls back)",
     "check /dev/shm and the IPC limits on the node; RCCL_ENABLE_CLIQUE=0 disables the clique path"),
    (r"MSCCL|msccl", "launch", "root", "warning",
     "RCCL's MSCCL algorithm support rejected its configuration or an algorithm file",
     "check the MSCCL settings and algorithm files (RCCL_MSCCL_ENABLE=0 turns MSCCL off)"),
    (r"gdr_", "environment", "root", "warning",
     "a GPUDirect RDMA copy helper call failed on this rank's node", "check the GDR setup of the node"),
]
DEFAULT = ("none", "consequence", "warning",
           "RCCL (ROCm's NCCL) reported an error (its own message, not one of NCCL's); the lines around it say more",
           "read RCCL's message and the NCCL_DEBUG=INFO lines before it")


def classify(fmt: str) -> tuple[str, str, str, str, str]:
    return mn.first_rule(RULES, DEFAULT, fmt)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitdir")
    ap.add_argument("--out", default=str(ROOT / "hangdbg" / "catalog" / "data"))
    args = ap.parse_args(argv)
    out_file = Path(args.out) / "nccl_rccl.toml"
    if out_file.exists():
        out_file.unlink()  # the catalog below must not know these formats through an earlier run
    from hangdbg.catalog.catalog import Catalog, data_files, parse_entries
    docs = [(name, __import__("tomllib").loads(data.decode())) for name, data in data_files()]
    catalog = Catalog([e for name, doc in docs for e in parse_entries(doc, name.removesuffix(".toml"))])
    tags = minor_tags(subprocess.run(["git", "-C", args.gitdir, "tag", "--list"], capture_output=True, text=True,
                                     check=True).stdout.split())
    found: dict[str, list] = {}
    for tag in tags:  # oldest first: the newest tag holding a format gives its citation
        for fmt, path, line in extract(args.gitdir, tag):
            f = found.setdefault(fmt, [[], path, line])
            f[0].append(tag)
            f[1], f[2] = path, line
    lines = ["# hangdbg error catalog: RCCL's own WARN messages (AMD's fork of NCCL) that NCCL's formats do not cover.",
             f"# Generated by scripts/catalog/mine_rccl.py from {REPO} at {', '.join(tags)} - do not edit by hand.",
             "# Classified by the script's RULES.", "", 'domain = "nccl"', ""]
    seen: dict[str, int] = {}
    n = 0
    for fmt in sorted(found, key=lambda x: (found[x][1], found[x][2])):
        tags_of, path, line = found[fmt]
        if mn.bad_conversions(fmt) or len(mn.strip_placeholders(fmt).strip()) < 12:
            continue
        if catalog.search(sample(fmt)) is not None:
            continue  # NCCL's own format, already read
        b, r, s, m, a = classify(fmt)
        words = re.findall(r"[a-z0-9]+", mn.strip_placeholders(fmt).lower())
        eid = mn.unique_id(seen, "nccl.rccl." + ("-".join(words[:6]) or "warn"))
        syntax = "printf" if _CONV.search(fmt) else "literal"
        lines += mn.entry_lines(eid, syntax, fmt, f"{REPO} {tags_of[-1]} {path}:{line}",
                                tags_of[0] + ".." + tags_of[-1], m, b, r, s, a)
        n += 1
    mn.write_data(out_file, lines, f"{n} entries from {len(tags)} tags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
