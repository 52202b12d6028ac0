"""The files of ``OUT/last/`` (``hangdbg watch --keep-last N``), their names and first lines. Pure: no I/O.

* ``rank-RRRR.sK.txt`` (``K`` = round mod N, a ring of N per rank): the line
  ``# hangdbg-last sample rank=R round=ROUND unix=SECONDS``, then the raw py-spy output as ``dump``
  keeps it (its own ``# hangdbg rank=...`` header, :func:`hangdbg.collect.local.raw_text`);
* ``rank-RRRR.gone.txt``: ``# hangdbg-last gone rank=R round=ROUND unix=SECONDS why=WHY``: the
  first round the rank was not sampled any more while others were (``exited``: its process was
  gone; ``not-sampled``: its node did not answer or py-spy failed);
* ``end.txt``: ``# hangdbg-last end unix=SECONDS alive=SECONDS reason=job-ended``: when the watch
  saw the job gone (``unix``) and when it last saw it running (``alive``), its own clock.

``ROUND`` is the watch's observation number: every rank sampled in one round carries the same
one, so "sampled in an earlier round than the others" needs no clock comparison.
"""

from __future__ import annotations

__all__ = ["MARKER", "sample_name", "gone_name", "END_NAME", "sample_line", "gone_line", "end_line", "parse_line"]

MARKER = "# hangdbg-last "
"""How every file of ``OUT/last/`` starts."""
END_NAME = "end.txt"


def sample_name(rank: int, slot: int) -> str:
    """``rank-0003.s1.txt``: slot ``slot`` of the ring of ``rank``."""
    return f"rank-{rank:04d}.s{slot}.txt"


def gone_name(rank: int) -> str:
    """``rank-0003.gone.txt``."""
    return f"rank-{rank:04d}.gone.txt"


def sample_line(rank: int, round_: int, unix: float) -> str:
    """The first line of a sample file."""
    return f"{MARKER}sample rank={rank} round={round_} unix={unix:.3f}"


def gone_line(rank: int, round_: int, unix: float, why: str) -> str:
    """The line of a gone file (``why``: ``exited`` or ``not-sampled``)."""
    return f"{MARKER}gone rank={rank} round={round_} unix={unix:.3f} why={why}"


def end_line(unix: float, alive: float | None, reason: str) -> str:
    """The line of ``end.txt``."""
    seen = f" alive={alive:.3f}" if alive is not None else ""
    return f"{MARKER}end unix={unix:.3f}{seen} reason={reason}"


def parse_line(line: str) -> tuple[str, dict[str, str]] | None:
    """``("sample" | "gone" | "end", {key: value})`` of a first line, None when it is not one."""
    if not line.startswith(MARKER):
        return None
    what, *rest = line[len(MARKER):].split()
    if what not in ("sample", "gone", "end"):
        return None
    pairs = (tok.partition("=") for tok in rest)
    return what, {k: v for k, sep, v in pairs if sep and k}
