"""Write hangdbg/catalog/data/system.toml and frameworks.toml (the catalog's system and framework parts).

The entries are chosen and classified by hand below (meaning, blame, role, severity, action: see
docs/catalog.md); this script only finds each message's
upstream line and writes the citation, so that every ``file:line`` is the line at the tag that holds
the message. It reads, never runs, upstream code:

* git directories brought by the search tool's ``fetch`` (``git grep`` / ``git show TAG:path``, no
  work tree): SchedMD/slurm, bminor/glibc, bminor/bash, openssh/openssh-portable, chaos/pdsh,
  linux-rdma/rdma-core, deepspeedai/DeepSpeed, NVIDIA/Megatron-LM, huggingface/accelerate,
  Lightning-AI/pytorch-lightning, horovod/horovod, inclusionAI/AReaL;
* the Python files of released wheels, for repositories too large to fetch (ray-project/ray,
  vllm-project/vllm, sgl-project/sglang) and CPython's ``Lib/`` of a pyenv build: a
  wheel's ``.py`` files are the tag's files, so ``ray-2.60.0 python/ray/exceptions.py:463`` is read
  in ``ray-2.60.0``'s wheel at ``ray/exceptions.py`` line 463 (the wheel is read as a zip);
* documentation URLs for the rest (the Linux kernel's ``mm/oom_kill.c``, which no stored copy holds
  at a tag, Ray's C++ raylet/GCS messages, Python's faulthandler, Kubernetes), cited without a line.
  Ray's C++ texts were checked against the strings of ray 2.60.0's raylet and gcs_server binaries.

Only message texts (with their placeholders) and citations are written; no upstream code.

Usage::

    pip download --no-deps --only-binary :all: --python-version 3.11 --platform manylinux2014_x86_64 \\
        ray==2.60.0 -d /tmp/sysfw/whl        # likewise vllm==0.11.2 (3.12, manylinux1) and sglang==0.5.10.post1
    python scripts/catalog/mine_frameworks.py [--mirrors /work/.mirror] [--wheels /tmp/sysfw/whl]
        [--check] [--out hangdbg/catalog/data]

``--check`` resolves and verifies every citation (the cited line holds the searched text, the text
appears in the entry's format) and the entries' form (ids, keys, literal length) without writing.
Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------
# Sources


@dataclass
class Git:
    """A fetched git directory; tags are tried newest first until one holds the text."""

    dirname: str  # under --mirrors: owner+name
    repo: str  # owner/name as cited
    tag_re: str  # release tags to consider
    limit: int = 60

    _tags: list[str] | None = None

    def tags(self, mirrors: Path) -> list[str]:
        if self._tags is None:
            out = subprocess.run(["git", "-C", str(mirrors / self.dirname / "repo"), "tag", "--list"],
                                 capture_output=True, text=True, check=True).stdout.split()
            rx = re.compile(self.tag_re)
            tags = [t for t in out if rx.fullmatch(t)]
            tags.sort(key=_version_key, reverse=True)
            self._tags = tags[: self.limit]
        return self._tags

    def find(self, mirrors: Path, path: str, needle: str) -> tuple[str, str, int, str] | None:
        gitdir = str(mirrors / self.dirname / "repo")
        for tag in self.tags(mirrors):
            r = subprocess.run(["git", "-C", gitdir, "grep", "-n", "-F", "-e", needle, tag, "--", path],
                               capture_output=True, text=True, check=False)  # exit 1: no hit at this tag
            hits = [h for h in r.stdout.splitlines() if h]
            if not hits:
                continue
            hits.sort(key=lambda h: (h.split(":", 3)[1] != path, h.split(":", 3)[1], int(h.split(":", 3)[2])))
            _, p, line, text = hits[0].split(":", 3)
            return tag, p, int(line), text
        return None

    def line(self, mirrors: Path, tag: str, path: str, lineno: int) -> str:
        out = subprocess.run(["git", "-C", str(mirrors / self.dirname / "repo"), "show", f"{tag}:{path}"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        return out[lineno - 1]


@dataclass
class Tree:
    """Files of a release laid out as in the repository: a released wheel's .py files (read from the .whl
    in --wheels, a zip) or a directory (a pyenv build's Lib/)."""

    root: str  # a wheel file name under --wheels, or an absolute directory
    repo: str
    tag: str
    strip: str = ""  # repository path prefix that the wheel/directory lacks ("python/", "Lib/")

    def _text(self, wheels: Path, path: str) -> str | None:
        inner = path.removeprefix(self.strip)
        if self.root.endswith(".whl"):
            try:
                with zipfile.ZipFile(wheels / self.root) as z:
                    return z.read(inner).decode("utf-8", errors="replace")
            except (KeyError, FileNotFoundError):
                return None
        f = Path(self.root) / inner
        return f.read_text(encoding="utf-8", errors="replace") if f.is_file() else None

    def find(self, wheels: Path, path: str, needle: str) -> tuple[str, str, int, str] | None:
        text = self._text(wheels, path)
        for i, line in enumerate((text or "").splitlines(), 1):
            if needle in line:
                return self.tag, path, i, line
        return None

    def line(self, wheels: Path, tag: str, path: str, lineno: int) -> str:
        return (self._text(wheels, path) or "").splitlines()[lineno - 1]


def _version_key(tag: str) -> tuple:
    parts = re.findall(r"\d+|[a-z]+", tag.lower())
    return tuple((0, int(p)) if p.isdigit() else (-1 if p in ("rc", "alpha", "beta", "a", "b") else 1, p)
                 for p in parts)


SOURCES: dict[str, Git | Tree] = {
    "slurm": Git("SchedMD+slurm", "SchedMD/slurm", r"slurm-\d+-\d+-\d+-1"),
    "glibc": Git("bminor+glibc", "bminor/glibc", r"glibc-2\.\d+"),
    "bash": Git("bminor+bash", "bminor/bash", r"bash-\d+\.\d+"),
    "openssh": Git("openssh+openssh-portable", "openssh/openssh-portable", r"V_\d+_\d+_P\d+"),
    "pdsh": Git("chaos+pdsh", "chaos/pdsh", r"pdsh-\d+\.\d+"),
    "rdma": Git("linux-rdma+rdma-core", "linux-rdma/rdma-core", r"v\d+\.\d+"),
    "deepspeed": Git("deepspeedai+DeepSpeed", "deepspeedai/DeepSpeed", r"v\d+\.\d+\.\d+"),
    "megatron": Git("NVIDIA+Megatron-LM", "NVIDIA/Megatron-LM", r"core_(?:v|r)\d+\.\d+\.\d+"),
    "accelerate": Git("huggingface+accelerate", "huggingface/accelerate", r"v\d+\.\d+\.\d+"),
    "lightning": Git("Lightning-AI+pytorch-lightning", "Lightning-AI/pytorch-lightning", r"\d+\.\d+\.\d+"),
    "horovod": Git("horovod+horovod", "horovod/horovod", r"v\d+\.\d+\.\d+"),
    "areal": Git("inclusionAI+AReaL", "inclusionAI/AReaL", r"v\d+\.\d+\.\d+"),
    "ray": Tree("ray-2.60.0-cp311-cp311-manylinux2014_x86_64.whl", "ray-project/ray", "ray-2.60.0", strip="python/"),
    "vllm": Tree("vllm-0.11.2-cp38-abi3-manylinux1_x86_64.whl", "vllm-project/vllm", "v0.11.2"),
    "sglang": Tree("sglang-0.5.10.post1-py3-none-any.whl", "sgl-project/sglang", "v0.5.10.post1", strip="python/"),
    "cpython": Tree("/root/.pyenv/versions/3.13.0/lib/python3.13", "python/cpython", "v3.13.0", strip="Lib/"),
}

# Documentation URLs
KERNEL_OOM = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/mm/oom_kill.c?h=v6.12"
KERNEL_OOM_OLD = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/mm/oom_kill.c?h=v4.19"
KERNEL_HUNG = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/kernel/hung_task.c?h=v6.12"
KERNEL_FAULT = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/arch/x86/mm/fault.c?h=v6.12"
KERNEL_WATCHDOG = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/kernel/watchdog.c?h=v6.12"
PY_FAULTHANDLER = "https://docs.python.org/3/library/faulthandler.html"
PY_EXC = "https://docs.python.org/3/library/exceptions.html"
K8S_MEM = "https://kubernetes.io/docs/tasks/configure-pod-container/assign-memory-resource/"
K8S_EVICTION = "https://github.com/kubernetes/kubernetes/blob/v1.30.0/pkg/kubelet/eviction/helpers.go"  # nodeLowMessageFmt ...
RAY_OOM = "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html"
RAY_DATA_OOM = "https://docs.ray.io/en/master/data/how-to-avoid-ooms.html"
RAY_GCS_SRC = "https://github.com/ray-project/ray/blob/ray-2.60.0/src/ray/gcs/gcs_node_manager.cc"
RAY_RAYLET_SRC = "https://github.com/ray-project/ray/tree/ray-2.60.0/src/ray/raylet"
RAY_GCS_DIR = "https://github.com/ray-project/ray/tree/ray-2.60.0/src/ray/gcs"

# ---------------------------------------------------------------------------------------------
# Entries


@dataclass
class E:
    id: str
    syntax: str
    format: str
    meaning: str
    blame: str
    role: str
    severity: str
    action: str
    at: tuple[str, str, str] | None = None  # (source key, path or pathspec, text on the cited line)
    url: str = ""
    example: str = ""
    source: str = field(default="", init=False)


def S(id, syntax, fmt, at=None, *, url="", m, b, r, s, a, ex=""):
    return E(id=id, syntax=syntax, format=fmt, meaning=m, blame=b, role=r, severity=s, action=a,
             at=at, url=url, example=ex)


ERRNO = "glibc", "sysdeps/gnu/errlist.h"
GAI = "glibc", "sysdeps/posix/gai_strerror-strs.h"


def errno_entry(name: str, text: str, m: str, b: str, r: str, s: str, a: str, ex_no: int) -> E:
    """An errno text as strerror()/perror() and Python's OSError print it ("[Errno 28] ...")."""
    return S(f"system.errno.{name}", "regex", r"(?:\[Errno -?\d+\] )?" + re.escape(text).replace(r"\ ", " "),
             (ERRNO[0], ERRNO[1], f'N_("{text}")'), m=m, b=b, r=r, s=s, a=a,
             ex=f"[Errno {ex_no}] {text}")


SYSTEM: list[E] = [
    # ---- Linux kernel OOM killer and watchdogs (mm/oom_kill.c, kernel/hung_task.c) -------------
    S("system.kernel.oom-killed-process", "printf",
      "Out of memory: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, "
      "UID:%u pgtables:%lukB oom_score_adj:%hd", url=KERNEL_OOM,
      m="the kernel's OOM killer ran out of host memory and killed the named process (pid, command) with SIGKILL",
      b="environment", r="root", s="suspect",
      a="find which rank the killed pid was and cut its host memory (DataLoader workers, pinned buffers, "
        "per-rank model copies) or give the job more RAM"),
    S("system.kernel.memcg-oom-killed-process", "printf",
      "Memory cgroup out of memory: Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB, "
      "shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd", url=KERNEL_OOM,
      m="a memory cgroup (Slurm job/step, container) reached its limit and the kernel killed the named process with "
        "SIGKILL",
      b="environment", r="root", s="suspect",
      a="raise the job's memory limit (--mem, container limits) or reduce the killed rank's host memory use"),
    S("system.kernel.oom-invoked", "printf",
      "%s invoked oom-killer: gfp_mask=%#x(%s), order=%d, oom_score_adj=%hd", url=KERNEL_OOM,
      m="start of a kernel OOM report: the named command's allocation found no free memory (it is not "
        "necessarily the process that gets killed)",
      b="environment", r="root", s="warning",
      a="read the following 'Killed process' line for the victim and check host memory use on that node"),
    S("system.kernel.oom-kill-summary", "regex",
      r"oom-kill:constraint=(?P<s0>CONSTRAINT_\w+),nodemask=[^,]*,.{0,2000}?task=(?P<s1>[^,]{1,64}),"
      r"pid=\d+,uid=\d+", url=KERNEL_OOM,
      ex="oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm/uid_1000/"
         "job_42,task_memcg=/slurm/uid_1000/job_42/step_0,task=python,pid=2343,uid=1000",
      m="one-line summary of a kernel OOM kill: constraint (CONSTRAINT_MEMCG = a cgroup limit, CONSTRAINT_NONE = the "
        "whole host), the cgroup, and the victim's command and pid",
      b="environment", r="root", s="suspect",
      a="map the victim pid to its rank; for CONSTRAINT_MEMCG raise the job/container memory limit, else reduce "
        "host memory use on that node"),
    S("system.kernel.oom-reaped", "printf",
      "oom_reaper: reaped process %d (%s), now anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB", url=KERNEL_OOM,
      m="the kernel freed the memory of a process it had just OOM-killed",
      b="environment", r="consequence", s="info", a=""),
    S("system.kernel.oom-no-killable", "literal", "Out of memory and no killable processes...", url=KERNEL_OOM,
      m="the host ran out of memory and the OOM killer found nothing to kill (the kernel panics)",
      b="environment", r="root", s="suspect",
      a="check the node's memory (host RAM, hugepages, tmpfs such as /dev/shm) and what filled it"),
    S("system.kernel.oom-kill-process-legacy", "printf",
      "Out of memory: Kill process %d (%s) score %u or sacrifice child", url=KERNEL_OOM_OLD,
      m="older kernels (before 5.x): the OOM killer chose the named process to kill for lack of host memory",
      b="environment", r="root", s="suspect",
      a="find which rank the pid was and cut its host memory use or give the job more RAM"),
    S("system.kernel.memcg-oom-kill-process-legacy", "printf",
      "Memory cgroup out of memory: Kill process %d (%s) score %u or sacrifice child", url=KERNEL_OOM_OLD,
      m="older kernels: a memory cgroup (job, container) hit its limit and the named process is to be killed",
      b="environment", r="root", s="suspect",
      a="raise the job/container memory limit or reduce the process's host memory use"),
    S("system.kernel.killed-process-legacy", "printf",
      "Killed process %d (%s) total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB", url=KERNEL_OOM_OLD,
      m="older kernels: the OOM killer killed the named process with SIGKILL",
      b="environment", r="root", s="suspect",
      a="find which rank the pid was and cut its host memory use or give the job more RAM"),
    S("system.kernel.hung-task", "printf", "INFO: task %s:%d blocked for more than %ld seconds.", url=KERNEL_HUNG,
      m="the kernel's hung-task detector saw the named task in uninterruptible sleep (D state) for that long: "
        "stuck in the kernel (GPU driver, NFS/Lustre I/O, a dead device)",
      b="environment", r="root", s="suspect",
      a="read the kernel stack printed after it (or /proc/PID/stack) and check the GPU driver, file systems and "
        "dmesg for Xid or I/O errors on that node"),
    S("system.kernel.soft-lockup", "printf", "watchdog: BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]",
      url=KERNEL_WATCHDOG,
      m="a CPU ran kernel code without scheduling for that long (driver or kernel bug, or a host overloaded)",
      b="hardware", r="root", s="suspect",
      a="look at the stack printed with it and the node's dmesg; drain the node if it repeats"),
    S("system.kernel.segfault", "regex",
      r"(?P<s0>[^\[\s]{1,64})\[(?P<s1>\d+)\]: segfault at [0-9a-f]+ ip [0-9a-f]+ sp [0-9a-f]+ error \d+",
      url=KERNEL_FAULT, ex="python[12345]: segfault at 0 ip 00007f1c2a3b4c5d sp 00007ffd1e2f3a40 error 4 in "
                          "libc.so.6[7f1c2a300000+195000]",
      m="the kernel log of a process (command[pid]) killed by SIGSEGV, with the faulting address and library",
      b="self", r="root", s="suspect",
      a="map the pid to its rank and get its native stack (core dump, gdb); the library named after 'in' is where "
        "it crashed"),

    # ---- Slurm: slurmstepd / srun / sbatch (prefix "srun: error: ", "slurmstepd: error: " from log.c) ----
    S("system.slurm.oom-kill-events", "printf",
      "Detected %lu oom_kill event%s in %s. Some of the step tasks have been OOM Killed.",
      ("slurm", "src/plugins/task/cgroup/task_cgroup_memory.c", "oom_kill event%s in %ps. Some of the step tasks"),
      m="the step's memory cgroup hit its limit and the kernel OOM-killed some of its tasks",
      b="environment", r="root", s="suspect",
      a="find the killed rank (dmesg, sacct --format=MaxRSS) and raise --mem/--mem-per-cpu or cut host memory use "
        "per task"),
    S("system.slurm.oom-kill-events-legacy", "printf",
      "Detected %lu oom-kill event(s) in %s. Some of your processes may have been killed by the cgroup "
      "out-of-memory handler.",
      ("slurm", "src/plugins/task/cgroup/task_cgroup_memory.c", "Some of your processes may have been killed by"),
      m="older Slurm: the step's memory cgroup hit its limit and the kernel OOM-killed processes of the step",
      b="environment", r="root", s="suspect",
      a="find the killed rank (dmesg, sacct MaxRSS) and raise --mem/--mem-per-cpu or cut host memory use per task"),
    S("system.slurm.task-out-of-memory", "printf", "%s: %s %s: Out Of Memory",
      ("slurm", "src/srun/launch.c", ': Out Of Memory", hosts, task_str'),
      m="srun: the named tasks on the named node were killed by the cgroup OOM handler",
      b="environment", r="root", s="suspect",
      a="raise the step's memory (--mem, --mem-per-cpu) or reduce host memory use of those ranks"),
    S("system.slurm.cancelled-time-limit", "printf", "*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE TO TIME LIMIT ***"),
      m="the job reached its --time limit; Slurm sends SIGTERM then SIGKILL to every task (a hung job ends this way "
        "too: then the hang is the cause)",
      b="launch", r="root", s="warning",
      a="check whether the job was still making progress before the limit: if yes raise --time, if not diagnose "
        "the hang (hangdbg report on its stacks and logs)"),
    S("system.slurm.cancelled-preemption", "printf", "*** %s ON %s CANCELLED AT %s DUE TO PREEMPTION ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE TO PREEMPTION ***"),
      m="the scheduler preempted the job for a higher-priority one",
      b="environment", r="root", s="suspect",
      a="resubmit (with --requeue or checkpointing) or use a partition/QOS that is not preemptible"),
    S("system.slurm.cancelled-node-failure", "printf",
      "*** %s ON %s CANCELLED AT %s DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE TO NODE \""),
      m="a node of the job stopped responding to the controller and the job was cancelled",
      b="hardware", r="root", s="suspect",
      a="find the failed node (sacct -j JOB --format=NodeList, scontrol show node) and its reason; exclude it "
        "(--exclude) when resubmitting"),
    S("system.slurm.cancelled-requeue", "printf", "*** %s ON %s CANCELLED AT %s DUE TO JOB REQUEUE ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE TO JOB REQUEUE ***"),
      m="the job was requeued (by an admin, a node failure or preemption) and its running step was cancelled",
      b="environment", r="consequence", s="warning",
      a="look in the controller's log / sacct for why the job was requeued"),
    S("system.slurm.step-failed", "printf", "*** %s ON %s FAILED (non-zero exit code or other failure mode) ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "FAILED (non-zero exit code or other"),
      m="the step ended because a task failed (non-zero exit or signal)",
      b="self", r="consequence", s="warning",
      a="find the first task that exited (srun's 'Exited with exit code' / signal lines) and read its log"),
    S("system.slurm.cancelled-signal", "printf", "*** %s ON %s CANCELLED AT %s DUE to SIGNAL %s ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE to SIGNAL %s ***"),
      m="the step was cancelled by a signal sent from outside (scancel, an admin, or a launcher killing the rest "
        "after a failure)",
      b="none", r="consequence", s="warning",
      a="check who cancelled the job (sacct, scancel history) and whether a task had failed first"),
    S("system.slurm.cancelled-task-failure", "printf", "*** %s ON %s CANCELLED AT %s DUE TO TASK FAILURE ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "DUE TO TASK FAILURE ***"),
      m="the step was killed because one of its tasks failed (--kill-on-bad-exit): the survivors are victims",
      b="peer", r="consequence", s="warning",
      a="find the task that failed first and read its log"),
    S("system.slurm.cancelled", "printf", "*** %s ON %s CANCELLED AT %s ***",
      ("slurm", "src/slurmd/slurmstepd/req.c", "CANCELLED AT %s ***\","),
      m="older Slurm: the job or step was cancelled (scancel, time limit, or an admin)",
      b="none", r="consequence", s="warning",
      a="check sacct for the job's state and reason, and whether it was still making progress before"),
    S("system.slurm.stepd-terminated-signals", "printf",
      "*** %s STEPD TERMINATED ON %s AT %s DUE TO JOB NOT ENDING WITH SIGNALS ***",
      ("slurm", "src/slurmd/slurmstepd/step_terminate_monitor.c", "DUE TO JOB NOT ENDING WITH SIGNALS"),
      m="tasks of the step could not be killed (stuck in uninterruptible sleep: GPU driver, network file system); "
        "the node is usually drained with 'Kill task failed'",
      b="environment", r="root", s="warning",
      a="look for processes in D state on that node (ps -eo stat,pid,cmd) and at dmesg (GPU Xid, NFS/Lustre)"),
    S("system.slurm.stepd-terminated-not-running", "printf",
      "*** %s STEPD TERMINATED ON %s AT %s DUE TO JOB NOT RUNNING ***",
      ("slurm", "src/slurmd/slurmstepd/step_terminate_monitor.c", "DUE TO JOB NOT RUNNING"),
      m="slurmstepd stopped because the controller no longer considers the job running",
      b="environment", r="consequence", s="warning",
      a="check the controller log and sacct for why the job ended"),
    S("system.slurm.exited-with-exit-code", "printf", "%s: %s %s: Exited with exit code %d",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"),
      m="srun: the named tasks on the named node exited with a non-zero code",
      b="self", r="root", s="warning",
      a="read those tasks' logs for the exception or error before the exit; codes 128+N mean signal N"),
    S("system.slurm.exit-code-137", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Exited with exit code 137$",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"), ex="gpu-node-3: task 5: Exited with exit code 137",
      m="exit code 137 = 128+9: the task (or the process a wrapper waited for) was killed by SIGKILL, most often "
        "by the kernel OOM killer",
      b="environment", r="root", s="suspect",
      a="check dmesg on that node for 'Killed process' and the job's memory use (sacct MaxRSS)"),
    S("system.slurm.exit-code-139", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Exited with exit code 139$",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"), ex="gpu-node-3: task 5: Exited with exit code 139",
      m="exit code 139 = 128+11: a process of the task died of a segmentation fault (SIGSEGV)",
      b="self", r="root", s="suspect",
      a="get the native stack of that rank (core dump, faulthandler output) to find the crashing library"),
    S("system.slurm.exit-code-135", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Exited with exit code 135$",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"), ex="gpu-node-3: task 5: Exited with exit code 135",
      m="exit code 135 = 128+7: a process of the task died of SIGBUS, typically a shared-memory file "
        "(/dev/shm) that could not be backed",
      b="environment", r="root", s="suspect",
      a="check free space in /dev/shm on that node (df -h /dev/shm) and enlarge it (--shm-size for containers)"),
    S("system.slurm.exit-code-134", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Exited with exit code 134$",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"), ex="gpu-node-3: task 5: Exited with exit code 134",
      m="exit code 134 = 128+6: a process of the task aborted (SIGABRT): a C++ exception/assertion, or a watchdog "
        "(e.g. NCCL's) that aborted on purpose",
      b="self", r="root", s="warning",
      a="read the lines just before it in that rank's log: an abort after a collective timeout is a consequence"),
    S("system.slurm.exit-code-143", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Exited with exit code 143$",
      ("slurm", "src/srun/launch.c", "Exited with exit code %d"), ex="gpu-node-3: task 5: Exited with exit code 143",
      m="exit code 143 = 128+15: the task was terminated by SIGTERM (cancellation, time limit, or a launcher "
        "stopping the survivors)",
      b="peer", r="consequence", s="warning",
      a="look for the first task that failed, or for the job's cancellation/time limit"),
    S("system.slurm.task-killed", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Killed$",
      ("slurm", "src/srun/launch.c", "error(\"%s: %s %s: %s%s\","), ex="gpu-node-3: tasks 0-7: Killed",
      m="srun: the tasks were killed by SIGKILL: by the kernel OOM killer, or by Slurm after a time limit or "
        "cancellation",
      b="environment", r="root", s="warning",
      a="check dmesg on that node for 'Killed process' (OOM) and the job's end reason (sacct State)"),
    S("system.slurm.task-segfault", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Segmentation fault(?: \(core dumped\))?$",
      ("slurm", "src/srun/launch.c", "error(\"%s: %s %s: %s%s\","),
      ex="gpu-node-3: task 5: Segmentation fault (core dumped)",
      m="srun: the named task died of SIGSEGV",
      b="self", r="root", s="suspect",
      a="get that rank's native stack (core dump, faulthandler) to find the crashing library"),
    S("system.slurm.task-bus-error", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Bus error(?: \(core dumped\))?$",
      ("slurm", "src/srun/launch.c", "error(\"%s: %s %s: %s%s\","), ex="gpu-node-3: task 5: Bus error (core dumped)",
      m="srun: the named task died of SIGBUS, typically a full /dev/shm behind a shared-memory mapping",
      b="environment", r="root", s="suspect",
      a="check /dev/shm on that node (df -h /dev/shm) and enlarge it or use fewer/lighter DataLoader workers"),
    S("system.slurm.task-aborted", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Aborted(?: \(core dumped\))?$",
      ("slurm", "src/srun/launch.c", "error(\"%s: %s %s: %s%s\","), ex="gpu-node-3: task 5: Aborted (core dumped)",
      m="srun: the named task aborted (SIGABRT): an uncaught C++ exception/assertion or a deliberate abort by a "
        "watchdog after a timeout",
      b="self", r="root", s="warning",
      a="read the last lines of that rank's log: an abort after a collective timeout points to another rank"),
    S("system.slurm.task-terminated", "regex",
      r"(?P<s0>\S{1,200}): tasks? (?P<s1>[\d,\-]{1,200}): Terminated$",
      ("slurm", "src/srun/launch.c", "error(\"%s: %s %s: %s%s\","), ex="gpu-node-3: tasks 0-7: Terminated",
      m="srun: the tasks were terminated by SIGTERM (cancellation, time limit, or the launcher stopping survivors)",
      b="peer", r="consequence", s="warning",
      a="find the first task that failed or the job's cancellation reason"),
    S("system.slurm.execve-bad-interpreter", "printf", "execve(): bad interpreter(%s): %s",
      ("slurm", "src/slurmd/slurmstepd/task.c", "execve(): bad interpreter(%s): %m"),
      m="the task's script names an interpreter (#! line) that does not exist on the node",
      b="launch", r="root", s="suspect",
      a="fix the #! line or install/activate the interpreter on every node"),
    S("system.slurm.execve-failed", "regex",
      r"execve\(\): (?P<s0>.{1,400}?): (?P<s1>No such file or directory|Permission denied|Exec format error)$",
      ("slurm", "src/slurmd/slurmstepd/task.c", "execve(): %s: %m"), ex="execve(): python: No such file or directory",
      m="slurmstepd could not start the task's program on the node (not on PATH, not executable, wrong format)",
      b="launch", r="root", s="suspect",
      a="use an absolute path or load the environment (module, venv) in the batch script for every node"),
    S("system.slurm.job-step-aborted", "printf", "Job step aborted: Waiting up to %d seconds for job step to finish.",
      ("slurm", "src/api/step_launch.c", "Job step aborted: Waiting up to"),
      m="srun aborts the step (a task failed, a signal or cancellation) and waits for the remaining tasks to end",
      b="peer", r="consequence", s="warning",
      a="look above it for the first task failure or cancellation"),
    S("system.slurm.timed-out-waiting-step", "literal", "Timed out waiting for job step to complete",
      ("slurm", "src/api/step_launch.c", "Timed out waiting for job step to \""),
      m="srun gave up waiting for tasks to exit after an abort (tasks stuck, e.g. in a collective or in D state)",
      b="environment", r="consequence", s="warning",
      a="check the node for processes that ignore signals (D state) and for hung collectives"),
    S("system.slurm.force-terminated", "printf", "Force Terminated %s",
      ("slurm", "src/api/step_launch.c", "Force Terminated %ps"),
      m="srun forcibly terminated the step after an abort",
      b="none", r="consequence", s="warning", a="look above for the first failure that aborted the step"),
    S("system.slurm.unable-to-create-step", "printf", "Unable to create step for job %u: %s",
      ("slurm", "src/srun/launch.c", "Unable to create step for job %u"),
      m="srun could not start a step inside the allocation (resources busy, invalid request, or the job ended)",
      b="launch", r="root", s="suspect",
      a="compare the step's request (-n, --gpus, --mem) with the allocation and check for steps still running"),
    S("system.slurm.unable-to-allocate", "printf", "Unable to allocate resources: %s",
      ("slurm", "src/srun/allocate.c", "Unable to allocate resources: %m"),
      m="the allocation request was refused; the reason follows",
      b="launch", r="root", s="suspect", a="fix the request the reason names (nodes, GPUs, partition, time, QOS)"),
    S("system.slurm.batch-submission-failed", "printf", "Batch job submission failed: %s",
      ("slurm", "src/sbatch/sbatch.c", "Batch job submission failed: %m"),
      m="sbatch refused the job; the reason follows",
      b="launch", r="root", s="suspect", a="fix the request the reason names (nodes, GPUs, partition, time, QOS)"),
    S("system.slurm.node-config-unavailable", "literal", "Requested node configuration is not available",
      ("slurm", "src/common/slurm_errno.c", "Requested node configuration is not available"),
      m="no node of the partition can satisfy the request (GPUs per node, memory, constraints)",
      b="launch", r="root", s="suspect",
      a="compare --gres/--gpus-per-node, --mem and --constraint with sinfo -o '%N %G %m %f' for the partition"),
    S("system.slurm.node-count-invalid", "literal", "Node count specification invalid",
      ("slurm", "src/common/slurm_errno.c", "Node count specification invalid"),
      m="the requested node count cannot be satisfied by the partition",
      b="launch", r="root", s="suspect", a="request at most the partition's node count (sinfo)"),
    S("system.slurm.time-limit-invalid", "literal", "Requested time limit is invalid (missing or exceeds some limit)",
      ("slurm", "src/common/slurm_errno.c", "Requested time limit is invalid"),
      m="the job's --time is missing or above the partition/QOS limit",
      b="launch", r="root", s="suspect", a="set --time within the partition's MaxTime (sinfo -o '%P %l')"),
    S("system.slurm.invalid-account", "literal", "Invalid account or account/partition combination specified",
      ("slurm", "src/common/slurm_errno.c", "Invalid account or account/partition combination"),
      m="the job's account is not allowed on that partition",
      b="launch", r="root", s="suspect", a="set --account/--partition to a pair you are associated with (sacctmgr)"),
    S("system.slurm.node-failure", "printf", "Node failure on %s",
      ("slurm", "src/srun/allocate.c", "Node failure on %s"),
      m="the controller reports that the named node of the allocation failed",
      b="hardware", r="root", s="suspect",
      a="check the node's state and reason (scontrol show node) and exclude it when resubmitting"),
    S("system.slurm.allocation-revoked", "printf", "Job allocation %u has been revoked",
      ("slurm", "src/srun/allocate.c", "Job allocation %u has been revoked"),
      m="the job's allocation was taken away (cancelled, time limit, node failure or preemption)",
      b="none", r="consequence", s="warning", a="check sacct for the job's end state and reason"),
    S("system.slurm.step-creation-disabled", "printf", "Job %u step creation temporarily disabled, retrying (%s)",
      ("slurm", "src/srun/launch.c", "step creation temporarily disabled, retrying"),
      m="srun waits because the resources for a new step are busy (a previous step still holds them)",
      b="launch", r="context", s="info", a=""),
    S("system.slurm.hit-memory-limit", "printf",
      "%s hit memory limit at least once during execution. This may or may not result in some failure.",
      ("slurm", "src/plugins/task/cgroup/task_cgroup_memory.c", "hit memory limit at least once"),
      m="the step's memory cgroup reached its limit at least once (page reclaim, maybe OOM kills)",
      b="environment", r="root", s="warning",
      a="compare the step's peak memory (sacct MaxRSS) with --mem and raise the limit or cut memory use"),
    S("system.slurm.exceeded-job-memory", "literal", "Exceeded job memory limit",
      ("slurm", "src/slurmd/slurmd/job_mem_limit.c", "Exceeded job memory limit"),
      m="Slurm's accounting saw the job above its memory limit and kills it",
      b="environment", r="root", s="suspect", a="raise --mem/--mem-per-cpu or reduce host memory use per task"),
    S("system.slurm.kill-task-failed", "literal", "Kill task failed",
      ("slurm", "src/common/slurm_errno.c", "\"Kill task failed\""),
      m="Slurm could not kill a task (unkillable process); the node is drained with this reason",
      b="environment", r="root", s="warning",
      a="look on that node for processes in D state (GPU driver, file system) and at dmesg before resuming it"),
    S("system.slurm.socket-timed-out", "literal", "Socket timed out on send/recv operation",
      ("slurm", "src/common/slurm_errno.c", "Socket timed out on send/recv operation"),
      m="a Slurm RPC timed out (controller or slurmd overloaded or unreachable)",
      b="environment", r="root", s="warning", a="check the controller's responsiveness (sdiag) and the node's network"),
    S("system.slurm.connection-failure", "literal", "Communication connection failure",
      ("slurm", "src/common/slurm_errno.c", "\"Communication connection failure\""),
      m="a Slurm daemon or client could not reach another one",
      b="environment", r="root", s="warning", a="check that slurmd/slurmctld run and that the node's network is up"),
    S("system.slurm.unable-to-contact-controller", "literal", "Unable to contact slurm controller (connect failure)",
      ("slurm", "src/common/slurm_errno.c", "Unable to contact slurm controller (connect failure)"),
      m="the client could not reach slurmctld",
      b="environment", r="root", s="suspect", a="check slurmctld's host/port from the node (scontrol ping)"),

    # ---- pdsh / ssh (multi-node launches) ----------------------------------------------------
    S("system.pdsh.exited-with-exit-code", "printf", "%s: %s: %s exited with exit code %d",
      ("pdsh", "src/common/pipecmd.c", "exited with exit code %d"),
      m="pdsh: the remote command (or ssh itself, code 255) on the named host exited with a non-zero code",
      b="self", r="root", s="warning",
      a="read that host's output; for 'ssh exited with exit code 255' check ssh connectivity to the host"),
    S("system.pdsh.killed-by-signal", "printf", "%s: %s: %s killed by signal %d",
      ("pdsh", "src/common/pipecmd.c", "killed by signal %d"),
      m="pdsh: the remote command on the named host was killed by a signal",
      b="self", r="root", s="warning", a="look on that host for what sent the signal (OOM killer, timeout)"),
    S("system.pdsh.process-killed", "printf", "%s: process on host %s killed by signal %d",
      ("pdsh", "src/pdsh/dsh.c", "process on host %S killed by signal"),
      m="pdsh killed the process for the named host (e.g. after a command timeout)",
      b="peer", r="consequence", s="warning", a="look at why that host did not answer in time"),
    S("system.pdsh.command-timeout", "printf", "%s: %s: command timeout",
      ("pdsh", "src/pdsh/dsh.c", "command timeout\\n\", a->host"),
      m="pdsh: the command on the named host did not finish within -u seconds (the host or its command hangs)",
      b="peer", r="root", s="warning", a="check the named host: is it up, and is the command stuck there?"),
    S("system.ssh.connect-failed", "printf", "ssh: connect to host %s port %s: %s",
      ("openssh", "sshconnect.c", "ssh: connect to host %s port %s: %s"),
      m="ssh could not open a TCP connection to the host (refused, unreachable, timed out)",
      b="environment", r="root", s="suspect",
      a="check that sshd runs on that host and the port is open from this node (firewall, host name, port)"),
    S("system.ssh.could-not-resolve", "printf", "%s: Could not resolve hostname %.100s: %s",
      ("openssh", "ssh.c", "Could not resolve hostname %.100s"),
      m="ssh could not resolve the host name",
      b="launch", r="root", s="suspect", a="check the host list / hostfile names and DNS (getent hosts NAME)"),
    S("system.ssh.host-key-verification-failed", "literal", "Host key verification failed.",
      ("openssh", "sshconnect2.c", "Host key verification failed."),
      m="ssh refused the host because its key is unknown or changed",
      b="environment", r="root", s="suspect",
      a="add the node's key to known_hosts (ssh-keyscan) or fix StrictHostKeyChecking for the cluster"),
    S("system.ssh.permission-denied", "printf", "%s@%s: Permission denied (%s).",
      ("openssh", "sshconnect2.c", "Permission denied (%s)."),
      m="ssh authentication to the host failed (no usable key, passwordless ssh not set up)",
      b="environment", r="root", s="suspect",
      a="set up passwordless ssh between the nodes (authorized_keys) for the launching user"),
    S("system.ssh.connection-closed", "printf", "Connection closed by %s",
      ("openssh", "packet.c", "logdie(\"Connection closed by %s\""),
      m="the remote side closed the ssh connection (sshd limits, host went down, process killed)",
      b="peer", r="consequence", s="warning", a="check the remote host and its sshd log"),

    # ---- Shell and signals (bash jobs.c, glibc siglist) --------------------------------------
    S("system.shell.line-killed", "regex",
      r"(?P<s0>.{1,300}?): line (?P<s1>\d+): +(?P<s2>\d+) Killed(?: .*)?$",
      ("bash", "jobs.c", "_(\"%s: line %d: \")"),
      ex="/var/spool/slurmd/job42/slurm_script: line 12: 40123 Killed                  python train.py",
      m="a non-interactive shell reports that its child (pid) was killed by SIGKILL: usually the kernel OOM killer",
      b="environment", r="root", s="suspect",
      a="check dmesg on that node for 'Killed process' with that pid and the job's memory use"),
    S("system.shell.line-segfault", "regex",
      r"(?P<s0>.{1,300}?): line (?P<s1>\d+): +(?P<s2>\d+) Segmentation fault(?: +\(core dumped\))?(?: .*)?$",
      ("bash", "jobs.c", "_(\"%s: line %d: \")"),
      ex="/var/spool/slurmd/job42/slurm_script: line 12: 40123 Segmentation fault      (core dumped) python train.py",
      m="a non-interactive shell reports that its child (pid) died of SIGSEGV",
      b="self", r="root", s="suspect", a="get the native stack (core dump, faulthandler) of that process"),
    S("system.shell.line-bus-error", "regex",
      r"(?P<s0>.{1,300}?): line (?P<s1>\d+): +(?P<s2>\d+) Bus error(?: +\(core dumped\))?(?: .*)?$",
      ("bash", "jobs.c", "_(\"%s: line %d: \")"),
      ex="/var/spool/slurmd/job42/slurm_script: line 12: 40123 Bus error               (core dumped) python train.py",
      m="a non-interactive shell reports that its child died of SIGBUS: usually /dev/shm full under a "
        "shared-memory mapping (DataLoader workers, NCCL)",
      b="environment", r="root", s="suspect",
      a="check df -h /dev/shm on that node and enlarge it (--shm-size / --ipc=host for containers)"),
    S("system.shell.line-aborted", "regex",
      r"(?P<s0>.{1,300}?): line (?P<s1>\d+): +(?P<s2>\d+) Aborted(?: +\(core dumped\))?(?: .*)?$",
      ("bash", "jobs.c", "_(\"%s: line %d: \")"),
      ex="/var/spool/slurmd/job42/slurm_script: line 12: 40123 Aborted                 (core dumped) python train.py",
      m="a non-interactive shell reports that its child aborted (SIGABRT): a C++ exception/assertion, or a "
        "watchdog aborting after a timeout",
      b="self", r="root", s="warning",
      a="read the process's last log lines: an abort after a collective timeout is a consequence of another rank"),
    S("system.shell.line-terminated", "regex",
      r"(?P<s0>.{1,300}?): line (?P<s1>\d+): +(?P<s2>\d+) Terminated(?: .*)?$",
      ("bash", "jobs.c", "_(\"%s: line %d: \")"),
      ex="/var/spool/slurmd/job42/slurm_script: line 12: 40123 Terminated              python train.py",
      m="a non-interactive shell reports that its child was terminated by SIGTERM (cancellation, time limit, "
        "a launcher stopping survivors)",
      b="peer", r="consequence", s="warning", a="look for the first failure or the job's cancellation reason"),
    S("system.shell.segfault-core-dumped", "regex", r"Segmentation fault(?: +\(core dumped\))?(?: .*)?$",
      ("bash", "jobs.c", "fprintf (stream, _(\"(core dumped) \"));"), ex="Segmentation fault (core dumped)",
      m="the shell reports that the foreground command died of SIGSEGV",
      b="self", r="root", s="suspect", a="get the native stack (core dump, gdb) of the crashed process"),
    S("system.shell.bus-error-core-dumped", "regex", r"Bus error +\(core dumped\)(?: .*)?$",
      ("bash", "jobs.c", "fprintf (stream, _(\"(core dumped) \"));"), ex="Bus error (core dumped)",
      m="the shell reports that the foreground command died of SIGBUS: usually /dev/shm too small for a "
        "shared-memory mapping",
      b="environment", r="root", s="suspect", a="check df -h /dev/shm and enlarge it (--shm-size for containers)"),
    S("system.shell.aborted-core-dumped", "regex", r"Aborted +\(core dumped\)(?: .*)?$",
      ("bash", "jobs.c", "fprintf (stream, _(\"(core dumped) \"));"), ex="Aborted (core dumped)",
      m="the shell reports that the foreground command aborted (SIGABRT) and dumped core",
      b="self", r="root", s="warning",
      a="read the lines just before it: an abort after a collective timeout points to another rank"),
    S("system.shell.illegal-instruction", "regex", r"Illegal instruction(?: +\(core dumped\))?(?: .*)?$",
      ("glibc", "sysdeps/generic/siglist.h", "N_(\"Illegal instruction\")"), ex="Illegal instruction (core dumped)",
      m="the process died of SIGILL: a binary built for a newer CPU (AVX-512 etc.) than the node has",
      b="launch", r="root", s="suspect",
      a="compare the node's CPU flags (lscpu) with the build's target; use a build for that CPU"),
    S("system.shell.floating-point-exception", "regex", r"Floating point exception(?: +\(core dumped\))?(?: .*)?$",
      ("glibc", "sysdeps/generic/siglist.h", "N_(\"Floating point exception\")"),
      ex="Floating point exception (core dumped)",
      m="the process died of SIGFPE (an integer division by zero in native code)",
      b="self", r="root", s="suspect", a="get the native stack (core dump) of the crashed process"),

    # ---- Containers -------------------------------------------------------------------------
    S("system.k8s.oomkilled", "regex", r"[Rr]eason:\s+OOMKilled", url=K8S_MEM, ex="Reason:       OOMKilled",
      m="Kubernetes: the container was killed by the kernel OOM killer because it exceeded its memory limit",
      b="environment", r="root", s="suspect",
      a="raise the container's memory limit or reduce the rank's host memory use"),
    S("system.k8s.exit-code-137", "regex", r"(?:Exit Code|exitCode):\s+137\b", url=K8S_MEM, ex="Exit Code:    137",
      m="the container's process exited with 137 = 128+9 (SIGKILL), usually the OOM killer",
      b="environment", r="root", s="suspect",
      a="check the pod's last state reason (OOMKilled) and its memory limit"),

    # the kubelet's node-pressure eviction (pkg/kubelet/eviction/helpers.go: Reason = "Evicted",
    # nodeLowMessageFmt, nodeConditionMessageFmt), as kubectl describe / get events show it
    S("system.k8s.evicted-node-low", "printf", "The node was low on resource: %s.", url=K8S_EVICTION,
      m="Kubernetes: the kubelet evicted the pod because its node ran low on a resource (memory, ephemeral "
        "storage, PIDs): the node's pressure, not a fault of the program",
      b="environment", r="root", s="suspect",
      a="see which pods use the resource on that node (kubectl describe node), set requests/limits so the node is "
        "not overcommitted, or move the job to a larger node"),
    S("system.k8s.evicted-node-condition", "printf", "The node had condition: %s.", url=K8S_EVICTION,
      m="Kubernetes: the kubelet evicted the pod because of a node condition (MemoryPressure, DiskPressure, "
        "PIDPressure)",
      b="environment", r="root", s="suspect",
      a="check the node's conditions (kubectl describe node) and what uses the resource on it"),

    # ---- RDMA user space (libibverbs): memlock --------------------------------------------------
    S("system.ibverbs.memlock-too-small", "printf", "libibverbs: Warning: RLIMIT_MEMLOCK is %llu bytes.",
      ("rdma", "libibverbs/init.c", "Warning: RLIMIT_MEMLOCK is %llu bytes."),
      m="the locked-memory limit (ulimit -l) is tiny, so RDMA memory registration (NCCL/IB) will fail",
      b="environment", r="root", s="suspect",
      a="set 'ulimit -l unlimited' for the job (limits.conf, slurmd's LimitMEMLOCK, container --ulimit memlock=-1)"),
    S("system.ibverbs.no-driver", "printf", "libibverbs: Warning: couldn't load driver '%s': %s",
      ("rdma", "libibverbs/dynamic_driver.c", "Warning: couldn't load driver '%s': %s"),
      m="libibverbs could not load an RDMA provider library (it tries every provider it knows: a host prints this for "
        "the ones it has no hardware for, harmless then); only when the provider of this host's NICs (mlx5, efa) is "
        "missing do InfiniBand transports go missing",
      b="environment", r="context", s="warning",
      a="if NCCL fell back to sockets (NET/IB : No device found), install this host's provider (rdma-core / MOFED libs) "
        "in the job's environment or container"),

    # ---- Python runtime ---------------------------------------------------------------------
    S("system.python.fatal-error", "printf", "Fatal Python error: %s", url=PY_FAULTHANDLER,
      m="the Python interpreter hit a fatal error (a fault signal caught by faulthandler, or an internal error); "
        "a Python traceback of every thread follows",
      b="self", r="root", s="suspect", a="read the thread stacks that follow to see where each thread was"),
    S("system.python.fatal-segfault", "literal", "Fatal Python error: Segmentation fault", url=PY_FAULTHANDLER,
      m="faulthandler: the process received SIGSEGV (a crash in native code: CUDA, NCCL, an extension)",
      b="self", r="root", s="suspect",
      a="look at the 'Current thread' stack that follows and get a native stack (core dump) of that rank"),
    S("system.python.fatal-bus-error", "literal", "Fatal Python error: Bus error", url=PY_FAULTHANDLER,
      m="faulthandler: the process received SIGBUS, typically a shared-memory file (/dev/shm) that could not be backed",
      b="environment", r="root", s="suspect", a="check df -h /dev/shm on that node and enlarge it"),
    S("system.python.fatal-aborted", "literal", "Fatal Python error: Aborted", url=PY_FAULTHANDLER,
      m="faulthandler: the process received SIGABRT (a C++ exception/assertion, or a watchdog aborting after a "
        "timeout)",
      b="self", r="root", s="warning",
      a="read the lines before it: an abort right after a collective timeout is a consequence of another rank"),
    S("system.python.fatal-illegal-instruction", "literal", "Fatal Python error: Illegal instruction",
      url=PY_FAULTHANDLER,
      m="faulthandler: SIGILL, a binary built for a CPU feature this node lacks",
      b="launch", r="root", s="suspect", a="compare lscpu flags with the build target of the extension named in the stack"),
    S("system.python.current-thread", "regex", r"Current thread 0x[0-9a-f]+ \(most recent call first\):",
      url=PY_FAULTHANDLER, ex="Current thread 0x00007fb899f39700 (most recent call first):",
      m="faulthandler's stack of the thread that received the fatal signal follows",
      b="none", r="context", s="info", a=""),
    S("system.python.memory-error", "regex", r"MemoryError(?:: .{0,400})?$", url=PY_EXC + "#MemoryError",
      ex="MemoryError",
      m="a Python allocation failed: the host (or the cgroup) is out of memory",
      b="environment", r="root", s="suspect", a="reduce host memory use of that rank or give the job more RAM"),
    S("system.python.recursion-error", "literal", "maximum recursion depth exceeded", url=PY_EXC + "#RecursionError",
      m="Python's recursion limit was hit (a runaway recursion in the rank's code)",
      b="self", r="root", s="suspect", a="fix the recursion shown in the traceback (or raise sys.setrecursionlimit)"),
    S("system.python.called-process-error", "printf", "Command '%s' returned non-zero exit status %d.",
      ("cpython", "Lib/subprocess.py", "returned non-zero exit status %d."),
      m="a launcher or script ran a command (often the training program) that exited with that code",
      b="self", r="root", s="warning", a="read the command's own output above for its error; codes 128+N are signals"),
    S("system.python.called-process-died", "printf", "Command '%s' died with %s.",
      ("cpython", "Lib/subprocess.py", "died with %r."),
      m="a launcher or script ran a command that was killed by the named signal (<Signals.SIGKILL: 9> is usually "
        "the OOM killer)",
      b="self", r="root", s="warning", a="check the signal: SIGKILL -> dmesg OOM, SIGSEGV -> native crash, SIGTERM -> cancel"),
    S("system.python.broken-process-pool", "literal",
      "A process in the process pool was terminated abruptly while the future was running or pending.",
      ("cpython", "Lib/concurrent/futures/process.py", "terminated abruptly while the future was"),
      m="a worker process of a ProcessPoolExecutor died (killed by the OOM killer, a crash)",
      b="environment", r="root", s="warning", a="check dmesg for an OOM kill and the worker's own crash output"),
    S("system.python.spawn-bootstrapping", "literal", "An attempt has been made to start a new process before the",
      ("cpython", "Lib/multiprocessing/spawn.py", "An attempt has been made to start a new process before the"),
      m="a process started with the 'spawn' method (vLLM's and torch.multiprocessing's workers, DataLoader workers "
        "on macOS/Windows) re-imported the main script, and the script starts processes at import: its entry point "
        "has no `if __name__ == '__main__':` guard",
      b="launch", r="root", s="suspect",
      a="put the script's top-level code under `if __name__ == '__main__':` (or start the workers with fork, e.g. "
        "VLLM_WORKER_MULTIPROC_METHOD=fork, when CUDA is not initialised before)"),
    S("system.python.argparse-unrecognized-arguments", "printf", "unrecognized arguments: %s",
      ("cpython", "Lib/argparse.py", "unrecognized arguments: %s"),
      m="the program's command line holds an argument its parser does not know; in a distributed launch usually "
        "the launcher's own argument reaching the script (torch.distributed.launch passes --local-rank=N since "
        "torch 2.0, --local_rank before; a script that does not declare it fails on every rank)",
      b="launch", r="root", s="suspect",
      a="declare the argument in the script (parser.add_argument('--local-rank', '--local_rank', type=int)) or "
        "launch with torchrun, which passes LOCAL_RANK in the environment; check the command line for a typo"),
    S("system.python.argparse-required", "printf", "the following arguments are required: %s",
      ("cpython", "Lib/argparse.py", "the following arguments are required: %s"),
      m="the program's (or the launcher's) command line lacks an argument it requires",
      b="launch", r="root", s="suspect", a="add the named arguments to the command line of the launch"),
    S("system.python.argparse-invalid-choice", "printf", "invalid choice: %s (choose from %s)",
      ("cpython", "Lib/argparse.py", "invalid choice: "),
      m="an argument of the command line has a value the program does not accept",
      b="launch", r="root", s="suspect", a="use one of the listed values in the command line of the launch"),
]

SYSTEM += [
    errno_entry("enospc", "No space left on device",
                "a write failed because the file system is full: often /dev/shm (shared memory) or /tmp",
                "environment", "root", "suspect",
                "check df -h for /dev/shm, /tmp and the checkpoint directory on that node and free or enlarge it", 28),
    errno_entry("edquot", "Disk quota exceeded", "a write failed because the user's or project's quota is used up",
                "environment", "root", "suspect", "check the quota (quota -s, lfs quota) and clean up or ask for more", 122),
    errno_entry("erofs", "Read-only file system", "a write went to a file system mounted read-only",
                "environment", "root", "suspect", "write to a writable path (or remount); check for an FS error on the node", 30),
    errno_entry("emfile", "Too many open files",
                "the process hit its open-file limit (ulimit -n): sockets, shared-memory files, DataLoader workers",
                "environment", "root", "suspect",
                "raise ulimit -n for the job, or use torch.multiprocessing.set_sharing_strategy('file_system')", 24),
    errno_entry("enfile", "Too many open files in system", "the whole host ran out of file handles",
                "environment", "root", "suspect", "check fs.file-max and what holds files on that node", 23),
    errno_entry("enomem", "Cannot allocate memory",
                "an allocation or mapping failed: host memory, locked memory (RDMA registration, ulimit -l) or "
                "vm.max_map_count exhausted",
                "environment", "root", "suspect",
                "check free memory, ulimit -l (memlock) and vm.max_map_count on that node", 12),
    errno_entry("eagain", "Resource temporarily unavailable",
                "a resource was temporarily exhausted (process/thread limit, non-blocking I/O would block)",
                "environment", "root", "warning", "check ulimit -u / the pids cgroup when it comes from fork or a thread", 11),
    errno_entry("eio", "Input/output error", "the device or network file system returned an I/O error",
                "hardware", "root", "suspect", "check dmesg for disk, NFS/Lustre or GPU errors on that node", 5),
    errno_entry("ebusy", "Device or resource busy",
                "the device is in use: e.g. a GPU in exclusive-process mode already held by another process",
                "environment", "root", "suspect",
                "check nvidia-smi for other processes on the GPU and the GPU's compute mode", 16),
    errno_entry("estale", "Stale file handle", "a network file system handle became invalid (file replaced or server restarted)",
                "environment", "root", "warning", "reopen the file; check the NFS server and whether another job rewrote it", 116),
    errno_entry("econnrefused", "Connection refused",
                "nothing listens at the address and port: the peer (rendezvous store, master, sshd) is not up or "
                "already gone",
                "peer", "root", "warning",
                "check that the server side (MASTER_ADDR:MASTER_PORT, sshd) is running and reachable from this node", 111),
    errno_entry("ehostunreach", "No route to host", "the peer host cannot be reached (down, firewall, wrong interface)",
                "environment", "root", "suspect",
                "check the address, the firewall and the network interface used (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME)",
                113),
    errno_entry("enetunreach", "Network is unreachable", "no route to the peer's network from this node",
                "environment", "root", "suspect", "check the node's routes and the interface/address the job uses", 101),
    errno_entry("econnreset", "Connection reset by peer",
                "the peer closed the connection abruptly: usually the remote process died", "peer", "consequence",
                "warning", "find the remote rank/process and why it died", 104),
    errno_entry("etimedout", "Connection timed out",
                "the peer did not answer in time: the host is down, a firewall drops the packets, or the two "
                "interfaces cannot reach each other (different subnets, or NICs of different rails on a "
                "rail-optimized fabric; for RoCE a wrong GID index)",
                "peer", "root", "warning", "check the peer host, the firewall and the route between the two "
                "interfaces (ping / ib_write_bw between exactly those NICs)", 110),
    errno_entry("epipe", "Broken pipe", "a write went to a pipe or socket whose reader is gone: the peer process exited",
                "peer", "consequence", "warning", "find the process on the other end and why it exited", 32),
    errno_entry("eaddrinuse", "Address already in use",
                "the port is taken: another job or a leftover process already listens on MASTER_PORT",
                "launch", "root", "suspect", "use a free port (MASTER_PORT) or kill the leftover process", 98),
    errno_entry("eaddrnotavail", "Cannot assign requested address",
                "the address to bind to is not on this host (wrong MASTER_ADDR or interface)",
                "launch", "root", "suspect", "check MASTER_ADDR and the interface names the job uses", 99),
    errno_entry("enotconn", "Transport endpoint is not connected", "the socket is no longer connected (peer gone)",
                "peer", "consequence", "warning", "find the peer process and why it went away", 107),
    errno_entry("econnaborted", "Software caused connection abort", "the connection was aborted on this host",
                "peer", "consequence", "warning", "look at the peer and the network between the hosts", 103),
    errno_entry("ehostdown", "Host is down", "the peer host is down", "hardware", "root", "suspect",
                "check the host's state (ping, scheduler's node state)", 112),
    S("system.gai.name-or-service-not-known", "regex", r"(?:\[Errno -?\d+\] )?Name or service not known",
      (GAI[0], GAI[1], 'N_("Name or service not known")'), ex="[Errno -2] Name or service not known",
      m="a host name (MASTER_ADDR, a hostfile entry) could not be resolved",
      b="launch", r="root", s="suspect", a="check the host name and DNS/hosts on this node (getent hosts NAME)"),
    S("system.gai.temporary-failure", "regex", r"(?:\[Errno -?\d+\] )?Temporary failure in name resolution",
      (GAI[0], GAI[1], 'N_("Temporary failure in name resolution")'),
      ex="[Errno -3] Temporary failure in name resolution",
      m="the DNS resolver did not answer (DNS server down or unreachable from the node)",
      b="environment", r="root", s="suspect", a="check /etc/resolv.conf and DNS reachability on that node, or use IPs"),
    S("system.gai.no-address", "regex", r"(?:\[Errno -?\d+\] )?No address associated with hostname",
      (GAI[0], GAI[1], 'N_("No address associated with hostname")'),
      ex="[Errno -5] No address associated with hostname",
      m="the host name exists but has no address of the requested family",
      b="launch", r="root", s="suspect", a="check the host name (and IPv4/IPv6 use) of MASTER_ADDR"),
]

# ---------------------------------------------------------------------------------------------

DS_LAUNCH = "deepspeed/launcher/launch.py"
DS_RUNNER = "deepspeed/launcher/runner.py"

FRAMEWORKS: list[E] = [
    # ---- DeepSpeed -------------------------------------------------------------------------
    S("frameworks.deepspeed.exits-with-return-code", "python", "{} exits with return code = {}",
      ("deepspeed", DS_LAUNCH, "exits with return code = {last_return_code}"),
      m="DeepSpeed's per-node launcher saw a training process of this node exit with that code and now kills "
        "the others",
      b="self", r="root", s="warning",
      a="read that process's own log for its error; -9/137 is SIGKILL (OOM killer), -11 a segfault"),
    S("frameworks.deepspeed.killing-subprocess", "python", "Killing subprocess {}",
      ("deepspeed", DS_LAUNCH, "Killing subprocess {process.pid}"),
      m="DeepSpeed's launcher kills the remaining local processes after one failed or it got a signal",
      b="peer", r="consequence", s="warning", a="look for the first process that failed (exits with return code)"),
    S("frameworks.deepspeed.main-received-signal", "python", "Main process received {}, exiting",
      ("deepspeed", DS_LAUNCH, "Main process received {sig_names[signum]}, exiting"),
      m="DeepSpeed's launcher got SIGINT/SIGTERM from outside (scheduler cancel, time limit, pdsh stopping nodes)",
      b="peer", r="consequence", s="warning", a="find who sent the signal: the job's cancellation or another node's failure"),
    S("frameworks.deepspeed.host-not-reachable-ssh", "python",
      "Using hostfile at {} but host={} was not reachable via ssh. If you are running with a single node please "
      "remove {} or setup passwordless ssh.",
      ("deepspeed", DS_RUNNER, "was not reachable via ssh"),
      m="the deepspeed runner could not ssh to the first host of the hostfile",
      b="environment", r="root", s="suspect", a="set up passwordless ssh to every host, or remove the hostfile for one node"),
    S("frameworks.deepspeed.no-master-addr", "literal",
      "Unable to detect suitable master address via `hostname -I`, please manually specify one via --master_addr",
      ("deepspeed", DS_RUNNER, "Unable to detect suitable master address via `hostname -I`"),
      m="the runner could not find the first host's address for MASTER_ADDR",
      b="launch", r="root", s="suspect", a="pass --master_addr explicitly"),
    S("frameworks.deepspeed.hostfile-duplicate", "python",
      "Hostfile contains multiple entries for {}, unable to proceed with launching",
      ("deepspeed", DS_RUNNER, "Hostfile contains multiple entries for"),
      m="the hostfile names a host twice", b="launch", r="root", s="suspect", a="list each host once with its slots"),
    S("frameworks.deepspeed.hostfile-bad-entry", "python",
      "Hostfile contains a bad entry: {}, unable to proceed with launching",
      ("deepspeed", DS_RUNNER, "Hostfile contains a bad entry"),
      m="a hostfile line is not 'host slots=N'", b="launch", r="root", s="suspect", a="fix the hostfile line"),
    S("frameworks.deepspeed.hostfile-empty", "literal",
      "Hostfile is empty or not formatted correctly, unable to proceed with launching.",
      ("deepspeed", DS_RUNNER, "Hostfile is empty or not formatted correctly"),
      m="the hostfile has no usable line", b="launch", r="root", s="suspect", a="write 'host slots=N' lines"),
    S("frameworks.deepspeed.host-not-in-hostfile", "python", "Hostname '{}' not found in hostfile",
      ("deepspeed", DS_RUNNER, "not found in hostfile"),
      m="--include/--exclude names a host that the hostfile lacks", b="launch", r="root", s="suspect",
      a="match --include/--exclude to the hostfile's names"),
    S("frameworks.deepspeed.no-slot-on-host", "python", "No slot '{}' specified on host '{}'",
      ("deepspeed", DS_RUNNER, "specified on host '{hostname}'"),
      m="--include/--exclude names a GPU slot the hostfile does not give that host (slots=N declares slots 0..N-1)",
      b="launch", r="root", s="suspect",
      a="make the hostfile's slots=N match the GPUs of each host, and --include/--exclude name only those slots"),
    S("frameworks.deepspeed.include-and-num-gpus", "literal", "Cannot specify num_nodes/gpus with include/exclude",
      ("deepspeed", DS_RUNNER, "Cannot specify num_nodes/gpus with include/exclude"),
      m="the deepspeed runner got both --num_nodes/--num_gpus and --include/--exclude",
      b="launch", r="root", s="suspect", a="give either --num_nodes/--num_gpus or --include/--exclude"),
    S("frameworks.deepspeed.empty-master-addr", "regex", r"Using IP address of  for node (?P<s0>\S{1,253})",
      ("deepspeed", DS_RUNNER, "Using IP address of {args.master_addr} for node {first_host}"),
      ex="Using IP address of  for node ddp-0.ddp.ml-dev.svc.cluster.local",
      m="the deepspeed runner found no IP address for the first node (`hostname -I` over ssh printed none): every "
        "node is started with an empty --master_addr and rendezvous cannot work",
      b="launch", r="root", s="suspect",
      a="pass --master_addr explicitly (the first node's reachable IP), or fix `hostname -I` on that node"),
    S("frameworks.deepspeed.allocator-cache-flushes", "printf",
      "%d pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is "
      "detrimental to performance.",
      ("deepspeed", "deepspeed/runtime/zero/stage3.py", "pytorch allocator cache flushes since last step"),
      m="ZeRO-3 saw PyTorch's CUDA allocator empty its cache to satisfy allocations: this rank's GPU memory is nearly "
        "full (slow steps now, an out-of-memory error next)",
      b="self", r="context", s="warning",
      a="lower the micro-batch size or the ZeRO-3 prefetch/bucket sizes, or offload; call get_accelerator().empty_cache() "
        "at the same point on every rank"),
    S("frameworks.deepspeed.no-gpu", "literal", "Unable to proceed, no GPU resources available",
      ("deepspeed", DS_RUNNER, "Unable to proceed, no GPU resources available"),
      m="the runner found no GPU on this node", b="environment", r="root", s="suspect",
      a="check CUDA_VISIBLE_DEVICES and nvidia-smi on the node"),
    S("frameworks.deepspeed.no-extra-nodes", "literal", "Num nodes is >1 but no extra nodes available via hostfile",
      ("deepspeed", DS_RUNNER, "Num nodes is >1 but no extra nodes available"),
      m="--num_nodes asks for more nodes than the hostfile lists", b="launch", r="root", s="suspect",
      a="add the hosts to the hostfile or lower --num_nodes"),
    S("frameworks.deepspeed.launcher-not-installed", "python", "launcher '{}' not installed.",
      ("deepspeed", DS_RUNNER, "not installed."),
      m="the multi-node launcher backend (pdsh, openmpi, mvapich, slurm) is missing", b="environment", r="root",
      s="suspect", a="install the launcher (e.g. pdsh) or choose another with --launcher"),
    S("frameworks.deepspeed.mpich-devices-per-node", "literal", "MPICH requires same number of devices per node",
      ("deepspeed", "deepspeed/launcher/multinode_runner.py", "MPICH requires same number of devices per node"),
      m="the MPICH launcher needs the same GPU count on every node", b="launch", r="root", s="suspect",
      a="give every host the same slots"),
    S("frameworks.deepspeed.rank-env-mismatch", "literal", "rank number doesn't match!",
      ("deepspeed", "deepspeed/launcher/launcher_helper.py", "rank number doesn't match!"),
      m="the launcher's rank variables disagree (several launchers' env vars set at once)", b="launch", r="root",
      s="suspect", a="launch with one launcher only; clear stale RANK/PMI/OMPI variables"),
    S("frameworks.deepspeed.batch-size-mismatch", "python",
      "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
      "world_size {} != {} * {} * {}",
      ("deepspeed", "deepspeed/runtime/config.py", "Check batch related parameters. train_batch_size is not equal"),
      m="the DeepSpeed config's batch sizes do not multiply out with the world size", b="launch", r="root",
      s="suspect", a="set train_batch_size = micro_batch_per_gpu * gradient_accumulation_steps * world_size"),
    S("frameworks.deepspeed.zero-dp-world-size-changed", "python",
      "The checkpoint being loaded used a DP world size of {} but the current world size is {}. Automatic "
      "adjustment of ZeRO's optimizer state partitioning with a new world size is not currently supported.",
      ("deepspeed", "deepspeed/runtime/engine.py", "The checkpoint being loaded used a DP"),
      m="a ZeRO checkpoint is loaded with a different data-parallel world size than it was saved with",
      b="launch", r="root", s="suspect",
      a="resume with the same number of ranks, or convert the checkpoint (universal checkpoint)"),
    S("frameworks.deepspeed.elastic-world-size", "python",
      "World size ({}) is not valid with the current list of valid GPU counts: {}",
      ("deepspeed", "deepspeed/elasticity/elasticity.py", "is not valid"),
      m="elastic training: the job's world size is not one of the GPU counts the elastic config allows",
      b="launch", r="root", s="suspect", a="launch with one of the listed GPU counts or change the elasticity config"),
    S("frameworks.deepspeed.loss-scale-at-minimum", "literal",
      "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
      ("deepspeed", "deepspeed/runtime/fp16/loss_scaler.py", "Current loss scale already at minimum"),
      m="fp16 training kept overflowing until the loss scale hit its minimum: the run diverged",
      b="self", r="root", s="suspect", a="lower the learning rate, use bf16, or look for NaN/Inf in inputs"),
    S("frameworks.deepspeed.overflow-skipping-step", "python",
      "[deepspeed] OVERFLOW! Rank {} Skipping step. Attempted loss scale: {}, reducing to {}",
      ("deepspeed", "deepspeed/runtime/fp16/loss_scaler.py", "OVERFLOW! Rank {dist.get_rank()} Skipping step."),
      m="fp16 dynamic loss scaling saw Inf/NaN gradients and skipped the step (normal when rare)",
      b="self", r="context", s="info", a=""),
    S("frameworks.deepspeed.rank-detected-overflow", "python", "rank {} detected overflow {} in tensor {}:{} shape {}",
      ("deepspeed", "deepspeed/runtime/zero/stage_1_and_2.py", "detected overflow {cpu_sum} in tensor"),
      m="ZeRO: this rank found Inf/NaN in a gradient tensor", b="self", r="root", s="warning",
      a="if it repeats, look for the source of Inf/NaN on that rank (inputs, learning rate, fp16 range)"),

    # ---- Megatron-LM ---------------------------------------------------------------------------
    S("frameworks.megatron.world-size-not-divisible", "python", "world_size ({}) is not divisible by {}",
      ("megatron", "megatron/core/parallel_state.py", 'is not divisible by {model_size}")'),
      m="the world size is not a multiple of tensor x pipeline x context (x GTP) parallel sizes",
      b="launch", r="root", s="suspect",
      a="launch a world size divisible by TP*PP*CP, or change the parallel sizes"),
    S("frameworks.megatron.world-size-not-divisible-total-model", "python",
      "world size ({}) is not divisible by total_model_size ({total_model_size=})",
      ("megatron", "megatron/training/arguments.py", "is not divisible by total_model_size ({total_model_size=})"),
      m="the world size is not a multiple of the model-parallel size (TP*PP*CP)", b="launch", r="root", s="suspect",
      a="launch a world size divisible by TP*PP*CP, or change --tensor/--pipeline/--context-parallel-size"),
    S("frameworks.megatron.world-size-not-divisible-tp-pp-cp", "python",
      "world size ({}) is not divisible by tensor parallel size ({}) times pipeline parallel size ({}) times context "
      "parallel size ({})",
      ("megatron", "*.py", "'world size ({}) is not divisible by tensor parallel size ({}) times '"),
      m="older Megatron: the world size is not a multiple of TP*PP*CP", b="launch", r="root", s="suspect",
      a="launch a world size divisible by TP*PP*CP, or change the parallel sizes"),
    S("frameworks.megatron.world-size-not-divisible-tp", "python",
      "world size ({}) is not divisible by tensor model parallel size ({})",
      ("megatron", "*.py", "' ({}) is not divisible by tensor model parallel size ({})'"),
      m="older Megatron: the world size is not a multiple of the tensor-parallel size", b="launch", r="root",
      s="suspect", a="launch a world size divisible by --tensor-model-parallel-size"),
    S("frameworks.megatron.world-size-not-divisible-tp-x-pp", "python",
      "world_size ({}) is not divisible by tensor_model_parallel_size ({}) x pipeline_model_parallel_size ({}) x "
      "context_parallel_size ({})",
      ("megatron", "megatron/core/parallel_state.py", "is not divisible by tensor_model_parallel_size "),
      m="older Megatron core: the world size is not a multiple of TP*PP*CP", b="launch", r="root", s="suspect",
      a="launch a world size divisible by TP*PP*CP, or change the parallel sizes"),
    S("frameworks.megatron.world-size-not-divisible-expert", "python",
      "world_size ({}) is not divisible by expert_tensor_model_pipeline_parallel size ({})",
      ("megatron", "megatron/core/parallel_state.py", "is not divisible by expert_tensor_model_pipeline_parallel"),
      m="the world size is not a multiple of expert TP x EP x PP", b="launch", r="root", s="suspect",
      a="launch a world size divisible by expert-tensor x expert-model x pipeline parallel sizes"),
    S("frameworks.megatron.global-batch-not-divisible", "python",
      "global batch size ({}) is not divisible by micro batch size ({}) times data parallel size ({})",
      ("megatron", "megatron/core/num_microbatches_calculator.py",
       "'global batch size ({}) is not divisible by micro batch size ({})'"),
      m="the global batch size is not a multiple of micro batch size x data-parallel size", b="launch", r="root",
      s="suspect", a="choose --global-batch-size divisible by --micro-batch-size x DP size"),
    S("frameworks.megatron.layers-not-divisible-pp", "literal",
      "Number of layers should be divisible by the pipeline-model-parallel size",
      ("megatron", "megatron/training/arguments.py",
       "'Number of layers should be divisible by the pipeline-model-parallel size'"),
      m="the layer count does not split evenly over the pipeline stages", b="launch", r="root", s="suspect",
      a="choose --pipeline-model-parallel-size dividing --num-layers (or set uneven first/last stage layers)"),
    S("frameworks.megatron.unexpected-result-disabled", "python",
      "Rank {}, node {}, device {}, iteration {}: Unexpected result {} (message='{}')",
      ("megatron", "megatron/core/rerun_state_machine.py", "Unexpected result {result} (message='{message}')"),
      m="Megatron's result validation rejected a value on this rank (NaN/Inf loss or gradient norm) and stops "
        "the job; the message names the check",
      b="self", r="root", s="suspect",
      a="look at the named rank, node and GPU: a NaN reproducible elsewhere is the model/data, a one-off on one GPU "
        "points to hardware (run with --rerun-mode validate_results)"),
    S("frameworks.megatron.unexpected-result", "python",
      "Unexpected result {} on rank {} at iteration #{} invocation #{} (message='{}')",
      ("megatron", "megatron/core/rerun_state_machine.py", "f\"Unexpected result {result} \""),
      m="result validation rejected a value on the named rank; Megatron reruns the step to tell a transient fault "
        "from a real error",
      b="self", r="root", s="suspect", a="follow the rerun messages that come next on that rank"),
    S("frameworks.megatron.rerun-failure", "python", "Rank {}, node {}, device {}, iteration #{}: {}!",
      ("megatron", "megatron/core/rerun_state_machine.py", "f\"iteration #{self.current_iteration + 1}: {message}!\""),
      m="a rerun verdict of Megatron's result validation for the named rank, node and GPU",
      b="self", r="root", s="warning", a="read the verdict text after the colon"),
    S("frameworks.megatron.nan-grad-norm", "python",
      "found NaN in local grad norm for bucket #{} in backward pass before data-parallel communication collective",
      ("megatron", "megatron/core/distributed/param_and_grad_buffer.py", "found NaN in local grad norm for bucket"),
      m="this rank's local gradients hold a NaN before the data-parallel all-reduce",
      b="self", r="root", s="suspect",
      a="find whether the NaN repeats on other GPUs (data/model issue) or only on this one (hardware)"),
    S("frameworks.megatron.inf-grad-norm", "python",
      "found Inf in local grad norm for bucket #{} in backward pass before data-parallel communication collective",
      ("megatron", "megatron/core/distributed/param_and_grad_buffer.py", "found Inf in local grad norm for bucket"),
      m="this rank's local gradients hold an Inf before the data-parallel all-reduce",
      b="self", r="root", s="suspect", a="lower the learning rate / check the loss scale and the batch on that rank"),
    S("frameworks.megatron.nan-forward-loss", "literal", "found NaN in local forward loss calculation",
      ("megatron", "pretrain_gpt.py", "found NaN in local forward loss calculation"),
      m="this rank's forward loss is NaN", b="self", r="root", s="suspect",
      a="check the batch and learning rate of that iteration; rerun on another GPU to rule out hardware"),
    S("frameworks.megatron.nan-grad-norm-legacy", "python",
      "Rank {}: found NaN in local grad norm in backward pass before data-parallel communication collective. "
      "Device: {}, node: {}",
      ("megatron", "*.py", "found NaN in local grad norm in '"),
      m="older Megatron: the named rank's local gradients hold a NaN before the data-parallel all-reduce",
      b="self", r="root", s="suspect", a="check that rank's GPU and batch; rerun to see whether it reproduces"),
    S("frameworks.megatron.nan-forward-loss-legacy", "python",
      "Rank {}: found NaN in local forward loss calculation. Device: {}, node: {}",
      ("megatron", "*.py", "found NaN in local forward loss calculation. '"),
      m="older Megatron: the named rank's forward loss is NaN", b="self", r="root", s="suspect",
      a="check the batch and learning rate; rerun on another GPU to rule out hardware"),
    S("frameworks.megatron.rerun-reproducible", "python",
      "First rerun: unexpected result is reproducible within the tolerance ({} = {}). Need to rerun on a "
      "different GPU to verify correctness.",
      ("megatron", "megatron/core/rerun_state_machine.py", "First rerun: unexpected result is reproducible"),
      m="rerunning the step on the same GPU gave the same bad value: Megatron checkpoints and reruns elsewhere",
      b="self", r="context", s="info", a=""),
    S("frameworks.megatron.rerun-not-reproducible", "python",
      "First rerun: unexpected result is not reproducible within the tolerance ({} != {})",
      ("megatron", "megatron/core/rerun_state_machine.py", "First rerun: unexpected result is not reproducible"),
      m="rerunning the step on the same GPU gave a different value: a transient fault on that GPU",
      b="hardware", r="root", s="suspect", a="watch that GPU (dcgmi diag, Xid in dmesg); drain it if it repeats"),
    S("frameworks.megatron.second-rerun-incorrect", "python",
      "Second rerun: unexpected result is not reproducible on a different GPU, therefore was likely incorrect "
      "({} != {})",
      ("megatron", "megatron/core/rerun_state_machine.py", "Second rerun: unexpected result is not reproducible"),
      m="another GPU computed a different value for the same step: the first GPU likely computed wrong (silent "
        "data corruption)",
      b="hardware", r="root", s="suspect", a="take the first GPU/node out of service and run diagnostics on it"),
    S("frameworks.megatron.second-rerun-correct", "python",
      "Second rerun: unexpected result is reproducible on a different GPU, therefore it was likely correct ({} = {})",
      ("megatron", "megatron/core/rerun_state_machine.py", "Second rerun: unexpected result is reproducible"),
      m="another GPU reproduced the bad value: the data or model (not the hardware) produces it",
      b="self", r="root", s="suspect", a="inspect the batch and hyperparameters of that iteration"),
    S("frameworks.megatron.straggler-report", "regex",
      r"(?:\[[\d\- :]{19}\] \| )?MnRtt/Rnk: .{1,80} \| MxRtt/Rnk: .{1,80} \|",
      ("megatron", "megatron/core/utils.py", "f\"MnRtt/Rnk: {o_dt.min_elapsed} | \""),
      ex="[2024-05-01 12:00:00] | MnRtt/Rnk: 3528.1ms/12 | MxRtt/Rnk: 4102.7ms/5 | MnPwr/Rnk: 601W/3 | "
         "MxPwr/Rnk: 697W/9",
      m="Megatron's straggler detector: min/max iteration time, power, temperature, utilization and clock with the "
        "rank that has each",
      b="none", r="context", s="info", a=""),
    S("frameworks.megatron.exit-after-sigterm", "regex",
      r"\[exiting program after receiving SIGTERM\.\] datetime: .{0,40}",
      ("megatron", "megatron/training/training.py", "exiting program after receiving SIGTERM."),
      ex="[exiting program after receiving SIGTERM.] datetime: 2024-05-01 12:00:00.123456 ",
      m="Megatron saved and exited because it got SIGTERM (--exit-signal-handler): the job was being stopped",
      b="peer", r="consequence", s="warning", a="find why the job was signalled (time limit, cancellation)"),
    S("frameworks.megatron.interleaved-needs-pp", "literal",
      "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1",
      ("megatron", "megatron/training/arguments.py", "'When interleaved schedule is used, pipeline-model-parallel size '"),
      m="--num-layers-per-virtual-pipeline-stage needs pipeline parallelism", b="launch", r="root", s="suspect",
      a="set --pipeline-model-parallel-size > 1 or drop the virtual pipeline option"),

    # ---- accelerate ---------------------------------------------------------------------------
    S("frameworks.accelerate.port-in-use", "python",
      "Tried to launch distributed communication on port `{}`, but another process is utilizing it.",
      ("accelerate", "src/accelerate/utils/launch.py", "Tried to launch distributed communication on port"),
      m="accelerate launch found the main process port already taken", b="launch", r="root", s="suspect",
      a="pass another --main_process_port (or 0 on a single node) or stop the process holding it"),
    S("frameworks.accelerate.multinode-no-master-addr", "literal",
      "Tried to launch on distributed with multinode, but `MASTER_ADDR` env was not set, please try exporting rank "
      "0's hostname as",
      ("accelerate", "src/accelerate/state.py", "Tried to launch on distributed with multinode"),
      m="a multi-node run has no MASTER_ADDR", b="launch", r="root", s="suspect",
      a="export MASTER_ADDR=<rank 0's host> on every node (or pass --main_process_ip)"),
    S("frameworks.accelerate.shape-mismatch", "literal",
      "Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.",
      ("accelerate", "src/accelerate/utils/operations.py", "Cannot apply desired operation due to shape mismatches"),
      m="debug mode: ranks passed tensors of different shapes to a collective (which would otherwise hang)",
      b="self", r="root", s="suspect", a="read the per-process shapes listed below and make every rank send the same shape"),
    S("frameworks.accelerate.tensor-wrong-device", "python",
      "One or more of the tensors passed to {} were not on the {} while the `Accelerator` is configured for {}.",
      ("accelerate", "src/accelerate/utils/operations.py", "One or more of the tensors passed to"),
      m="debug mode: a tensor given to a collective is on the wrong device", b="self", r="root", s="suspect",
      a="move the tensor to accelerator.device before the call"),
    S("frameworks.accelerate.chained-operation-error", "python",
      "Error found while calling `{}`. Please see the earlier error for more details.",
      ("accelerate", "src/accelerate/utils/operations.py", "Please see the earlier error for more details."),
      m="wrapper of an earlier accelerate operation error", b="self", r="consequence", s="warning",
      a="read the earlier error"),
    S("frameworks.accelerate.old-kernel", "python",
      "Detected kernel version {}, which is below the recommended minimum of {}; this can cause the process to hang.",
      ("accelerate", "src/accelerate/utils/other.py", "which is below the recommended minimum of {min_version}"),
      m="the Linux kernel is older than 5.5, with which accelerate has seen processes hang",
      b="environment", r="root", s="warning", a="run on nodes with a kernel >= 5.5"),
    S("frameworks.accelerate.multi-gpu-needs-two", "literal",
      "You need to use at least 2 processes to use `--multi_gpu`.",
      ("accelerate", "src/accelerate/commands/launch.py", "You need to use at least 2 processes to use `--multi_gpu`."),
      m="--multi_gpu with fewer than 2 processes", b="launch", r="root", s="suspect",
      a="pass --num_processes >= 2 or drop --multi_gpu"),
    S("frameworks.accelerate.one-launch-mode", "literal",
      "You can only use one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, `--use_fsdp` at a time.",
      ("accelerate", "src/accelerate/commands/launch.py", "You can only use one of `--cpu`, `--multi_gpu`"),
      m="several launch modes were given", b="launch", r="root", s="suspect", a="keep one launch mode"),
    S("frameworks.accelerate.too-few-gpu-ids", "literal",
      "Less than two GPU ids were configured and tried to run on on multiple GPUs.",
      ("accelerate", "src/accelerate/commands/launch.py", "Less than two GPU ids were configured"),
      m="--gpu_ids lists fewer than two GPUs for a multi-GPU launch", b="launch", r="root", s="suspect",
      a="list at least two ids in --gpu_ids or use --gpu_ids=all"),
    S("frameworks.accelerate.num-processes-required", "literal",
      "You need to manually pass in `--num_processes` using this config yaml.",
      ("accelerate", "src/accelerate/commands/launch.py", "You need to manually pass in `--num_processes`"),
      m="the config file leaves the process count open", b="launch", r="root", s="suspect",
      a="pass --num_processes or set num_processes in the config"),
    S("frameworks.accelerate.notebook-num-processes", "literal",
      "You have to specify the number of devices you would like to use, add `num_processes=...` to your call.",
      ("accelerate", "src/accelerate/launchers.py", "You have to specify the number of devices you would like to use"),
      m="notebook_launcher without num_processes", b="launch", r="root", s="suspect", a="pass num_processes="),
    S("frameworks.accelerate.node-rank-too-large", "literal", "The node_rank must be less than the number of nodes.",
      ("accelerate", "src/accelerate/launchers.py", "The node_rank must be less than the number of nodes."),
      m="a node was given a node_rank >= num_nodes", b="launch", r="root", s="suspect",
      a="number the nodes 0..num_nodes-1"),
    S("frameworks.accelerate.batch-not-multiple-of-processes", "python",
      "To use `BatchSamplerShard` in `split_batches` mode, the batch size ({}) needs to be a round multiple of the "
      "number of processes ({}).",
      ("accelerate", "src/accelerate/data_loader.py", "To use `BatchSamplerShard` in `split_batches` mode"),
      m="split_batches needs the batch size to be a multiple of the process count", b="launch", r="root",
      s="suspect", a="choose a batch size divisible by num_processes"),
    S("frameworks.accelerate.device-initialized-before-fork", "python",
      "{} has been initialized before the `notebook_launcher` could create a forked subprocess.",
      ("accelerate", "src/accelerate/launchers.py", "has been initialized before the `notebook_launcher` could create"),
      m="CUDA (or another device) was initialized before forking the workers", b="self", r="root", s="suspect",
      a="do not touch the GPU (or import libraries that do) before notebook_launcher"),
    S("frameworks.accelerate.libraries-initialized-device", "literal",
      "Could not start distributed process. Libraries known to initialize device upon import have been imported "
      "already.",
      ("accelerate", "src/accelerate/launchers.py", "Could not start distributed process. Libraries known to initialize"),
      m="a library that initializes the GPU on import was imported before launching", b="self", r="root",
      s="suspect", a="move those imports inside the training function"),
    S("frameworks.accelerate.launch-issue", "python", "An issue was found when launching the training: {}",
      ("accelerate", "src/accelerate/launchers.py", "An issue was found when launching the training"),
      m="notebook_launcher wraps an error of a worker process", b="self", r="consequence", s="warning",
      a="read the wrapped error"),
    S("frameworks.accelerate.mpirun-not-found", "literal",
      "mpirun or mpiexec were not found. Ensure that Intel MPI, Open MPI, or MVAPICH are installed.",
      ("accelerate", "src/accelerate/utils/launch.py", "mpirun or mpiexec were not found"),
      m="the MPI launcher binary is missing", b="environment", r="root", s="suspect", a="install an MPI or load its module"),
    S("frameworks.accelerate.backend-unavailable", "python",
      "Your assigned backend {} is not available, please use {}",
      ("accelerate", "src/accelerate/state.py", "Your assigned backend {original_backend} is not available"),
      m="the requested torch.distributed backend is not available here", b="environment", r="root", s="suspect",
      a="use the suggested backend or install the one requested"),
    S("frameworks.accelerate.rtx4000-p2p-disabled", "literal",
      "Using RTX 4000 series which doesn't support faster communication speedups. Ensuring P2P and IB communications "
      "are disabled.",
      ("accelerate", "src/accelerate/commands/launch.py", "Using RTX 4000 series which doesn't support"),
      m="accelerate sets NCCL_P2P_DISABLE/NCCL_IB_DISABLE for consumer GPUs", b="none", r="context", s="info", a=""),

    # ---- Lightning ----------------------------------------------------------------------------
    S("frameworks.lightning.unused-parameters", "literal",
      "It looks like your LightningModule has parameters that were not used in producing the loss returned by "
      "training_step.",
      ("lightning", "src/lightning/pytorch/strategies/ddp.py", "It looks like your LightningModule has parameters"),
      m="DDP's reducer saw parameters without gradients (PyTorch's 'Expected to have finished reduction in the prior "
        "iteration'); ranks then wait on different buckets",
      b="self", r="root", s="suspect",
      a="use strategy='ddp_find_unused_parameters_true' or make every parameter take part in the loss"),
    S("frameworks.lightning.accelerator-not-available", "python",
      "{}` can not run on your system since the accelerator is not available.",
      ("lightning", "src/lightning/pytorch/trainer/connectors/accelerator_connector.py", "can not run on your system"),
      m="the requested accelerator (e.g. CUDAAccelerator) is not available on this node", b="environment",
      r="root", s="suspect", a="check that the node has GPUs visible (nvidia-smi, CUDA_VISIBLE_DEVICES) or change accelerator"),
    S("frameworks.lightning.gpus-none-available", "literal", "GPUs requested but none are available.",
      ("lightning", "src/lightning/fabric/utilities/device_parser.py", "GPUs requested but none are available."),
      m="Trainer(devices=...) asks for GPUs but none are visible", b="environment", r="root", s="suspect",
      a="check CUDA_VISIBLE_DEVICES and the job's GPU request (--gres/--gpus)"),
    S("frameworks.lightning.requested-gpu-missing", "python", "You requested gpu: {}",
      ("lightning", "src/lightning/fabric/utilities/device_parser.py", "You requested gpu: {gpus}"),
      m="Trainer(devices=[...]) names GPU ids this node does not have (the next line lists the available ones)",
      b="launch", r="root", s="suspect", a="request GPU ids that exist on the node (or devices=N)"),
    S("frameworks.lightning.find-devices-too-many", "python",
      "You requested to find {} devices but this machine only has {} GPUs.",
      ("lightning", "src/lightning/fabric/accelerators/cuda.py", "You requested to find {num_devices} devices"),
      m="devices=N is larger than the node's GPU count", b="launch", r="root", s="suspect",
      a="lower devices or request more GPUs per node"),
    S("frameworks.lightning.duplicate-device-ids", "literal", "Device ID's (GPU) must be unique.",
      ("lightning", "src/lightning/fabric/utilities/device_parser.py", "Device ID's (GPU) must be unique."),
      m="the device list names a GPU twice", b="launch", r="root", s="suspect", a="list each GPU once"),
    S("frameworks.lightning.slurm-ntasks-per-node-mismatch", "python",
      "You set `devices={}` in Lightning, but the number of tasks per node configured in SLURM `--ntasks-per-node={}` "
      "does not match.",
      ("lightning", "src/lightning/fabric/plugins/environments/slurm.py", "but the number of tasks per node configured in SLURM"),
      m="Trainer(devices) differs from SLURM's --ntasks-per-node", b="launch", r="root", s="suspect",
      a="make devices equal to --ntasks-per-node"),
    S("frameworks.lightning.slurm-nodes-mismatch", "python",
      "You set `num_nodes={}` in Lightning, but the number of nodes configured in SLURM `--nodes={}` does not match.",
      ("lightning", "src/lightning/fabric/plugins/environments/slurm.py", "but the number of nodes configured in SLURM"),
      m="Trainer(num_nodes) differs from SLURM's --nodes", b="launch", r="root", s="suspect",
      a="make num_nodes equal to --nodes"),
    S("frameworks.lightning.slurm-ntasks-unsupported", "python",
      "You set `--ntasks={}` in your SLURM bash script, but this variable is not supported.",
      ("lightning", "src/lightning/fabric/plugins/environments/slurm.py", "in your SLURM bash script, but this variable is not supported"),
      m="--ntasks without --ntasks-per-node", b="launch", r="root", s="suspect", a="use --ntasks-per-node instead"),
    S("frameworks.lightning.srun-not-used", "literal", "The `srun` command is available on your system but is not used.",
      ("lightning", "src/lightning/fabric/plugins/environments/slurm.py", "The `srun` command is available on your system"),
      m="on SLURM without srun, only one process starts and the others never join (the run hangs at setup)",
      b="launch", r="root", s="warning", a="prepend srun to the python command in the batch script"),
    S("frameworks.lightning.torchelastic-world-size-mismatch", "python",
      "You set `devices={}` and `num_nodes={}` in Lightning, but the product ({} * {}) does not match the world size "
      "({}).",
      ("lightning", "src/lightning/fabric/plugins/environments/torchelastic.py", "in Lightning, but the product"),
      m="devices x num_nodes differs from the launcher's WORLD_SIZE", b="launch", r="root", s="suspect",
      a="match Trainer(devices, num_nodes) to torchrun's --nproc-per-node and --nnodes"),
    S("frameworks.lightning.received-sigterm", "regex", r"(?:\[rank: \d+\] )?Received SIGTERM: \d+",
      ("lightning", "src/lightning/pytorch/trainer/connectors/signal_connector.py", "Received SIGTERM: {signum}"),
      ex="[rank: 1] Received SIGTERM: 15",
      m="the rank got SIGTERM from outside (scheduler, launcher stopping survivors) and shuts down",
      b="peer", r="consequence", s="warning", a="find why the job was signalled: the first failed rank or a cancellation"),
    S("frameworks.lightning.auto-requeue-signal", "python", "Handling auto-requeue signal: {}",
      ("lightning", "src/lightning/pytorch/trainer/connectors/signal_connector.py", "Handling auto-requeue signal"),
      m="SLURM sent the requeue signal (time limit near): Lightning checkpoints and requeues the job",
      b="none", r="context", s="info", a=""),
    S("frameworks.lightning.requeue-failed", "python", "Requeuing SLURM job {} failed with error code {}",
      ("lightning", "src/lightning/pytorch/trainer/connectors/signal_connector.py", "failed with error code {result}"),
      m="scontrol requeue failed", b="environment", r="root", s="warning",
      a="check that scontrol is reachable from the node and the job may be requeued"),
    S("frameworks.lightning.keyboard-interrupt", "literal", "Detected KeyboardInterrupt, attempting graceful shutdown ...",
      ("lightning", "src/lightning/pytorch/trainer/call.py", "Detected KeyboardInterrupt, attempting graceful shutdown"),
      m="the rank got SIGINT and stops", b="none", r="consequence", s="warning", a="check who interrupted the run"),
    S("frameworks.lightning.fork-not-supported", "python",
      "You selected `Trainer(strategy='{}')` but process forking is not supported on this platform.",
      ("lightning", "src/lightning/pytorch/trainer/connectors/accelerator_connector.py", "but process forking is not supported"),
      m="a fork-based strategy on a platform without fork", b="launch", r="root", s="suspect",
      a="use strategy='ddp_spawn' or 'ddp'"),

    # ---- Ray ------------------------------------------------------------------------------------
    S("frameworks.ray.actor-died", "literal", "The actor died unexpectedly before finishing this task.",
      ("ray", "python/ray/exceptions.py", "The actor died unexpectedly before finishing this task."),
      m="ActorDiedError: the actor's process died (crash, OOM kill, node loss) while the caller waited",
      b="peer", r="consequence", s="warning",
      a="read the lines that follow (class_name, pid, ip, exit detail) and that worker's log for why it died"),
    S("frameworks.ray.actor-died-creation-task", "python",
      "The actor died because of an error raised in its creation task, {}",
      ("ray", "python/ray/exceptions.py", "\"The actor died because of an error\""),
      m="the actor's __init__ raised: the exception printed after this header (its traceback's last line) is the "
        "cause", b="self", r="context", s="warning",
      a="read the exception that follows and fix what the actor's constructor raised"),
    S("frameworks.ray.actor-unavailable", "python",
      "The actor {} is unavailable: {}. The task may or may not have been executed on the actor.",
      ("ray", "python/ray/exceptions.py", "is unavailable: {error_message}. The task may or"),
      m="the actor is temporarily unreachable (restarting, network)", b="peer", r="consequence", s="warning",
      a="look at the actor's node and whether the actor restarted"),
    S("frameworks.ray.worker-crashed", "literal",
      "The worker died unexpectedly while executing this task. Check python-core-worker-*.log files for more "
      "information.",
      ("ray", "python/ray/exceptions.py", "The worker died unexpectedly while executing this task."),
      m="WorkerCrashedError: the process running the task died (crash, OOM kill)", b="peer", r="consequence",
      s="warning", a="read that worker's python-core-worker-*.log and dmesg on its node"),
    S("frameworks.ray.local-raylet-died", "literal",
      "The task's local raylet died. Check raylet.out for more information.",
      ("ray", "python/ray/exceptions.py", "The task's local raylet died."),
      m="the node's raylet died (node failure, OOM kill of the raylet)", b="environment", r="root", s="suspect",
      a="read raylet.out on that node and its dmesg"),
    S("frameworks.ray.object-store-full", "literal",
      "The local object store is full of objects that are still in scope and cannot be evicted.",
      ("ray", "python/ray/exceptions.py", "The local object store is full of objects that are still in"),
      m="the object store (in /dev/shm) is full of live objects", b="environment", r="root", s="suspect",
      a="free references (ray memory), raise object_store_memory or /dev/shm size"),
    S("frameworks.ray.out-of-disk", "literal",
      "The object cannot be created because the local object store is full and the local disk's utilization is over "
      "capacity (95% by default).",
      ("ray", "python/ray/exceptions.py", "The object cannot be created because the local object store"),
      m="object store full and spilling disk above its threshold", b="environment", r="root", s="suspect",
      a="free disk on the node (df) or point spilling to a larger disk"),
    S("frameworks.ray.object-lost", "python",
      "All copies of {} have been lost due to node failure.",
      ("ray", "python/ray/exceptions.py", "have been lost due to node"),
      m="every copy of an object lived on nodes that failed", b="peer", r="consequence", s="warning",
      a="find the failed node in the cluster logs"),
    S("frameworks.ray.fetch-timed-out", "python",
      "Fetch for object {} timed out because no locations were found for the object.",
      ("ray", "python/ray/exceptions.py", "timed out because no"),
      m="an object could not be located in the cluster", b="peer", r="consequence", s="warning",
      a="check node failures in the cluster logs"),
    S("frameworks.ray.task-not-schedulable", "python", "The task is not schedulable: {}",
      ("ray", "python/ray/exceptions.py", "The task is not schedulable: {self.error_message}"),
      m="no node can ever satisfy the task's resource request", b="launch", r="root", s="suspect",
      a="lower the task's resources (num_gpus, memory) or add nodes that have them"),
    S("frameworks.ray.actor-not-schedulable", "python", "The actor is not schedulable: {}",
      ("ray", "python/ray/exceptions.py", "The actor is not schedulable: {self.error_message}"),
      m="no node can ever satisfy the actor's resource request", b="launch", r="root", s="suspect",
      a="lower the actor's resources or add nodes that have them"),
    S("frameworks.ray.task-error-header", "regex",
      r"ray::(?P<s0>[\w.<>\-]{1,200})\(\) \(pid=(?P<s1>\d+), ip=(?P<s2>[0-9a-fA-F.:]{1,64})",
      ("ray", "python/ray/exceptions.py", "f\"(pid={self.pid}, ip={self.ip}\""),
      ex="ray::RayTrainWorker._RayTrainWorker__execute() (pid=41233, ip=10.0.0.12, actor_id=9f2, repr=<Worker>)",
      m="RayTaskError header: the named remote task/actor method on that pid and ip raised; its traceback follows",
      b="self", r="root", s="warning", a="read the traceback that follows: it is the remote worker's own error"),
    S("frameworks.ray.oom-task-killed", "literal", "Task was killed due to the node running low on memory.",
      url=RAY_OOM,
      m="Ray's memory monitor (Ray <= 2.54 wording) killed the task's worker because the node's memory use passed "
        "the threshold",
      b="environment", r="root", s="suspect",
      a="reduce per-task memory or concurrency (memory= resource), or raise RAY_memory_usage_threshold"),
    S("frameworks.ray.oom-workers-killed", "printf", "%d worker(s) were killed due to the node running low on memory.",
      url=RAY_DATA_OOM,
      m="Ray's memory monitor (Ray >= 2.55 wording) killed workers because the node's memory use passed the threshold",
      b="environment", r="root", s="suspect",
      a="reduce per-task memory or concurrency (memory= resource), or raise RAY_memory_usage_threshold"),
    S("frameworks.ray.raylet-oom-summary", "printf",
      "%d Workers (tasks / actors) killed due to memory pressure (OOM), %d Workers crashed due to other reasons at "
      "node (ID: %s, IP: %s) over the last time period.", url=RAY_OOM,
      m="the raylet's summary: Ray's memory monitor killed workers on that node because its host memory use passed "
        "the threshold (the out-of-memory killer summary the Ray OOM-prevention page shows)",
      b="environment", r="root", s="suspect",
      a="give the node more memory or run fewer workers on it (request more CPUs/memory per task), or raise "
        "RAY_memory_usage_threshold; `ray logs raylet.out -ip IP` names the killed workers"),
    S("frameworks.ray.worker-died-system-error", "literal",
      "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
      "problem, check the logs for the dead worker.",
      url=RAY_RAYLET_SRC,
      m="the raylet reports a worker that died mid-task (crash, SIGKILL/OOM); 'Worker exit type: SYSTEM_ERROR' and "
        "the exit detail follow",
      b="self", r="root", s="warning", a="read the exit detail and the dead worker's log; check dmesg for OOM kills"),
    S("frameworks.ray.actor-dead-worker-exit", "python",
      "The actor is dead because its worker process has died. Worker exit type: {}", url=RAY_GCS_DIR,
      m="the GCS reports an actor whose worker process died, with the exit type (SYSTEM_ERROR = crash or kill)",
      b="self", r="root", s="warning", a="read the worker exit detail that follows and that worker's log"),
    S("frameworks.ray.worker-connection-error", "python",
      "Worker unexpectedly exits with a connection error code {}.",
      url=RAY_RAYLET_SRC,
      m="the worker's connection to the raylet broke: it was SIGKILLed (OOM killer), force-stopped or crashed "
        "(SIGSEGV); Ray lists these causes after it",
      b="self", r="root", s="warning", a="check dmesg on that node for an OOM kill and the worker's log for a crash"),
    S("frameworks.ray.node-marked-dead", "python",
      "The node with node id: {} and address: {} and node name: {} has been marked dead because the detector has "
      "missed too many heartbeats from it.",
      url=RAY_GCS_SRC,
      m="the GCS lost the named node (raylet crash or OOM, preemption, network): its tasks and actors die with it",
      b="peer", r="root", s="suspect",
      a="look at that node: raylet.out, dmesg (OOM), and whether it was preempted or lost its network"),

    # ---- horovod --------------------------------------------------------------------------------
    S("frameworks.horovod.stall-warning", "python",
      "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
      "for remainder of ranks for more than {} seconds.",
      ("horovod", "horovod/common/stall_inspector.cc", "message << \"One or more tensors were submitted to be \""),
      m="horovod's stall inspector: some ranks wait in a collective the others never joined; the 'Missing ranks' "
        "listed below are the stuck ones",
      b="peer", r="consequence", s="warning",
      a="look at the missing ranks' stacks: they are elsewhere (a different tensor, a crash, data loading)"),
    S("frameworks.horovod.stall-shutdown", "python",
      "One or more rank (marked by \"!\") is stalled for longer than {} seconds. Will shutdown.",
      ("horovod", "horovod/common/stall_inspector.cc", "is stalled for longer than"),
      m="the stall lasted past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: horovod shuts the job down", b="peer",
      r="consequence", s="warning", a="diagnose the ranks marked '!' in the list above"),
    S("frameworks.horovod.shut-down", "literal",
      "Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, "
      "allgather or broadcast a tensor after one of the ranks finished execution.",
      ("horovod", "horovod/common/common.h", "\"Horovod has been shut down. This was caused by an exception on one of the \""),
      m="this rank's collective failed because horovod already shut down after another rank's error or exit",
      b="peer", r="consequence", s="warning", a="find the first exception in the other ranks' logs"),
    S("frameworks.horovod.not-initialized", "literal", "Horovod has not been initialized; use hvd.init().",
      ("horovod", "horovod/common/common.h", "Horovod has not been initialized; use hvd.init()."),
      m="a horovod call ran before hvd.init()", b="self", r="root", s="suspect", a="call hvd.init() first"),
    S("frameworks.horovod.processes-exited-nonzero", "literal",
      "Horovod detected that one or more processes exited with non-zero status, thus causing the job to be "
      "terminated. The first process to do so was:",
      ("horovod", "horovod/runner/gloo_run.py", "'Horovod detected that one or more processes exited with non-zero '"),
      m="horovodrun: a worker failed; the process name and exit code of the first one follow", b="self", r="root",
      s="warning", a="read the named process's log"),
    S("frameworks.horovod.mismatched-data-types", "python",
      "Mismatched data types: One rank had type {}, but another rank had type {}.",
      ("horovod", "horovod/common/controller.cc", "Mismatched data types: One rank had type"),
      m="ranks passed tensors of different dtypes to the same named collective", b="self", r="root", s="suspect",
      a="make every rank pass the same dtype for that tensor"),
    S("frameworks.horovod.mismatched-operations", "python",
      "Mismatched operations: One rank did an {}, but another rank did an {}.",
      ("horovod", "horovod/common/controller.cc", "Mismatched operations: One rank did an"),
      m="ranks called different collectives under the same tensor name", b="self", r="root", s="suspect",
      a="make every rank issue the same collectives in the same order"),
    S("frameworks.horovod.mismatched-shapes", "python",
      "Mismatched {} tensor shapes: One rank sent a tensor of shape {}, but another rank sent a tensor of shape {}.",
      ("horovod", "horovod/common/controller.cc", "\" tensor shapes: One rank sent a tensor of shape \""),
      m="ranks passed tensors of different shapes to the same collective", b="self", r="root", s="suspect",
      a="make every rank pass the same shape (pad uneven batches)"),
    S("frameworks.horovod.mismatched-root-ranks", "python",
      "Mismatched {} root ranks: One rank specified root rank {}, but another rank specified root rank {}.",
      ("horovod", "horovod/common/controller.cc", "\" root ranks: One rank specified root rank \""),
      m="ranks disagree on the root of a broadcast", b="self", r="root", s="suspect",
      a="pass the same root_rank on every rank"),
    S("frameworks.horovod.mismatched-device", "python",
      "Mismatched {} CPU/GPU device selection: One rank specified device {}, but another rank specified device {}.",
      ("horovod", "horovod/common/controller.cc", "\" CPU/GPU device selection: One rank specified device \""),
      m="some ranks pass a CPU tensor and others a GPU tensor to the same collective", b="self", r="root",
      s="suspect", a="put the tensor on the same device type on every rank"),
    S("frameworks.horovod.init-failed", "python", "Horovod could not be initialized: {}",
      ("horovod", "horovod/common/operations.cc", "Horovod could not be initialized: "),
      m="hvd.init() failed; the reason follows", b="launch", r="root", s="suspect", a="read the reason (often the launcher env)"),
    S("frameworks.horovod.background-loop-exception", "python", "Horovod background loop uncaught exception: {}",
      ("horovod", "horovod/common/operations.cc", "Horovod background loop uncaught exception: "),
      m="horovod's background thread died with an exception (often a NCCL/MPI error)", b="self", r="root",
      s="suspect", a="read the exception text"),

    # ---- AReaL ----------------------------------------------------------------------------------
    S("frameworks.areal.ray-not-enough-resources", "python",
      "Ray does not have enough resources to launch workers. Required: {} CPU, {} GPU, {} GB memory. "
      "Available: {} CPU, {} GPU, {} GB memory.",
      ("areal", "realhf/system/controller.py", "Ray does not have enough resources to launch workers."),
      m="the experiment's workers ask the Ray cluster for more CPUs, GPUs or memory than it has: they are never "
        "scheduled and the experiment waits forever", b="launch", r="root", s="suspect",
      a="lower the per-worker reservations (cpu_per_*_worker, mem_per_*_worker) or the number of workers, or add "
        "Ray nodes; compare Required with Available in the line"),

    # ---- vLLM -----------------------------------------------------------------------------------
    S("frameworks.vllm.worker-proc-died", "printf", "Worker proc %s died unexpectedly, shutting down executor.",
      ("vllm", "vllm/v1/executor/multiproc_executor.py", "Worker proc %s died unexpectedly"),
      m="a vLLM worker process (one GPU rank) died; the executor shuts everything down",
      b="peer", r="root", s="suspect",
      a="read the named worker's own output above (CUDA error, OOM, NCCL) and dmesg for an OOM kill"),
    S("frameworks.vllm.engine-core-died", "printf", "Engine core proc %s died unexpectedly, shutting down client.",
      ("vllm", "vllm/v1/engine/core_client.py", "Engine core proc %s died unexpectedly"),
      m="vLLM's engine-core process died; the API client shuts down", b="peer", r="root", s="suspect",
      a="read the engine core's output above for its error"),
    S("frameworks.vllm.engine-dead", "literal",
      "EngineCore encountered an issue. See stack trace (above) for the root cause.",
      ("vllm", "vllm/v1/engine/exceptions.py", "EngineCore encountered an issue. See stack trace (above)"),
      m="EngineDeadError: the engine core already died; this request fails as a consequence", b="peer",
      r="consequence", s="warning", a="read the earlier stack trace of the engine core"),
    S("frameworks.vllm.engine-core-fatal", "literal", "EngineCore encountered a fatal error.",
      ("vllm", "vllm/v1/engine/core.py", "EngineCore encountered a fatal error."),
      m="the engine core hit an exception (traceback follows) and stops", b="self", r="root", s="warning",
      a="read the traceback that follows"),
    S("frameworks.vllm.worker-proc-failed", "literal", "WorkerProc hit an exception.",
      ("vllm", "vllm/v1/executor/multiproc_executor.py", "WorkerProc hit an exception."),
      m="a worker process hit an exception during execution (traceback follows)", b="self", r="root", s="warning",
      a="read the traceback that follows"),
    S("frameworks.vllm.engine-core-failed-to-start", "literal", "EngineCore failed to start.",
      ("vllm", "vllm/v1/engine/core.py", "EngineCore failed to start."),
      m="vLLM's engine-core process failed while starting (model load, KV-cache profiling, its workers' start); "
        "its traceback follows", b="self", r="root", s="warning",
      a="read the traceback that follows and the workers' own errors above it"),
    S("frameworks.vllm.worker-failed-to-start", "literal", "WorkerProc failed to start.",
      ("vllm", "vllm/v1/executor/multiproc_executor.py", "WorkerProc failed to start."),
      m="a worker process failed during startup (traceback follows)", b="self", r="root", s="warning",
      a="read the traceback that follows (model load, CUDA init, NCCL init)"),
    S("frameworks.vllm.rpc-timed-out", "python", "RPC call to {} timed out.",
      ("vllm", "vllm/v1/executor/multiproc_executor.py", "RPC call to {method} timed out."),
      m="the executor waited too long for the workers' answer: a worker hangs or is slow", b="peer",
      r="consequence", s="warning", a="take the workers' stacks (py-spy) to see which one does not answer"),
    S("frameworks.vllm.worker-failed-with-error", "python",
      "Worker failed with error '{}', please check the stack trace above for the root cause",
      ("vllm", "vllm/v1/executor/multiproc_executor.py", "Worker failed with error '{result}'"),
      m="a worker reported an error for an executor call", b="peer", r="consequence", s="warning",
      a="read the worker's stack trace above"),
    S("frameworks.vllm.shm-broadcast-wait", "python",
      "No available shared memory broadcast block found in {} seconds. This typically happens when some processes are "
      "hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
      ("vllm", "vllm/distributed/device_communicators/shm_broadcast.py", "No available shared memory broadcast block found"),
      m="vLLM's shared-memory message queue waited that long for readers: some worker hangs or is busy",
      b="peer", r="consequence", s="warning", a="take the workers' stacks to see which one is stuck"),
    S("frameworks.vllm.heads-not-divisible-tp", "python",
      "Total number of attention heads ({}) must be divisible by tensor parallel size ({}).",
      ("vllm", "vllm/config/model.py", "must be divisible by tensor parallel size"),
      m="the tensor-parallel size does not divide the model's attention heads", b="launch", r="root", s="suspect",
      a="choose a --tensor-parallel-size that divides the head count"),
    S("frameworks.vllm.tp-larger-than-gpus", "python",
      "Tensor parallel size ({}) cannot be larger than the number of available GPUs ({}).",
      ("vllm", "vllm/config/parallel.py", "larger than the number of available GPUs ({gpu_count})."),
      m="the tensor-parallel size exceeds the visible GPUs", b="launch", r="root", s="suspect",
      a="lower --tensor-parallel-size or make more GPUs visible (CUDA_VISIBLE_DEVICES)"),
    S("frameworks.vllm.required-gpus-exceed-placement-group", "printf",
      "The number of required %ss exceeds the total number of available %ss in the placement group.",
      ("vllm", "vllm/v1/executor/ray_utils.py", "\"number of available %ss in the placement group.\""),
      m="vLLM needs more GPUs (tensor x pipeline parallel size) than Ray has for it: the placement group cannot be "
        "made and the engine waits, then fails",
      b="launch", r="root", s="warning",
      a="lower --tensor-parallel-size / --pipeline-parallel-size to the GPUs you have, or give Ray more GPUs "
        "(ray status)"),
    S("frameworks.vllm.required-gpus-exceed-placement-group-raised", "python",
      "The number of required {}s exceeds the total number of available {}s in the placement group.",
      ("vllm", "vllm/v1/executor/ray_utils.py", "number of available {device_str}s in the placement group. "),
      m="vLLM needs more GPUs (tensor x pipeline parallel size) than the given placement group holds",
      b="launch", r="root", s="suspect",
      a="lower --tensor-parallel-size / --pipeline-parallel-size or give the placement group more GPU bundles"),
    S("frameworks.vllm.tp-exceeds-available-gpus", "printf", "Tensor parallel size (%d) exceeds available GPUs (%d).",
      ("vllm", "vllm/v1/executor/ray_utils.py", "\"Tensor parallel size (%d) exceeds available GPUs (%d). \""),
      m="the tensor-parallel size is larger than the GPUs of this node: Ray must find the rest elsewhere, or fails",
      b="launch", r="root", s="warning",
      a="lower --tensor-parallel-size, or make sure the Ray cluster has that many GPUs"),
    S("frameworks.vllm.cannot-provide-placement-group-gpus", "python",
      "Cannot provide a placement group requiring {} GPUs",
      ("vllm", "vllm/v1/executor/ray_utils.py", "f\"Cannot provide a placement group requiring \""),
      m="Ray could not reserve the GPUs vLLM asked for within the timeout: the parallel sizes exceed the free GPUs",
      b="launch", r="root", s="suspect",
      a="lower --tensor-parallel-size / --pipeline-parallel-size, or free GPUs (ray status; another job may hold them)"),
    S("frameworks.vllm.cannot-provide-placement-group", "python",
      "Cannot provide a placement group of {} within {} seconds.",
      ("vllm", "vllm/v1/executor/ray_utils.py", "\"Cannot provide a placement group of \""),
      m="Ray could not reserve the resources vLLM asked for within the timeout",
      b="launch", r="root", s="suspect",
      a="check `ray status` and `ray list nodes`: the cluster must have the GPUs the parallel sizes need"),
    S("frameworks.vllm.current-node-no-gpu", "python", "Current node has no {} available.",
      ("vllm", "vllm/v1/executor/ray_utils.py", "f\"Current node has no {device_str} available. \""),
      m="the node that starts the vLLM engine has no GPU in Ray's view (all taken, or none visible)",
      b="environment", r="root", s="suspect",
      a="start vLLM on a node with a free GPU; check CUDA_VISIBLE_DEVICES and `ray status`"),
    S("frameworks.vllm.engines-startup-timeout", "literal",
      "Timed out waiting for engines to sendinitial message on input socket.",
      ("vllm", "vllm/v1/engine/core_client.py", "\"Timed out waiting for engines to send\""),
      m="the API client waited 10 minutes for the engine cores to start: an engine hangs at startup (model load, "
        "NCCL init)",
      b="peer", r="root", s="warning", a="look at the engine processes' output and stacks"),
    S("frameworks.vllm.custom-allreduce-no-p2p", "literal",
      "Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.",
      ("vllm", "vllm/distributed/device_communicators/custom_all_reduce.py", "\"Custom allreduce is disabled because your platform lacks \""),
      m="GPU peer-to-peer access is missing, so vLLM's custom all-reduce falls back to NCCL", b="environment",
      r="context", s="info", a=""),
    S("frameworks.vllm.barrier-timeout", "python", "Barrier timed out after {:.2f} seconds",
      ("vllm", "vllm/distributed/utils.py", "Barrier timed out after {timeout:.2f} seconds"),
      m="vLLM's store-based barrier timed out: a rank did not arrive", b="peer", r="consequence", s="warning",
      a="find the rank that never reached the barrier"),

    # ---- SGLang ---------------------------------------------------------------------------------
    S("frameworks.sglang.sigquit-child-failed", "python",
      "SIGQUIT received. {signum=}, {frame=}. It usually means one child failed.",
      ("sglang", "python/sglang/srt/managers/tokenizer_manager.py", "It usually means one child failed."),
      m="the SGLang server got SIGQUIT from a child process that failed; it shuts down", b="peer",
      r="consequence", s="warning", a="look for the child's own error above (scheduler, detokenizer)"),
    S("frameworks.sglang.sigquit-child-failed-engine", "literal",
      "Received sigquit from a child process. It usually means the child failed.",
      ("sglang", "python/sglang/srt/entrypoints/engine.py", "Received sigquit from a child process."),
      m="SGLang's engine got SIGQUIT from one of its processes (scheduler, detokenizer, a TP worker): that child "
        "failed and the engine stops", b="peer", r="consequence", s="warning",
      a="read the failed child's traceback above (Scheduler hit an exception, CUDA or NCCL errors)"),
    S("frameworks.sglang.scheduler-died-init", "python",
      "Rank {} scheduler died during initialization (exit code: {}).",
      ("sglang", "python/sglang/srt/entrypoints/engine.py", "scheduler died during initialization"),
      m="the scheduler of the named rank died while starting (exit code -9 usually means the OOM killer)",
      b="self", r="root", s="suspect", a="read that rank's output; for -9 check dmesg for an OOM kill"),
    S("frameworks.sglang.watchdog-timeout", "python", "{} watchdog timeout ({self.watchdog_timeout=}, {self.soft=})",
      ("sglang", "python/sglang/srt/utils/watchdog.py", "watchdog timeout \""),
      m="SGLang's watchdog saw no progress for watchdog_timeout seconds (a forward pass or collective hangs)",
      b="peer", r="consequence", s="warning", a="read the py-spy dumps printed before it to see where ranks are stuck"),
    S("frameworks.sglang.subprocess-crashed", "python",
      "Subprocess {} (pid={}) crashed with exit code {}. Triggering SIGQUIT for cleanup...",
      ("sglang", "python/sglang/srt/utils/watchdog.py", "crashed \""),
      m="the named subprocess died with that exit code; the server cleans up", b="peer", r="root", s="suspect",
      a="read that subprocess's output; -9 suggests the OOM killer"),
    S("frameworks.sglang.scheduler-exception", "python", "Scheduler hit an exception: {}",
      ("sglang", "python/sglang/srt/managers/scheduler.py", "Scheduler hit an exception: {traceback}"),
      m="the scheduler (one rank) raised; its traceback follows", b="self", r="root", s="warning",
      a="read the traceback"),
    S("frameworks.sglang.dp-controller-exception", "python", "DataParallelController hit an exception: {}",
      ("sglang", "python/sglang/srt/managers/data_parallel_controller.py", "DataParallelController hit an exception"),
      m="the data-parallel controller raised; its traceback follows", b="self", r="root", s="warning",
      a="read the traceback"),
    S("frameworks.sglang.tokenizer-manager-exception", "python", "TokenizerManager hit an exception: {}",
      ("sglang", "python/sglang/srt/managers/tokenizer_manager.py", "TokenizerManager hit an exception"),
      m="the tokenizer manager raised; its traceback follows", b="self", r="root", s="warning", a="read the traceback"),
    S("frameworks.sglang.detokenizer-exception", "python", "DetokenizerManager hit an exception: {}",
      ("sglang", "python/sglang/srt/managers/detokenizer_manager.py", "DetokenizerManager hit an exception"),
      m="the detokenizer raised; its traceback follows", b="self", r="root", s="warning", a="read the traceback"),
    S("frameworks.sglang.port-not-available", "python", "{} at {} is not available in {} seconds. {}",
      ("sglang", "python/sglang/srt/utils/network.py", "is not available in {timeout_s} seconds"),
      m="a port SGLang needs stayed busy (another server or a leftover process holds it)", b="launch", r="root",
      s="suspect", a="choose another port or stop the process holding it"),
    S("frameworks.sglang.sigterm-draining", "python",
      "SIGTERM received. {signum=} {frame=}. Draining requests and shutting down...",
      ("sglang", "python/sglang/srt/managers/tokenizer_manager.py", "Draining requests and shutting down"),
      m="the server got SIGTERM and shuts down", b="peer", r="consequence", s="warning", a="find who stopped the server"),
]

# ---------------------------------------------------------------------------------------------
# Resolution, checks, output

_SRC_PH = re.compile(r"%\"PRI\w+\"|%[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfgGcspmrS%]"
                     r"|\{[^{}]*\}")
_PRINTF = re.compile(r"%[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcspn%]")
_PYF = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
ID_RE = re.compile(r"^[a-z0-9]+(\.[a-z0-9-]+)+$")
REQUIRED = ("id", "syntax", "format", "source", "meaning", "blame", "role", "severity", "action")
VOCAB = {"syntax": {"printf", "python", "literal", "regex"},
         "blame": {"self", "peer", "launch", "environment", "hardware", "none"},
         "role": {"root", "consequence", "context"}, "severity": {"suspect", "warning", "info"}}


def literal_chars(fmt: str, syntax: str) -> int:
    if syntax == "printf":
        fmt = _PRINTF.sub("", fmt)
    elif syntax == "python":
        fmt = _PYF.sub("", fmt)
    elif syntax == "regex":
        fmt = re.sub(r"\\.|[\[\](){}?*+|^$.]", "", fmt)
    return len(re.sub(r"\s+", "", fmt))


def _unquote(s: str) -> str:
    return s.replace('\\"', '"').replace("\\n", "")


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s)


def needle_in_format(needle: str, e: E) -> bool:
    """The longest literal piece of the searched text (source placeholders and quotes removed) is part of the
    entry's format (or of its example, for a regex)."""
    quoted = re.findall(r'"((?:[^"\\\\]|\\\\.)*)"', needle)
    text = " ".join(quoted) if quoted else needle
    pieces = [p.strip(" '(),;") for q in _unquote(text).split('"') for p in _SRC_PH.split(q)]
    pieces = [p for p in pieces if len(p) >= 6]
    if not pieces:
        return True
    target = e.example if e.syntax == "regex" else e.format
    return any(_norm(p) in _norm(target) for p in pieces)


def resolve(entries: list[E], mirrors: Path, wheels: Path) -> list[str]:
    problems = []
    for e in entries:
        if e.at is None:
            if not e.url.startswith("https://"):
                problems.append(f"{e.id}: neither a citation nor an https URL")
            e.source = e.url
            continue
        key, path, needle = e.at
        src = SOURCES[key]
        base = mirrors if isinstance(src, Git) else wheels
        hit = src.find(base, path, needle)
        if hit is None:
            problems.append(f"{e.id}: {needle!r} not found in {src.repo} {path}")
            continue
        tag, p, lineno, _ = hit
        if needle not in src.line(base, tag, p, lineno):
            problems.append(f"{e.id}: {src.repo} {tag} {p}:{lineno} does not hold {needle!r}")
        if not needle_in_format(needle, e):
            problems.append(f"{e.id}: cited text {needle!r} is not part of the format")
        e.source = f"{src.repo} {tag} {p}:{lineno}"
    return problems


def check_form(entries: list[E], prefix: str) -> list[str]:
    problems, seen = [], set()
    for e in entries:
        d = to_dict(e)
        for k in REQUIRED:
            if k not in d or (k != "action" and not str(d[k])):
                problems.append(f"{e.id}: missing {k}")
        for k, allowed in VOCAB.items():
            if d.get(k) not in allowed:
                problems.append(f"{e.id}: {k}={d.get(k)!r}")
        if not ID_RE.match(e.id) or not e.id.startswith(prefix):
            problems.append(f"{e.id}: bad id")
        if e.id in seen:
            problems.append(f"{e.id}: duplicate id")
        seen.add(e.id)
        if literal_chars(e.format, e.syntax) < 12:
            problems.append(f"{e.id}: fewer than 12 literal characters")
        if (e.action == "") != (e.severity == "info"):
            problems.append(f"{e.id}: action must be empty exactly for info entries")
        if e.syntax == "regex":
            if not e.example or re.match(e.format, e.example) is None:
                problems.append(f"{e.id}: regex without an example it matches")
        elif e.syntax == "printf" and "%" in _PRINTF.sub("", e.format):
            problems.append(f"{e.id}: stray % in printf format")
        elif e.syntax == "python" and re.search(r"[{}]", _PYF.sub("", e.format)):
            problems.append(f"{e.id}: unbalanced brace in python format")
        if e.format != e.format.strip() or e.format.endswith("\\n"):
            problems.append(f"{e.id}: format has surrounding blanks or a trailing newline")
    return problems


def to_dict(e: E) -> dict[str, str]:
    d = {"id": e.id, "syntax": e.syntax, "format": e.format, "source": e.source, "meaning": e.meaning,
         "blame": e.blame, "role": e.role, "severity": e.severity, "action": e.action}
    if e.example:
        d["example"] = e.example
    return d


def toml_file(domain: str, entries: list[E], header: str) -> str:
    out = [f"# {line}".rstrip() for line in header.strip().splitlines()]
    out += ["", f'domain = "{domain}"', ""]
    for e in entries:
        out.append("[[entry]]")
        for k, v in to_dict(e).items():
            out.append(f"{k} = {json.dumps(v, ensure_ascii=False)}")
        out.append("")
    return "\n".join(out)


def header(domain: str, entries: list[E]) -> str:
    cited = sorted({e.source.rsplit(" ", 1)[0] for e in entries if not e.source.startswith("https://")})
    urls = sorted({e.source.split("#")[0] for e in entries if e.source.startswith("https://")})
    lines = [f"hangdbg error catalog: {domain} messages ({len(entries)} entries).",
             "Written by scripts/catalog/mine_frameworks.py: entries chosen and classified by hand in that script,",
             "each citation resolved there to the line that holds the message at the tag (git grep in fetched",
             "git directories; the .py files of released wheels for repositories too large to fetch).",
             "Upstream repositories and tags read:"]
    lines += [f"  {c}" for c in cited]
    if urls:
        lines.append("Documentation cited by URL (no stored copy at a tag, or C++ sources not in a wheel):")
        lines += [f"  {u}" for u in urls]
    lines.append("Formats: Slurm's %ps, %\"PRIu64\" and %m, pdsh's %p/%S and the kernel's %pGg/%*pbl are written as")
    lines.append("%s / %lu; C++ stream and Python concatenations as {}; multi-line messages keep their first line;")
    lines.append("a leading or trailing backquote, which the line reader peels, is left out.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="fetched git directories")
    ap.add_argument("--wheels", type=Path, default=Path("/tmp/sysfw/whl"),
                    help="released wheels of ray 2.60.0, vllm 0.11.2, sglang 0.5.10.post1 (pip download --no-deps)")
    ap.add_argument("--out", type=Path, default=ROOT / "hangdbg/catalog/data")
    ap.add_argument("--check", action="store_true", help="resolve and verify only; write nothing")
    args = ap.parse_args(argv)
    problems = []
    for entries, prefix in ((SYSTEM, "system."), (FRAMEWORKS, "frameworks.")):
        problems += resolve(entries, args.mirrors, args.wheels)
        problems += check_form(entries, prefix)
    for p in problems:
        print("PROBLEM", p, file=sys.stderr)
    if problems:
        return 1
    if not args.check:
        for domain, entries in (("system", SYSTEM), ("frameworks", FRAMEWORKS)):
            (args.out / f"{domain}.toml").write_text(toml_file(domain, entries, header(domain, entries)),
                                                      encoding="utf-8")
    print(f"system: {len(SYSTEM)} entries, frameworks: {len(FRAMEWORKS)} entries"
          + (" (checked)" if args.check else f" written to {args.out}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
