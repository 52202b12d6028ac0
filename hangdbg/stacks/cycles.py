"""When no rank is at a root of the wait-for graph, every waiting rank is in a cycle: find the
rank whose op nothing matches (heuristics, ours, in this order):

1. **wrong peer**: rank Y receives from X while another rank W sends to Y (and X does not send to
   Y): Y posted the wrong receive;
2. **never sent**: rank Y receives from X (or sends to X) while X is in no point-to-point op at
   all (a collective, a store wait): X went on without the send (receive) Y waits for: the stage
   that never sent;
3. **point-to-point deadlock**: two ranks that send to (or receive from) each other: a cycle;
4. **key never set**: a store wait whose missing keys name ranks that went on without setting
   them.

Collective mismatches (a rank in another collective or at another call site than the majority)
are the caller's last rule (:func:`hangdbg.stacks.suspects.collective_splits`).
"""

from __future__ import annotations

from typing import Callable

from ..model import Kind
from ..rankset import ranks_text
from ..waits import RankWait, WaitKind
from .waitfor import WaitGraph, key_rank

__all__ = ["resolve_cycles"]

Namer = Callable[[list[int], str, Kind], None]


def resolve_cycles(graph: WaitGraph, name: Namer) -> None:
    """Name, through ``name(ranks, reason, kind)``, the ranks whose point-to-point op or store key
    nothing matches (see the module docstring)."""
    waits = graph.waits
    p2p = {r: w for r, w in waits.items() if w.kind is WaitKind.P2P and w.peer is not None}
    senders_to: dict[int, list[int]] = {}
    for r, w in p2p.items():
        if w.direction == "send":
            senders_to.setdefault(w.peer, []).append(r)  # type: ignore[arg-type]
    for y, w in sorted(p2p.items()):
        x = w.peer
        assert x is not None
        peer = waits.get(x)
        if w.direction == "recv":
            if _matches(peer, "send", y):
                continue
            wrong = [s for s in senders_to.get(y, []) if s != x]
            if wrong:
                name([y], f"receives from the wrong peer: waits {w.describe()} while {ranks_text(wrong)} "
                     f"{'sends' if len(wrong) == 1 else 'send'} to it and rank {x} {_doing(peer)}", Kind.P2P_MISMATCH)
                continue
        elif w.direction == "send" and _matches(peer, "recv", y):
            continue
        if peer is not None and peer.kind not in (WaitKind.P2P,) and peer.waiting:
            verb = "sent to" if w.direction == "recv" else "received from" if w.direction == "send" else "matched"
            name([x], f"never {verb} rank {y}, which waits {w.describe()}: rank {x} went on and is {peer.describe()}",
                 Kind.P2P_MISMATCH)
    for a, w in sorted(p2p.items()):
        b = w.peer
        other = p2p.get(b)  # type: ignore[arg-type]
        if other is not None and b is not None and a < b and other.peer == a and w.direction == other.direction is not None:
            verb = "sends to" if w.direction == "send" else "receives from"
            name([a, b], f"point-to-point deadlock: rank {a} {verb} rank {b} {w.describe()} while rank "
                 f"{b} {verb} rank {a} {other.describe()}", Kind.WAIT_CYCLE)
    for r, w in sorted(waits.items()):
        if w.kind is not WaitKind.STORE or not w.missing_keys:
            continue
        for key in w.missing_keys:
            owner = key_rank(key)
            if owner is None or owner == r:
                continue
            other = waits.get(owner)
            where = f": it is {other.describe()}" if other is not None else ""
            name([owner], f"never set store key {key!r} that rank {r} waits for {w.describe()}{where}",
                 Kind.STORE_KEY_MISSING)


def _matches(peer: RankWait | None, direction: str, rank: int) -> bool:
    return (peer is not None and peer.kind is WaitKind.P2P and peer.peer == rank
            and peer.direction in (direction, None))


def _doing(w: RankWait | None) -> str:
    return f"is {w.describe()}" if w is not None else "could not be read"
