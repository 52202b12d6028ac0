"""Bisection over nodes (or the GPUs of a node) to the smallest set that fails the check.

The manual recipe, automated: run the check on halves of a failing set, keep the half that
fails, until one node (one GPU) is left. Two refinements:

* the evidence first: when the failed run blamed some units (:func:`hangdbg.check.blame.blame`),
  the first split is "those units" against "the rest", so a bad node is usually found in one
  round (both halves run at once);
* a failure that needs both halves (each passes alone, together they fail: a node that cannot
  reach the others' network) is not a dead end: the set runs whole once more; when it fails
  again, the units the evidence named are the ones that break the others (without such evidence
  the set fails only together); when it passes, the failure was intermittent and no unit is
  named (a unit named on one failure that does not repeat would be a false suspect).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Hashable, Sequence, TypeVar

__all__ = ["Outcome", "Isolation", "isolate"]

U = TypeVar("U", bound=Hashable)


@dataclass(frozen=True)
class Outcome(Generic[U]):
    """A run of a subset: did it pass, and which of its units did its evidence blame."""

    passed: bool
    blamed: tuple[U, ...] = ()


@dataclass
class Isolation(Generic[U]):
    """What the bisection found.

    Attributes:
        alone: units that fail the check by themselves.
        with_others: units that pass alone but make a set fail (named by the evidence).
        together: sets whose halves pass while the whole fails and nothing names one unit.
        intermittent: sets whose halves pass and that pass again when run whole: the failure
            does not repeat, and no unit is named.
        runs: every subset run and its outcome, in order.
    """

    alone: list[U] = field(default_factory=list)
    with_others: list[U] = field(default_factory=list)
    together: list[tuple[U, ...]] = field(default_factory=list)
    intermittent: list[tuple[U, ...]] = field(default_factory=list)
    runs: list[tuple[tuple[U, ...], bool]] = field(default_factory=list)

    @property
    def bad(self) -> list[U]:
        """Every unit to leave out (``alone`` and ``with_others``), in the order found."""
        return list(dict.fromkeys([*self.alone, *self.with_others]))


def isolate(units: Sequence[U], run_many: Callable[[list[tuple[U, ...]]], list[Outcome[U]]],
            blamed: Sequence[U] = ()) -> Isolation[U]:
    """Find the units of a failing set that fail (see the module docstring).

    Args:
        units: the set that failed (its order is kept in every subset).
        run_many: runs the check on each subset given (at once when it can) and returns their
            outcomes in the same order.
        blamed: the units the failed run's evidence named (may be empty).

    Returns:
        The :class:`Isolation`; ``runs`` lists every subset tried. With ``n`` units and one bad
        unit, at most ``2 * ceil(log2 n)`` subsets run (two per round, in parallel), plus one
        re-run of a set whose halves both pass.
    """
    result: Isolation[U] = Isolation()

    def search(s: list[U], named: Sequence[U]) -> None:
        if len(s) == 1:
            result.alone.append(s[0])
            return
        hinted = [u for u in s if u in named]
        first = hinted if hinted and len(hinted) < len(s) else s[: len(s) // 2]
        rest = [u for u in s if u not in first]
        out_a, out_b = run_many([tuple(first), tuple(rest)])
        result.runs += [(tuple(first), out_a.passed), (tuple(rest), out_b.passed)]
        if not out_a.passed:
            search(first, out_a.blamed)
        if not out_b.passed:
            search(rest, out_b.blamed)
        if out_a.passed and out_b.passed:
            [again] = run_many([tuple(s)])
            result.runs.append((tuple(s), again.passed))
            if again.passed:  # the failure did not repeat: nothing to name
                result.intermittent.append(tuple(s))
            elif hinted and len(hinted) < len(s):
                result.with_others.extend(hinted)
            else:
                result.together.append(tuple(s))

    search(list(units), list(blamed))
    return result
