"""Mine MPICH's error messages into hangdbg/catalog/data/mpich.toml.

MPICH (and the MPIs built on it: Intel MPI, MVAPICH, Cray MPICH) prints a failed call as an error stack:
``Fatal error in PMPI_Init_thread: Other MPI error, error stack:`` (src/mpi/errhan/errutil.c) followed by one
line per level, ``MPID_nem_tcp_init(379).............: gethostbyname failed, ac922 (errno 1)``. Every text
after the ``FUNC(LINE)...:`` head is a message of an ``errnames.txt`` file: ``**key:text`` (the generic
form) and ``**key %s %d:text with %s and %d`` (the specific one, printf-like: MPIR_Err_create_code's
conversions, of which MPICH's own ``%L %X %C %D %R %O %I %G %F %A %c %t`` are printed as text). Horovod's
``hvd.init()`` under MPICH, mpi4py and Slurm's PMI fail with these lines.

This script reads the pmodels/mpich git directory (the search tool's ``fetch``), takes the newest release
tag of every minor version from 3.0, reads every ``errnames.txt`` at that tag and classifies each message
by :data:`RULES` (by hand, from what the errnames key and text say failed: a host name that does not resolve,
shared memory, a connection to a peer, a process manager (PMI), a bad argument of the calling program).
A message needs :data:`MIN_LITERAL` literal characters: MPICH's short generic texts (``Out of memory``,
``Invalid argument``) are left to the other domains, which know them in context. Each entry cites the
newest tag and file:line that hold it; ``versions`` spans the tags that do.

    python scripts/catalog/mine_mpich.py /work/.mirror/pmodels+mpich/repo [--out hangdbg/catalog/data]

Stdlib only (imports mine_nccl.py's git reader and printf helpers).
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
REPO = "pmodels/mpich"
_TAG = re.compile(r"v(\d+)\.(\d+)(?:\.(\d+))?(?:p(\d+))?$")
_LINE = re.compile(r"^\*\*(?P<key>[^\s:]+)(?P<specs>(?: %\w)*):(?P<text>.*\S)\s*$")
_MPICH_CONV = re.compile(r"%(?![sdiuxpc%])[A-Za-z]")  # MPICH's own conversions (%L, %C, %D, %t ...): text
MIN_LITERAL = 18
MIN_MAJOR = 3


def minor_tags(tags: list[str]) -> list[str]:
    """The newest release tag of each minor version from :data:`MIN_MAJOR` (``v4.1.2`` for 4.1), oldest first."""
    return mn.newest_per_minor(tags, _TAG, MIN_MAJOR)


@dataclass
class Found:
    fmt: str
    key: str
    tags: list[str]
    path: str
    line: int


def extract(git: mn.Git, tag: str) -> list[tuple[str, str, str, int]]:
    """``(format, key, path, line)`` of every errnames.txt message at ``tag``."""
    out = []
    for path, blob in git.tree(tag, "src"):
        if not path.endswith("errnames.txt") or path.endswith("baseerrnames.txt"):
            continue
        for no, raw in enumerate(git.blob(blob).splitlines(), 1):
            m = _LINE.match(raw)
            if m is None:
                continue
            text = _MPICH_CONV.sub("%s", m.group("text").strip())
            out.append((text, m.group("key"), path, no))
    return out


# (regex on the text, blame, role, severity, meaning, action), first match wins
NAMES = ("make every node's host name resolve on every node, in the container too (DNS or /etc/hosts: "
         "`getent hosts $(hostname)`), or give MPICH the interface or address to use (-iface, "
         "MPIR_CVAR_CH3_INTERFACE_HOSTNAME / MPIR_CVAR_CH4_NETMOD ... settings)")
RULES: list[tuple[str, str, str, str, str, str]] = [
    (r"gethostbyname|getaddrinfo|gethostbyaddr|gethostname|[Uu]nable to resolve|host ?name.{0,30}(?:resolv|lookup|not found)",
     "environment", "root", "suspect",
     "a host name did not resolve on this node (DNS or /etc/hosts): MPICH could not find the address of a host "
     "it needs, often the node's own name (a container or a fresh node without its name in /etc/hosts)", NAMES),
    (r"(?:[Uu]nable to|[Ff]ailed to|[Cc]ould not) (?:allocate|attach|map|open|resize|create|init)\w*[^.]{0,20}"
     r"(?:shared memory|shm)|shmat failed|shmget failed|mmap failed|[Ss]hared memory subsystem unable to allocate",
     "environment", "root", "suspect",
     "MPICH could not create or attach the shared memory its processes on one node share: /dev/shm is too "
     "small or not shared (a container's default 64 MB), or the memory is exhausted",
     "give the job a larger /dev/shm (docker --shm-size / --ipc=host, a Kubernetes emptyDir of medium Memory) "
     "and check the node's free memory"),
    (r"[Oo]ut of memory|[Uu]nable to allocate|[Cc]ould not allocate|[Ff]ailed to allocate|nomem",
     "environment", "root", "warning",
     "MPICH could not allocate memory on this node", "check the node's free memory and the locked-memory "
     "limit (ulimit -l)"),
    (r"[Pp]roc(?:ess)?[ _]?fail|[Tt]erminated|died|[Rr]evoked|[Aa]bort|[Kk]illed|exited",
     "peer", "consequence", "warning",
     "another MPI process failed or was terminated; this one reports it", "find the process that failed "
     "first (its own error stack, the launcher's exit codes)"),
    (r"[Cc]onnect|[Ss]ocket|sock|[Cc]ommunication|[Pp]eer|[Cc]losed|[Rr]efused|[Rr]eset|[Uu]nreachable|"
     r"[Tt]imed? ?out|[Nn]etwork|[Ii]nterface|ibv_|[Ii]nfini[Bb]and|verbs|\bofi\b|\bucx\b|\bUCX\b|fi_\w+",
     "peer", "consequence", "warning",
     "a connection to another MPI process failed or broke: that process died, or the network path to it "
     "(interface, firewall, fabric) is blocked", "check that every process is alive and that the nodes reach "
     "each other on the interface MPICH uses (pick it with -iface / FI_PROVIDER / UCX_NET_DEVICES)"),
    (r"\bPMI|\bpmi|[Kk]vs|KVS|hydra|[Hh]ydra|[Ss]pawn|[Uu]niverse|appnum|[Pp]rocess manager",
     "launch", "root", "warning",
     "MPICH could not talk to its process manager (PMI: Hydra's mpiexec, Slurm's srun): the launch does not "
     "match the MPI library (an MPI launched without its mpiexec, a PMI version the launcher lacks)",
     "launch with the mpiexec of the same MPI, or tell srun the PMI the library uses (srun --mpi=pmi2 / pmix)"),
    (r"[Ii]nvalid|must be|not initialized|already (?:called|finalized)|[Nn]ull |[Nn]egative|[Mm]ismatch|"
     r"[Tt]runcat|not (?:implemented|supported)|[Ww]rong|[Ii]llegal|out of range|does not match",
     "self", "root", "warning",
     "an MPI call was made with an invalid argument or in a wrong state: a bug of the program (or of the "
     "framework above MPI) on this process", "read the error stack's top line (the MPI call) and its "
     "arguments in the program"),
]
DEFAULT = ("none", "context", "info",
           "a line of an MPICH error stack: one level of the failed MPI call; the lines below it say more",
           "read the last lines of the error stack: they name what failed")


def classify(key: str, fmt: str) -> tuple[str, str, str, str, str]:
    return mn.first_rule(RULES, DEFAULT, fmt)  # on the text: a key (``**shm_open``) names the module, not what failed


def slug(key: str, fmt: str) -> str:
    words = re.findall(r"[a-z0-9]+", key.lower()) + re.findall(r"[a-z0-9]+", mn.strip_placeholders(fmt).lower())[:4]
    return "-".join(words[:6]) or "error"


def literal_length(fmt: str) -> int:
    return len(mn.strip_placeholders(fmt).strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gitdir")
    ap.add_argument("--out", default=str(ROOT / "hangdbg" / "catalog" / "data"))
    args = ap.parse_args(argv)
    git = mn.Git(args.gitdir)
    tags = minor_tags(git.tags())
    found: dict[str, Found] = {}
    for tag in tags:  # oldest first: the newest tag that has a message gives its citation
        for fmt, key, path, line in extract(git, tag):
            f = found.get(fmt)
            if f is None:
                found[fmt] = Found(fmt, key, [tag], path, line)
            elif f.tags[-1] != tag:
                f.tags.append(tag)
                f.key, f.path, f.line = key, path, line
    seen: dict[str, int] = {}
    lines = ["# hangdbg error catalog: MPICH's error-stack messages (src/**/errnames.txt).",
             f"# Generated by scripts/catalog/mine_mpich.py from {REPO} at {', '.join(tags)} - do not edit by hand.",
             "# Classified by the script's RULES; MPICH's own conversions (%L, %C, %t ...) are read as text.",
             "", 'domain = "mpich"', "",
             "[[entry]]", 'id = "mpich.fatal-error-stack"', 'syntax = "printf"',
             'format = "Fatal error in %s: %s, error stack:"',
             f'source = "{REPO} v4.1.2 src/mpi/errhan/errutil.c:445"',
             'meaning = "an MPI call failed and MPICH aborts the process: the error class follows the call\'s '
             'name and the error stack below says what failed (its last lines most precisely)"',
             'blame = "none"', 'role = "consequence"', 'severity = "warning"',
             'action = "read the error stack\'s last lines: they name the failure (a host name, shared memory, '
             'a connection)"', ""]
    n = 1
    for fmt in sorted(found, key=lambda x: (found[x].path, found[x].line)):
        f = found[fmt]
        if mn.bad_conversions(fmt) or literal_length(fmt) < MIN_LITERAL or len(fmt.split()) < 3:
            continue
        b, r, s, m, a = classify(f.key, fmt)
        eid = mn.unique_id(seen, "mpich." + slug(f.key, fmt))
        syntax = "printf" if mn.strip_placeholders(fmt) != fmt else "literal"
        lines += mn.entry_lines(eid, syntax, fmt, f"{REPO} {f.tags[-1]} {f.path}:{f.line}",
                                f.tags[0] + ".." + f.tags[-1], m, b, r, s, a)
        n += 1
    mn.write_data(Path(args.out) / "mpich.toml", lines, f"{n} entries from {len(tags)} tags")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
