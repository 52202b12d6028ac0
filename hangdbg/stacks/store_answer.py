"""The job's store's answer applied to a store wait, when it can be trusted.

``hangdbg dump`` asks the job's store which keys a rank waits for are present
(:func:`hangdbg.tools.store.lookup_keys`). A rank that waits for a whole family of per-rank keys
(``step2/done/0`` ... ``step2/done/3``, :func:`hangdbg.waits.rank_keys`) in a barrier set its own key
before it waits (a barrier's shape: each rank announces itself, then waits for everyone). An answer
that lacks the waiter's own key (:func:`hangdbg.waits.own_keys`) was read somewhere the job does not
write (the keys under another prefix: torch's default store prefixes every key,
``default_pg/0//`` in torch 2.x; or another store): it is not used, and the wait stays unresolved
(an ``undecided`` finding says so) rather than blaming every rank whose key looks missing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..waits import RankWait, WaitKind, own_keys

__all__ = ["with_store_answer", "untrusted"]

UNTRUSTED = "the store's answer is not trusted"
"""The start of the ``detail`` of a store wait whose answer contradicts the waiter's own key."""


def with_store_answer(w: RankWait, rank: int, answer: Mapping[str, bool]) -> RankWait:
    """``w`` (rank ``rank``'s wait) with ``missing_keys`` the keys ``answer`` says the store lacks, and
    ``store`` in its evidence; or, when the answer lacks one of the rank's own keys, with no missing key
    and a ``detail`` that says why the answer was not used (see the module docstring).

    Args:
        w: a store wait (other kinds, or a wait without keys, are returned as they are).
        rank: the waiting rank.
        answer: key -> present in the job's store (keys not asked are absent).
    """
    if w.kind is not WaitKind.STORE or not w.keys or not answer:
        return w
    evidence = (*w.evidence, "store")
    contradicted = [k for k in own_keys(w.keys, rank) if answer.get(k) is False]
    if contradicted:
        return replace(w, missing_keys=(), evidence=evidence,
                       detail=f"{UNTRUSTED}: it lacks {contradicted[0]!r}, rank {rank}'s own key, which a rank that "
                              "waits for every rank's key sets before it waits (the keys were read under another prefix "
                              "or in another store than the job's)")
    return replace(w, missing_keys=tuple(k for k in w.keys if answer.get(k) is False), evidence=evidence)


def untrusted(w: RankWait) -> bool:
    """True when ``w`` is a store wait whose store answer was not used (:func:`with_store_answer`)."""
    return w.kind is WaitKind.STORE and w.detail.startswith(UNTRUSTED)
