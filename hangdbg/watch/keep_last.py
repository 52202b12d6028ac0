"""``watch --keep-last N``: each rank's latest N stack samples under ``OUT/last/`` (format:
:mod:`hangdbg.evidence.last_stacks.ring`; read back by ``hangdbg report OUT``).

Every file is written atomically (:meth:`hangdbg.outdir.OutDir.save_text`: ``NAME.part`` then
renamed), so a watch killed mid-write leaves the previous sample whole; ``OUT/last`` itself is
created owner-only (mode 0700: the stacks name the job's code). A ring slot is overwritten every N
rounds, so the folder never grows beyond N files per rank.
"""

from __future__ import annotations

import os
import time

from ..evidence.last_stacks.ring import END_NAME, end_line, gone_line, gone_name, sample_line, sample_name
from ..model import RankDump
from ..outdir import OutDir, make_dirs

__all__ = ["LastRing", "pyspy_like"]

LAST = "last"


class LastRing:
    """The ring of ``OUT/last/`` of one watch.

    Args:
        out: the watch's output directory.
        keep: samples kept per rank (>= 1).
    """

    def __init__(self, out: OutDir, keep: int) -> None:
        self.out, self.keep = out, max(1, keep)
        self.round = 0
        self.seen: set[int] = set()
        self.gone: set[int] = set()
        self.alive_at: float | None = None
        path = out.path / LAST
        try:
            make_dirs(path)
        except OSError as exc:
            out.record_not_saved(path, exc.strerror or str(exc))

    def add(self, texts: list[tuple[int, str, float]], exited: set[int] | None = None) -> None:
        """One round of samples: ``(rank, raw py-spy text with its header, Unix time)`` for each rank
        sampled; ranks seen before and sampled no more (while others were) get a gone file once
        (``exited``: the ranks known to have exited, None: all of them; the others were not sampled:
        py-spy failed, or their node did not answer)."""
        self.round += 1
        sampled = set()
        for rank, text, unix in texts:
            sampled.add(rank)
            body = text if text.endswith("\n") else text + "\n"
            self.out.save_text(f"{LAST}/{sample_name(rank, self.round % self.keep)}",
                               sample_line(rank, self.round, unix) + "\n" + body)
        if not sampled:
            return
        self.alive_at = time.time()
        for rank in sorted(self.seen - sampled - self.gone):
            why = "exited" if exited is None or rank in exited else "not-sampled"
            self.out.save_text(f"{LAST}/{gone_name(rank)}", gone_line(rank, self.round, time.time(), why) + "\n")
            self.gone.add(rank)
        for rank in sampled & self.gone:  # back (a node that answers again): no longer gone
            self.gone.discard(rank)
            try:
                (self.out.path / LAST / gone_name(rank)).unlink()
            except OSError:
                pass
        self.seen |= sampled

    def end(self, reason: str = "job-ended") -> None:
        """Record that the job was seen gone now (``end.txt``)."""
        self.out.save_text(f"{LAST}/{END_NAME}", end_line(time.time(), self.alive_at, reason) + "\n")


def pyspy_like(d: RankDump) -> str:
    """A rank dump of a fan-out sample as py-spy ``dump`` text (the raw texts stay on the nodes),
    with hangdbg's ``# hangdbg rank=`` header: what :func:`hangdbg.stacks.saved.load_dump_texts` reads."""
    head = f"# hangdbg rank={d.rank}" + (f" pid={d.pid}" if d.pid else "") + (f" host={d.host}" if d.host else "")
    lines = [head, f"Process {d.pid or 0}: {d.cmdline or '?'}", f"Python v{d.python or '?'}", ""]
    for th in d.threads:
        lines.append(f"Thread {th.thread_id:#x} ({th.status}): \"{th.name or ''}\"")
        lines += [f"    {f.function} ({f.file}:{f.line})" if f.line is not None else f"    {f.function} ({f.file})"
                  for f in th.frames]
        lines.append("")
    return "\n".join(lines)
