"""The two structured rules on hand-built stacks: a store barrier whose store answer contradicts the
waiter's own key (never blame on it), and point-to-point rings where one op is aimed at the wrong
peer (blame only that rank), each with its controls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdbg.model import Kind, RankDump, Severity, Thread
from hangdbg.frames import Frame
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.saved import load_dumps
from hangdbg.tools.store import TORCH_PREFIXES, choose_answer
from hangdbg.waits import own_keys, rank_keys
from test_analyze import C10D, TRAIN, coll, rank

KEYS = tuple(f"step2/done/{r}" for r in range(4))


def store_wait(keys=KEYS) -> tuple[Frame, ...]:
    """Rank 0 in ``store.wait(keys)`` (native TCPStore frame, keys from --locals)."""
    return (Frame("c10d::TCPStore::wait", "libtorch_cpu.so", None, native=True),
            Frame("store_barrier", TRAIN, 50, locals=(("keys", repr(list(keys))),)),
            Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))


def p2p(op: str, peer: int, step: int | None = None) -> tuple[Frame, ...]:
    """A blocking ``send(dst=peer)`` or ``recv(src=peer)`` (torch's frame with its --locals), at loop
    counter ``step`` of the caller when given."""
    arg = "dst" if op == "send" else "src"
    counter = (("step", str(step)),) if step is not None else ()
    return (Frame(op, C10D, 2700, locals=((arg, str(peer)),)), Frame("ring_step", TRAIN, 30, locals=counter),
            Frame("main", TRAIN, 200), Frame("<module>", TRAIN, 210))


def barrier(answer=None, keys=KEYS):
    dumps = [rank(0, store_wait(keys))] + [rank(r, coll("all_reduce", 0, 120)) for r in (1, 2, 3)]
    return analyze(dumps, store_keys=answer)


def blamed(a) -> list[tuple[tuple[int, ...], str]]:
    return [(s.ranks, s.kind) for s in a.suspects]


def waits_for(a) -> dict[tuple[int, ...], tuple[int, ...]]:
    return {f.ranks: f.waits_for for f in a.findings if f.kind is Kind.WAITING}


# --- store barrier -------------------------------------------------------------------------------

def test_rank_keys_are_the_integer_the_keys_differ_in():
    assert rank_keys(KEYS) == {k: r for r, k in enumerate(KEYS)}
    assert rank_keys(["rank3/step2", "rank1/step2"]) == {"rank3/step2": 3, "rank1/step2": 1}  # not the last integer
    assert rank_keys(["a/1/2", "a/2/3"]) == {}  # two integers differ: no rank family
    assert rank_keys(["ready/3"]) == {} and rank_keys(["ready", "go"]) == {}  # a key alone, no integer
    assert own_keys(KEYS, 2) == ("step2/done/2",) and own_keys(KEYS, 7) == ()


def test_answer_that_lacks_the_waiters_own_key_blames_nobody():
    a = barrier({k: False for k in KEYS})  # the keys read at the store's root, the job writes them prefixed
    assert not a.suspects and not a.found
    [f] = [f for f in a.findings if f.severity is Severity.WARNING]
    assert f.kind is Kind.UNDECIDED and f.ranks == (0,)
    assert "not trusted" in f.summary and "'step2/done/0', rank 0's own key" in f.summary
    assert "default_pg/0//" in f.action


def test_trustworthy_answer_names_the_rank_whose_key_is_missing():
    a = barrier({k: r != 3 for r, k in enumerate(KEYS)})
    assert blamed(a) == [((3,), Kind.STORE_KEY_MISSING)]
    assert "'step2/done/3'" in a.suspects[0].summary
    assert waits_for(a) == {(0,): (3,), (1, 2): (0,)}


def test_key_family_names_the_rank_when_it_is_not_the_last_integer():
    keys = tuple(f"rank{r}/step2" for r in range(4))
    a = barrier({k: r != 1 for r, k in enumerate(keys)}, keys)
    assert blamed(a) == [((1,), Kind.STORE_KEY_MISSING)]  # the last integer (2) would blame rank 2


def test_no_answer_is_undecided_not_a_suspect():
    a = barrier()
    assert not a.suspects and [f.kind for f in a.findings if f.severity is Severity.WARNING] == [Kind.UNDECIDED]


def test_choose_answer_prefers_the_prefix_holding_the_own_key():
    root = ("", {k: False for k in KEYS})
    default = (TORCH_PREFIXES[0], {k: r != 3 for r, k in enumerate(KEYS)})
    other = ("0//", {k: False for k in KEYS})
    assert choose_answer([root, default, other], own=("step2/done/0",)) == default
    # a listed prefix with more keys is used only when no known one holds the own key
    stale = ("old/", {k: True for k in KEYS})
    assert choose_answer([root, default, stale], own=("step2/done/0",), known=2) == default
    assert choose_answer([root, other, stale], own=("step2/done/0",), known=2) == stale
    # nothing holds it: the keys as given (the analysis then refuses to blame)
    assert choose_answer([root, other], own=("step2/done/0",)) == root
    # no own key known: the answer holding most keys, else the keys as given
    assert choose_answer([root, default], own=()) == default
    assert choose_answer([root, other], own=()) == root


# --- point-to-point rings ------------------------------------------------------------------------

def test_token_ring_wrong_receive_blames_only_that_rank():
    """Rank 0 sends to 1 then receives from 3; the others receive from r-1 then send to r+1; rank 2
    receives from 3: 0 recv<-3, 1 send->2, 2 recv<-3, 3 recv<-2 (2 and 3 receive from each other)."""
    dumps = [rank(0, p2p("recv", 3)), rank(1, p2p("send", 2)), rank(2, p2p("recv", 3)), rank(3, p2p("recv", 2))]
    a = analyze(dumps)
    assert blamed(a) == [((2,), Kind.P2P_MISMATCH)]
    s = a.suspects[0].summary
    assert "receives from the wrong peer" in s and "recv from rank 3" in s and "rank 1 sends to it" in s
    assert waits_for(a) == {(0,): (3,), (1,): (2,), (3,): (2,)}


def test_alternating_ring_wrong_receive_blames_only_that_rank():
    """Even ranks send first; rank 1 receives from 2 instead of 0: 0 send->1, 1 recv<-2, 2 recv<-1, 3 send->0."""
    dumps = [rank(0, p2p("send", 1)), rank(1, p2p("recv", 2)), rank(2, p2p("recv", 1)), rank(3, p2p("send", 0))]
    a = analyze(dumps)
    assert blamed(a) == [((1,), Kind.P2P_MISMATCH)]
    assert "rank 0 sends to it" in a.suspects[0].summary


def test_ring_without_sync_blames_neither_the_cycle_nor_the_rank_behind():
    """isend/irecv ring, no collective between steps, rank 2 receives from 3 at step 2: rank 3 finished
    step 2 and receives from 2 at step 3; rank 0 sends to 1 at step 3 while rank 1, held up sending to
    2, is still at step 2. Once blamed: 2 (wrong peer), 3 ("deadlock" with 2) and 1 ("behind")."""
    dumps = [rank(0, p2p("send", 1, 3)), rank(1, p2p("send", 2, 2)), rank(2, p2p("recv", 3, 2)),
             rank(3, p2p("recv", 2, 3))]
    a = analyze(dumps)
    assert blamed(a) == [((2,), Kind.P2P_MISMATCH)], a.headline
    assert waits_for(a) == {(0,): (1,), (1,): (2,), (3,): (2,)}


def test_rank_behind_with_nobody_else_named_is_still_behind():
    """Control: every rank in the same all_reduce line, rank 2 at a lower step: rank 2 is named."""
    dumps = [rank(r, coll("all_reduce", 0, 120, locals_=(("step", "2" if r == 2 else "3"),))) for r in range(4)]
    assert blamed(analyze(dumps)) == [((2,), Kind.BEHIND)]


def test_wrong_destination_blames_the_sender():
    """Even ranks send first; rank 2 sends to 0 instead of 3: 0 recv<-3, 1 send->2, 2 send->0, 3 recv<-2.
    Rank 0's receive and rank 2's send disagree; rank 3 waits to receive from 2: the send is wrong."""
    dumps = [rank(0, p2p("recv", 3)), rank(1, p2p("send", 2)), rank(2, p2p("send", 0)), rank(3, p2p("recv", 2))]
    a = analyze(dumps)
    assert blamed(a) == [((2,), Kind.P2P_MISMATCH)]
    assert "sends to the wrong peer" in a.suspects[0].summary and "rank 3 waits to receive from it" in a.suspects[0].summary


def test_wrong_receive_while_the_others_went_on():
    """The isend/irecv ring: 0 and 3 finished and wait in the all_reduce; 1 send->2, 2 recv<-3."""
    dumps = [rank(0, coll("all_reduce", 0, 120)), rank(1, p2p("send", 2)), rank(2, p2p("recv", 3)),
             rank(3, coll("all_reduce", 0, 120))]
    a = analyze(dumps)
    assert blamed(a) == [((2,), Kind.P2P_MISMATCH)]


@pytest.mark.parametrize("slow", [1, 2, 3])
def test_correct_ring_with_a_slow_rank_blames_nobody(slow):
    """A correct token ring whose rank ``slow`` still computes before its receive: the others wait in
    consistent pairs (for it, directly or along the ring). One sample cannot tell: undecided, no suspect."""
    ops = {0: p2p("recv", 3), 1: p2p("recv", 0), 2: p2p("recv", 1), 3: p2p("recv", 2)}
    ops[(slow - 1) % 4] = p2p("send", slow)  # the rank before it sent and waits for it to receive
    dumps = [rank(r, ops[r]) for r in range(4) if r != slow]
    busy = Thread(1000 + slow, "MainThread", "active", (Frame("forward", TRAIN, 12), Frame("main", TRAIN, 200),
                                                        Frame("<module>", TRAIN, 210)))
    dumps.append(RankDump(rank=slow, pid=1000 + slow, host="n1", local_rank=slow, world_size=4, threads=(busy,),
                          samples=((busy,),)))
    a = analyze(dumps)
    assert not a.suspects, a.headline
    assert [f.kind for f in a.findings if f.severity is Severity.WARNING] == [Kind.UNDECIDED]
    assert not any(f.kind in (Kind.P2P_MISMATCH, Kind.WAIT_CYCLE) for f in a.findings)


def test_mutual_receive_with_nobody_else_is_still_a_deadlock():
    """Two ranks that receive from each other and no rank sends to either: a cycle of both (control
    of the rule that a cycle a wrong peer made is that peer's)."""
    a = analyze([rank(0, p2p("recv", 1), world=2), rank(1, p2p("recv", 0), world=2)])
    assert blamed(a) == [((0, 1), Kind.WAIT_CYCLE)]


# --- the same on recorded dumps of the real jobs (tests/fixtures/topology, py-spy of demo/topology.py) ------------

TOPO = Path(__file__).parent / "fixtures" / "topology"


def test_recorded_ring_without_sync_names_only_the_wrong_receiver():
    dumps, _ = load_dumps([TOPO / "p2p-ring-steps" / "native"])
    a = analyze(dumps)
    assert blamed(a) == [((2,), Kind.P2P_MISMATCH)], a.headline
    assert waits_for(a) == {(0,): (1,), (1,): (2,), (3,): (2,)}


def test_recorded_default_store_barrier():
    dumps, _ = load_dumps([TOPO / "store-barrier-default" / "locals"])
    store = json.loads((TOPO / "store-barrier-default" / "store.json").read_text())
    assert store["prefix"] == "default_pg/0//"
    a = analyze(dumps, store_keys=store["keys"])
    assert blamed(a) == [((3,), Kind.STORE_KEY_MISSING)]
    # the keys read at the TCPStore's root (the lookup before the prefixes): every key looks missing,
    # rank 0's own too; once ranks 1-3 were blamed, now nobody is
    root = analyze(dumps, store_keys={k: False for k in store["keys"]})
    assert not root.suspects and [f.kind for f in root.findings if f.severity is Severity.WARNING] == [Kind.UNDECIDED]
