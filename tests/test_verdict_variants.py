"""Generalization of the post-mortem verdicts (issue 13): each fixture under ``fixtures/variants/`` is
a log of the kind a real-world case showed, written as if from *another* job - other ranks, world
sizes, hosts and pids, the wording of other PyTorch / NCCL / driver versions (looked up in their
sources: ``ProcessGroupNCCL.cpp``, ``ProcessGroupWrapper.cpp``, ``reducer.cpp``, ``tools/flight_recorder``,
NCCL ``ras/client_support.cc``, ``init.cc``, ``graph/connect.cc``, the driver's ``nv.c`` / Xid lines), other
line prefixes (``[rankN]:``, ``[defaultN]:``, mpirun ``[1,N]<stdout>:``, srun ``N: ``, journalctl,
``dmesg -T``) and a cut last line. The command a user would run (``--json``) must still name the
cause as a suspect and never blame a rank that only waits or is ahead."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, main_json

V = FIXTURES / "variants"


def _items(doc) -> list[dict]:
    """Every finding/suspect item anywhere in a document."""
    out: list[dict] = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("findings", "suspects") and isinstance(v, list):
                    out.extend(i for i in v if isinstance(i, dict) and "severity" in i)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return out


def _text(i: dict) -> str:
    return " ".join(str(i.get(k) or "") for k in ("kind", "summary", "action"))


def _where(i: dict) -> str:
    return " ".join([*map(str, i.get("hosts") or ()), *map(str, i.get("gpus") or ()), _text(i)])


def _suspects(doc) -> list[dict]:
    return [i for i in _items(doc) if i["severity"] == "suspect"]


def _blamed(doc) -> set[int]:
    return {int(r) for i in _suspects(doc) for r in i.get("ranks") or ()}


def run(tmp_path: Path, name: str, *cmd: str) -> dict:
    """Copy the fixture (a file or a folder of files) into a fresh folder and run ``hangdbg CMD`` on it."""
    src = V / name
    files = [src] if src.is_file() else sorted(src.iterdir())
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    args = [str(tmp_path)] if cmd[0] == "report" else [str(tmp_path / f.name) for f in files]
    rc, doc = main_json(*cmd, *args)
    assert rc in (0, 1, 3), rc
    return doc


def assert_cause(doc, pattern: str, where: str | None = None, innocent=()) -> None:
    """A suspect names the cause (``pattern``; ``where``: its host/GPU) and blames no innocent rank."""
    hit = [i for i in _suspects(doc) if re.search(pattern, _text(i), re.IGNORECASE)
           and (where is None or re.search(where, _where(i), re.IGNORECASE))]
    assert hit, [(i["severity"], i["kind"], i["summary"][:160]) for i in _items(doc)]
    assert not _blamed(doc) & set(innocent), _blamed(doc)


def assert_culprits(doc, culprits: set[int], pattern: str, need_all: bool = False) -> None:
    """The suspects name (all of, with need_all) ``culprits`` with the cause, and no other rank."""
    blamed = _blamed(doc)
    assert blamed and blamed <= culprits, (blamed, [(i["kind"], i["summary"][:160]) for i in _suspects(doc)])
    named = {int(r) for i in _suspects(doc) if re.search(pattern, _text(i), re.IGNORECASE) for r in i.get("ranks") or ()}
    assert named == culprits if need_all else named & culprits, named


def assert_waiters(doc, where: str) -> None:
    """The dumped process only waits in a collective: reported, and no rank blamed."""
    assert not _blamed(doc)
    assert any(re.search(where, _text(i), re.IGNORECASE) for i in _items(doc)), [i["summary"][:120] for i in _items(doc)]


# ---- nccl summary: the net plugin differs between hosts (case nccl-1634) ----------------------------
PLUGIN = r"plugin|libnccl-net"


@pytest.mark.parametrize("name, hosts", [
    ("netplugin-mpirun.log", r"gpu-(a17|b03)"),      # NCCL 2.21 "Plugin load returned 2" vs RDMA plugin v8, mpirun prefix
    ("netplugin-srun.log", r"trn1-(3|9)"),           # "No plugin found" vs aws-ofi-nccl, srun "N: " prefix
    ("netplugin-torchrun.log", r"node-(07|12)"),     # torchrun [defaultN]: prefix, two ranks per host
])
def test_net_plugin_differs(tmp_path, name, hosts):
    doc = run(tmp_path, name, "nccl", "summary")
    assert_cause(doc, PLUGIN, hosts)
    assert not [i for i in _items(doc) if "same on every host" in i["summary"]]  # no false all-clear


# ---- nccl summary: single node stops in GPU set-up, P2P / IOMMU (case nccl-257) ---------------------
P2P = r"iommu|\bp2p\b|peer.to.peer|\bACS\b|pcie"


@pytest.mark.parametrize("name, n", [
    ("p2p-nccltests-8gpu.log", 8),      # nccl-tests -g 8: one process, init lines of 2 of its 8 ranks (failed before)
    ("p2p-torchrun-4proc.log", 4),      # 4 processes, every rank stuck after Init START (failed before)
    ("p2p-mpirun-2gpu-cut.log", 2),     # NCCL 2.7: no nranks before Init COMPLETE, only a ring line (failed before)
])
def test_single_node_p2p_blocked(tmp_path, name, n):
    doc = run(tmp_path, name, "nccl", "summary")
    assert_cause(doc, P2P, innocent=range(n))


# ---- analyze py-spy dumps: a rank in the data loader (case fairseq-4816) ----------------------------
DATA = r"data ?loader|queue|iterator|not in (any|a) collective|outside"


@pytest.mark.parametrize("name, rank", [
    ("pyspy-dl-single", 5),   # torch DataLoader _get_data, py-spy header, pin-memory thread, rank_5 file name
    ("pyspy-dl-four", 2),     # rank-2 in the DataLoader, ranks 0,1,3 in all_reduce
    ("pyspy-dl-custom", 7),   # a prefetch iterator (Megatron-style), thread ids in hex
])
def test_rank_in_data_loader(tmp_path, name, rank):
    assert_culprits(run(tmp_path, name, "analyze"), {rank}, DATA)


# ---- analyze py-spy dumps: one process that only waits (cases accelerate-3104) ---------------------
@pytest.mark.parametrize("name, where", [
    ("pyspy-wait-barrier", r"barrier"),          # accelerate wait_for_everyone; no rank in the file name
    ("pyspy-wait-fsdp", r"all_gather"),          # FSDP unshard; file name with h100 / pp32 (not ranks)
    ("pyspy-wait-rs", r"reduce_scatter"),        # DeepSpeed ZeRO-2 average_tensor
])
def test_lone_waiting_dump(tmp_path, name, where):
    assert_waiters(run(tmp_path, name, "analyze"), where)


# ---- report: native stacks of an abort/destroy hang (cases nccl-1777, pytorch-149153) -------------
@pytest.mark.parametrize("name, pattern", [
    ("gdb-abort-join", r"ncclCommAbort|commFree|pthread_join|\babort"),            # glibc 2.34 __pthread_clockjoin_ex
    ("gdb-abort-destroy", r"ncclCommDestroy|commFree|ncclProxyDestroy|pthread_join|destroy"),
    ("gdb-abort-lldb", r"ncclCommAbort|commFree|pthread_join|\babort"),            # lldb bt all
    ("gdb-pgabort-gdb", r"ncclCommAbort|ProcessGroupNCCL::abort|\babort|waitForFutureOrTimeout"),  # shutdown()
])
def test_abort_hang(tmp_path, name, pattern):
    doc = run(tmp_path, name, "report")
    assert_cause(doc, pattern)


# ---- report: the watchdog's CUDA check failed (case pytorch-126544) --------------------------------
CUDA = r"cuda (error|context|check)|c10_cuda_check|finishedGPUExecution|corrupt"


@pytest.mark.parametrize("name", [
    "cuda-check-what",      # torch 2.4 [rankN]: prefix, "[PG ID 0 PG GUID 0(default_pg) Rank 3]"
    "cuda-check-ranked",    # "terminate called ... c10::DistBackendError", unspecified launch failure
    "cuda-check-cleanup",   # torch 2.0 workCleanupLoop, ISO time stamps on every line
])
def test_watchdog_cuda_check(tmp_path, name):
    doc = run(tmp_path, name, "report")
    assert_cause(doc, CUDA)
    assert not re.search(r"\bin wait\b", str([_text(i) for i in _suspects(doc)]))


# ---- logs: DDP model mismatch (case chatdoctor-49) --------------------------------------------------
@pytest.mark.parametrize("name, rank", [
    ("ddp-params-rankprefix.log", 2),   # the printer (rank 1) raised; it is not "silent" (failed before)
    ("ddp-params-plain.log", 5),        # 434 vs 435 params, the last line cut
])
def test_ddp_model_mismatch(tmp_path, name, rank):
    assert_culprits(run(tmp_path, name, "logs"), {rank}, r"param|model|DDP expects|inconsistent")


@pytest.mark.parametrize("name", [
    "ddp-params-both-zero.log",   # each rank sees 0 params for the other (failed before: both blamed)
    "ddp-params-own-slot.log",    # "Rank 1 has 174 params, while rank 1 has inconsistent 0" (failed before)
])
def test_ddp_counts_that_contradict_are_the_transport(tmp_path, name):
    doc = run(tmp_path, name, "logs")
    assert_cause(doc, r"all.?gather|collective|transport|p2p", innocent={0, 1})
    assert not [i for i in _suspects(doc) if i["kind"] == "model-mismatch"]


# ---- logs: collective fingerprint mismatch (case pytorch-78022) ------------------------------------
@pytest.mark.parametrize("name, rank", [
    ("desync-rankprefix.log", 2),     # [rank2]: prefix, SequenceNumber in the fingerprint
    ("desync-timestamped.log", 6),    # logging time stamps, ALLGATHER Half
    ("desync-four", 3),               # newer "but Rank 3 is running collective" from four ranks
])
def test_collective_fingerprint_mismatch(tmp_path, name, rank):
    assert_culprits(run(tmp_path, name, "logs"), {rank}, r"inconsistent|mismatch|desync|differ")


# ---- report: NCCL RAS operation-count mismatch (case nccl-1911) ------------------------------------
@pytest.mark.parametrize("name, culprits, ahead", [
    ("ras-behind", {9, 10}, set()),                          # the listed minority is *behind* (2209 < 2210)
    ("ras-ahead-one", {0, 1, 2, 4, 5, 6, 7}, {3}),           # one rank ahead, "Rank 3 has launched up to ..."
    ("ras-allreduce-64", {41}, set()),                       # 64 ranks, one behind
])
def test_ras_mismatch(tmp_path, name, culprits, ahead):
    doc = run(tmp_path, name, "report")
    blamed = _blamed(doc)
    assert blamed and blamed <= culprits and not blamed & ahead, blamed


# ---- report: flight recorder trace, ranks missing from a collective (case pytorch-pr140969) -------
@pytest.mark.parametrize("name, missing", [
    ("fr-missing-one", {13}),        # 16 ranks, FSDP all_gather_into_tensor
    ("fr-missing-tp", {9, 11}),      # a tensor-parallel group of global ranks 8-11
    ("fr-entry-format", {6}),        # torchfrtrace "Not all ranks joining collective 212 at entry 211"
    ("fr-old-print", {1, 3}),        # the first fr_trace: "... Missing ranks are {1, 3}" on one line
])
def test_fr_trace_missing_ranks(tmp_path, name, missing):
    assert_culprits(run(tmp_path, name, "report"), missing, r"missing|not all ranks|never joined", need_all=True)


# ---- gpu: Xid / lost GPU (cases nvidia-docker-1553, nvsentinel-155, ogkm-1150) -------------------
@pytest.mark.parametrize("name, pattern, gpu", [
    ("xid79-journal.log", r"\b79\b|fallen off|off the bus", r"0000:3b:00"),       # pid='<unknown>', journalctl
    ("xid79-dmesg-T.log", r"\b79\b|fallen off|off the bus", r"0000:af:00"),       # dmesg -T, Xid 154 after it
    ("offbus-journal-multiline.log", r"fallen off|off the bus|lost", r"41:00"),   # every line decorated (failed before)
    ("offbus-gpu-line-only.log", r"fallen off|off the bus|lost", r"c1:00"),       # only "GPU ...: GPU has fallen off"
    ("xid45-caused-by-94.log", r"\b94\b", r"4e:00"),                             # 45 is fallout of 94
    ("xid45-after-48.log", r"\b48\b|double bit|DBE", r"1b:00"),                   # 45s after a DBE, no "caused by"
])
def test_gpu_first_cause(tmp_path, name, pattern, gpu):
    doc = run(tmp_path, name, "gpu")
    assert_cause(doc, pattern, gpu)
    assert not re.search(r"no GPU error|no lost GPU", str(doc))
