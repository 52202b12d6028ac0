"""Cross-rank comparison of NCCL collectives at the same opCount (``nccl-op-mismatch``), on logs
written from NCCL's documented line formats: ``src/debug.cc`` headers, ``init.cc`` init lines
(``comm 0x.. rank R nranks N cudaDev D busId B [commId 0x..] - Init COMPLETE``) and the
``NCCL_DEBUG_SUBSYS=COLL`` lines of ``enqueue.cc`` ``ncclEnqueueCheck`` (``Name: opCount %lx
sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p``;
RCCL appends ``task %d globalrank %d``)."""

from __future__ import annotations

import pytest

from hangdbg.evidence.registry import headline_of
from hangdbg.evidence.nccl import scan as nccl_scan
from hangdbg.evidence.nccl.reader import NcclReader

KIND = "nccl-op-mismatch"


def init(r: int, n: int = 4, ptr: str | None = None, cid: str = "", host: str = "node") -> str:
    ptr = ptr or f"0x55{r}0"
    return (f"{host}:10{r}:10{r} [{r}] NCCL INFO comm {ptr} rank {r} nranks {n} cudaDev {r} busId {r}000"
            + (f" commId {cid}" if cid else "") + " - Init COMPLETE\n")


def coll(r: int, op: int, name: str = "AllReduce", count: int = 1024, dt: int = 7, redop: int = 0, root: int = 0,
         n: int = 4, ptr: str | None = None, host: str = "node", tail: str = "") -> str:
    ptr = ptr or f"0x55{r}0"
    return (f"{host}:10{r}:10{r} [{r}] NCCL INFO {name}: opCount {op:x} sendbuff 0x7f{r}000 recvbuff 0x7f{r}800 "
            f"count {count} datatype {dt} op {redop} root {root} comm {ptr} [nranks={n}] stream 0x56{r}0{tail}\n")


def read(tmp_path, text: str, name: str = "nccl.log"):
    path = tmp_path / name
    path.write_text(text)
    return NcclReader().read_split([str(path)])


def found(rep, severity=None):
    return [f for f in rep.findings if f.kind == KIND and (severity is None or f.severity == severity)]


def suspects(rep):
    return [f for f in rep.findings if f.severity == "suspect"]


def run(n: int, upto: int, odd: dict[int, dict]) -> str:
    """``n`` ranks, opCounts 0..upto of AllReduce; ``odd``: rank -> fields it passes instead at ``upto``."""
    text = "".join(init(r, n) for r in range(n))
    for op in range(upto + 1):
        for r in range(n):
            text += coll(r, op, n=n, **(odd.get(r, {}) if op == upto else {}))
    return text


@pytest.mark.parametrize("fields, words", [
    ({"name": "Broadcast"}, "Broadcast"),
    ({"name": "AllGather"}, "AllGather"),
    ({"count": 512}, "count 512"),
    ({"dt": 9}, "datatype 9"),
    ({"redop": 2}, "op 2"),
])
def test_a_rank_issuing_another_collective_at_the_same_opcount_is_the_suspect(tmp_path, fields, words):
    rep = read(tmp_path, run(4, 5, {3: fields}))
    [f] = found(rep)
    assert f.severity == "suspect" and f.ranks == (3,)
    assert "opCount 0x5" in f.summary and words in f.summary and "3 of 4 ranks" in f.summary
    assert f.action
    assert any("rank 3" in s.summary or 3 in s.ranks for s in suspects(rep))
    assert {e.line for e in f.evidence} >= {4 + 5 * 4 + 4}  # rank 3's line at opCount 5 is quoted
    assert "3" in headline_of(rep)


def test_only_the_first_differing_opcount_is_reported(tmp_path):
    text = run(4, 3, {2: {"name": "AllGather"}})
    text += "".join(coll(r, 4, name="AllGather" if r == 2 else "AllReduce") for r in range(4))
    [f] = found(rep := read(tmp_path, text))
    assert "opCount 0x3" in f.summary and f.ranks == (2,)
    assert rep


def test_broadcast_root_must_agree_but_allreduce_root_is_ignored(tmp_path):
    text = "".join(init(r) for r in range(4))
    text += "".join(coll(r, 0, name="Broadcast", root=2 if r == 0 else 3) for r in range(4))
    text += "".join(coll(r, 1, root=r) for r in range(4))  # AllReduce: NCCL ignores root
    [f] = found(read(tmp_path, text))
    assert f.ranks == (0,) and "root 2" in f.summary and "root 3" in f.summary and "opCount 0x0" in f.summary


@pytest.mark.parametrize("n, odd", [(2, {1: {"count": 8}}), (4, {2: {"count": 8}, 3: {"count": 8}})])
def test_two_ranks_or_a_tie_is_undecided_naming_both_sides(tmp_path, n, odd):
    rep = read(tmp_path, run(n, 2, odd))
    [f] = found(rep)
    assert f.severity == "warning" and "undecided" in f.summary
    assert f.ranks == tuple(range(n))
    assert "count 8" in f.summary and "count 1024" in f.summary
    assert not suspects(rep)


def test_ranks_ahead_are_compared_only_at_the_opcounts_everyone_reached(tmp_path):
    text = run(4, 3, {})
    text += coll(3, 4, name="Broadcast") + coll(3, 5, name="AllGather")  # rank 3 went on alone
    rep = read(tmp_path, text)
    assert not found(rep)
    assert all(3 not in f.ranks for f in suspects(rep))


def test_send_recv_with_different_peers_and_counts_are_not_a_mismatch(tmp_path):
    text = init(0, 2) + init(1, 2)
    for op in range(0x10, 0x14):
        text += coll(0, op, name="Send", count=100 + op, root=1, n=2) + coll(1, op, name="Recv", count=200, root=0, n=2)
    assert not found(read(tmp_path, text))


def test_send_recv_against_a_collective_on_two_ranks_is_a_mismatch(tmp_path):
    text = init(0, 2) + init(1, 2) + coll(0, 7, name="Send", root=1, n=2) + coll(1, 7, n=2)
    [f] = found(read(tmp_path, text))
    assert f.severity == "warning" and "Send/Recv" in f.summary and "AllReduce" in f.summary


def test_a_group_of_operations_cut_by_the_log_end_is_not_a_mismatch(tmp_path):
    text = "".join(init(r) for r in range(4))
    for r in range(4):  # NCCL >= 2.12: one opCount for the whole group
        text += coll(r, 9, count=10) + coll(r, 9, count=20) + (coll(r, 9, count=30) if r != 1 else "")
    assert not found(read(tmp_path, text))


def test_the_order_inside_a_group_does_not_matter_but_its_content_does(tmp_path):
    text = "".join(init(r) for r in range(4))
    for r in range(4):
        a, b = (coll(r, 2, count=10), coll(r, 2, count=20))
        text += (b + a) if r == 1 else (a + b)
    text += "".join(coll(r, 3, count=20 if r == 0 else 10) + coll(r, 3, count=40) for r in range(4))
    [f] = found(read(tmp_path, text))
    assert "opCount 0x3" in f.summary and f.ranks == (0,)


def test_communicators_are_compared_by_identity_not_by_pointer(tmp_path):
    # two communicators per process (commId); the pointers cross over between processes
    text = ""
    ptrs = {0: ("0xaa0", "0xbb0"), 1: ("0xbb0", "0xaa0"), 2: ("0xaa0", "0xcc0")}
    for r, (pa, pb) in ptrs.items():
        text += init(r, 3, pa, "0x1111") + init(r, 3, pb, "0x2222")
    for op in range(3):
        for r, (pa, pb) in ptrs.items():
            text += coll(r, op, n=3, ptr=pa, count=64) + coll(r, op, name="AllGather", n=3, ptr=pb, count=8)
    assert not found(read(tmp_path, text))
    text += coll(0, 3, n=3, ptr="0xaa0") + coll(1, 3, n=3, ptr="0xbb0") + coll(2, 3, n=3, ptr="0xaa0", count=99)
    [f] = found(read(tmp_path, text, "b.log"))
    assert f.ranks == (2,) and "0x1111" in f.summary


def test_non_standard_lines_rccl_suffix_and_hard_wrap_are_compared(tmp_path):
    text = "".join(init(r) for r in range(4))
    text += "".join(coll(r, 0, tail=f" task 0 globalrank {r}", count=5 if r == 1 else 6) for r in range(4))
    [f] = found(read(tmp_path, text))
    assert f.ranks == (1,)
    wrapped = "".join(init(r) for r in range(4))
    for r in range(4):
        line = coll(r, 0, name="Broadcast", root=1 if r == 2 else 0)
        head, _, stream = line.rpartition(" stream ")
        wrapped += head + " stream\n " + stream
    [f] = found(read(tmp_path, wrapped, "w.log"))
    assert f.ranks == (2,) and "root 1" in f.summary


def test_per_rank_files_without_init_lines_are_compared(tmp_path):
    for r in range(3):
        (tmp_path / f"nccl.node.10{r}").write_text(
            "".join(coll(r, op, n=3, ptr="0x7f0", count=77 if (r == 1 and op == 1) else 70) for op in range(3)))
    rep = NcclReader().read_split(sorted(str(p) for p in tmp_path.iterdir()))
    [f] = found(rep)
    assert f.severity == "suspect" and "pid 101" in f.summary and f.hosts == ("node",)


def test_the_lag_after_a_mismatch_is_only_a_warning(tmp_path):
    text = run(4, 5, {3: {"name": "Broadcast"}})
    text += "".join(coll(r, 6) for r in range(3))  # the others went on; rank 3 hangs in its Broadcast
    rep = read(tmp_path, text)
    [f] = found(rep, "suspect")
    assert f.ranks == (3,)
    lag = [g for g in rep.findings if g.kind == "nccl-lagging"]
    assert lag and all(g.severity == "warning" and "nccl-op-mismatch" in g.summary for g in lag)


def test_a_big_log_is_compared_on_its_end_with_the_right_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(nccl_scan, "OPS_TAIL", 2048)
    monkeypatch.setattr(nccl_scan, "OPS_TAIL_TOTAL", 2048)
    text = run(4, 60, {0: {"count": 3}})
    path = tmp_path / "big.log"
    path.write_text(text)
    rep = NcclReader().read_split([str(path)])
    [f] = found(rep)
    lines = text.splitlines()
    assert f.ranks == (0,) and "opCount 0x3c" in f.summary
    for e in f.evidence:
        assert lines[e.line - 1] == e.text


def test_garbage_numbers_are_skipped_not_raised(tmp_path):
    text = "".join(init(r, 3) for r in range(3))
    text += "".join(coll(r, 0, n=3) for r in range(3))
    text += coll(1, 1, n=3, count=10 ** 30) + coll(0, 1, n=3) + coll(2, 1, n=3)
    rep = read(tmp_path, text)
    assert not found(rep)


def test_an_index_key_that_merges_two_communicators_is_not_compared(tmp_path):
    # no commId: two 2-rank groups (0,1) and (2,3) are both "the first 2-rank communicator" of their
    # processes; the groups legitimately reduce different sizes
    text = "".join(init(r, 4, ptr=f"0x9{r}0") for r in range(4))
    text += "".join(f"node:10{r}:10{r} [{r}] NCCL INFO comm 0x8{r}0 rank {r % 2} nranks 2 cudaDev {r} busId {r}000 "
                    "- Init COMPLETE\n" for r in range(4))
    text += "".join(coll(r, op, n=2, ptr=f"0x8{r}0", count=100 if r < 2 else 200) for op in range(3) for r in range(4))
    assert not found(read(tmp_path, text))
    # without init lines: more members than the communicator has ranks
    text = "".join(coll(r, op, n=2, ptr="0x800", count=100 if r < 3 else 200) for op in range(3) for r in range(4))
    assert not found(read(tmp_path, text, "b.log"))
