"""When no rank is at a root of the wait-for graph, every waiting rank is in a cycle: find the
rank whose op nothing matches.

The semantics the rules rest on (``torch.distributed.send``/``recv``/``isend``/``irecv``; gloo's
``UnboundBuffer::send``/``recv`` rendezvous of one send with one posted receive): a receive from X
(``src=X``) matches only a send to it from X, and a send to Y (``dst=Y``) only a receive from it
posted by Y. Two blocked ops that would match each other are a slow exchange, not a hang; a blocked
op whose peer is blocked in a *different* op is unmatched. The rules, in this order:

1. **wrong peer**: rank Y receives from X while another rank W is blocked sending to Y (and X does
   not send to Y). One of two ops is aimed wrong: Y's receive, or W's send. W's send is the wrong one
   when X waits to receive from W (W's send should have gone to X, and X would then send to Y): W
   *sends to the wrong peer*. Otherwise Y *receives from the wrong peer* (re-aiming Y's receive at W
   matches W's pending send; re-aiming W's send matches nothing that waits).
   The ranks that wait in a pairing consistent with the ring around them are waiters: the rank
   Y's wrong receive leaves waiting for Y, and X, which may be blocked receiving from Y in turn
   (``2 recv←3`` and ``3 recv←2`` in a token ring whose rank 2 took the wrong neighbour).
2. **never sent**: rank Y receives from X (or sends to X) while X is in no point-to-point op at
   all (a collective, a store wait): X went on without the send (receive) Y waits for: the stage
   that never sent;
3. **point-to-point deadlock**: two ranks that send to (or receive from) each other, neither named
   by rule 1 (a cycle that a wrong peer made is that peer's, not a deadlock of both);
4. **key never set**: a store wait whose missing keys name ranks (:func:`~hangdbg.stacks.waitfor.key_owners`)
   that went on without setting them.

Collective mismatches (a rank in another collective or at another call site than the majority)
are the caller's last rule (:func:`hangdbg.stacks.suspects.collective_splits`).
"""

from __future__ import annotations

from typing import Callable, Mapping

from ..model import Kind
from ..rankset import ranks_text
from ..waits import RankWait, WaitKind
from .waitfor import WaitGraph, key_owners

__all__ = ["resolve_cycles"]

Namer = Callable[[list[int], str, Kind], None]


def resolve_cycles(graph: WaitGraph, name: Namer) -> None:
    """Name, through ``name(ranks, reason, kind)``, the ranks whose point-to-point op or store key
    nothing matches (see the module docstring)."""
    waits = graph.waits
    p2p = {r: w for r, w in waits.items() if w.kind is WaitKind.P2P and w.peer is not None}
    culprits = _wrong_peers(p2p, waits, name)
    for y, w in sorted(p2p.items()):
        x = w.peer
        assert x is not None
        peer = waits.get(x)
        if y in culprits or (w.direction == "recv" and _matches(peer, "send", y)) or (
                w.direction == "send" and _matches(peer, "recv", y)):
            continue
        if peer is not None and peer.kind not in (WaitKind.P2P,) and peer.waiting:
            verb = "sent to" if w.direction == "recv" else "received from" if w.direction == "send" else "matched"
            name([x], f"never {verb} rank {y}, which waits {w.describe()}: rank {x} went on and is {peer.describe()}",
                 Kind.P2P_MISMATCH)
    for a, w in sorted(p2p.items()):
        b = w.peer
        other = p2p.get(b)  # type: ignore[arg-type]
        if (other is not None and b is not None and a < b and other.peer == a and w.direction == other.direction is not None
                and not culprits & {a, b}):
            verb = "sends to" if w.direction == "send" else "receives from"
            name([a, b], f"point-to-point deadlock: rank {a} {verb} rank {b} {w.describe()} while rank "
                 f"{b} {verb} rank {a} {other.describe()}", Kind.WAIT_CYCLE)
    for r, w in sorted(waits.items()):
        if w.kind is not WaitKind.STORE or not w.missing_keys:
            continue
        for key, owner in key_owners(w).items():
            if owner == r:
                continue
            other = waits.get(owner)
            where = f": it is {other.describe()}" if other is not None else ""
            name([owner], f"never set store key {key!r} that rank {r} waits for {w.describe()}{where}",
                 Kind.STORE_KEY_MISSING)


def _wrong_peers(p2p: Mapping[int, RankWait], waits: Mapping[int, RankWait], name: Namer) -> set[int]:
    """Rule 1 (module docstring): name the ranks whose receive or send is aimed at the wrong peer;
    return them."""
    senders_to: dict[int, list[int]] = {}  # Y -> the ranks blocked sending to Y
    receivers_from: dict[int, set[int]] = {}  # W -> the ranks blocked receiving from W
    for r, w in p2p.items():
        if w.direction == "send":
            senders_to.setdefault(w.peer, []).append(r)  # type: ignore[arg-type]
        elif w.direction == "recv":
            receivers_from.setdefault(w.peer, set()).add(r)  # type: ignore[arg-type]
    culprits: set[int] = set()
    for y, w in sorted(p2p.items()):
        x = w.peer
        assert x is not None
        peer = waits.get(x)
        if w.direction != "recv" or _matches(peer, "send", y):
            continue
        wrong = [s for s in senders_to.get(y, []) if s != x]
        if not wrong:
            continue
        misdirected = [s for s in wrong if x in receivers_from.get(s, ())]
        for s in misdirected:
            ws = p2p[s]
            name([s], f"sends to the wrong peer: waits {ws.describe()} while rank {x} waits to receive from it "
                 f"({peer.describe() if peer is not None else '?'}) and rank {y} receives from rank {x} "
                 f"({w.describe()})", Kind.P2P_MISMATCH)
            culprits.add(s)
        if not misdirected:
            name([y], f"receives from the wrong peer: waits {w.describe()} while {ranks_text(wrong)} "
                 f"{'sends' if len(wrong) == 1 else 'send'} to it and rank {x} {_doing(peer)}", Kind.P2P_MISMATCH)
            culprits.add(y)
    return culprits


def _matches(peer: RankWait | None, direction: str, rank: int) -> bool:
    return (peer is not None and peer.kind is WaitKind.P2P and peer.peer == rank
            and peer.direction in (direction, None))


def _doing(w: RankWait | None) -> str:
    return f"is {w.describe()}" if w is not None else "could not be read"
