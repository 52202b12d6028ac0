"""Prefix every log record with the rank: ``[host rank 5/8] message``.

    from hangdbg.hooks import rank_logging
    logging.basicConfig(level=logging.INFO)
    rank_logging.install()            # root logger's handlers; or install(logger=..., fmt=...)

The filter is put on each *handler* of the logger (handler filters see records propagated from
child loggers too, logger filters do not) and the rank is resolved for each record, so the prefix
is right after ``init_process_group``. Installing again replaces the format, never doubles the
prefix. Format fields: ``host``, ``rank``, ``local_rank``, ``world_size`` (missing ones print ``?``).
"""

from __future__ import annotations

import logging

from .rankinfo import rank_info

__all__ = ["DEFAULT_FMT", "RankPrefixFilter", "format_prefix", "install", "uninstall"]

DEFAULT_FMT = "[{host} rank {rank}/{world_size}] "


def format_prefix(fmt: str = DEFAULT_FMT) -> str:
    info = rank_info()
    fields = {k: ("?" if v is None else v) for k, v in info._asdict().items()}
    return fmt.format(**fields)


class RankPrefixFilter(logging.Filter):
    """Adds the prefix to ``record.msg`` once (marks the record so other handlers don't re-add it)."""

    def __init__(self, fmt: str = DEFAULT_FMT):
        super().__init__()
        self.fmt = fmt

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "_hangdbg_rank_prefixed", False):
            try:
                prefix = format_prefix(self.fmt)
            except Exception:
                prefix = ""
            # Fold args in first so a '%' in the prefix (hostnames don't have one) can't break formatting.
            record.msg = prefix + record.getMessage()
            record.args = None
            record._hangdbg_rank_prefixed = True
        return True


def _resolve(logger: None | str | logging.Logger) -> logging.Logger:
    if logger is None:
        return logging.getLogger()
    if isinstance(logger, str):
        return logging.getLogger(logger)
    return logger


def install(fmt: str = DEFAULT_FMT, logger: None | str | logging.Logger = None,
            level: int | None = None) -> RankPrefixFilter:
    """Put the rank prefix on every handler of ``logger`` (root by default); idempotent.

    If the logger has no handler yet, a ``StreamHandler`` (stderr) is added. ``level`` sets the
    logger's level when given. Returns the filter (one shared filter per logger).
    """
    lg = _resolve(logger)
    if level is not None:
        lg.setLevel(level)
    if not lg.handlers:
        lg.addHandler(logging.StreamHandler())
    existing = None
    for h in lg.handlers:
        for f in h.filters:
            if isinstance(f, RankPrefixFilter):
                existing = existing or f
    flt = existing or RankPrefixFilter(fmt)
    flt.fmt = fmt
    for h in lg.handlers:
        for f in [f for f in h.filters if isinstance(f, RankPrefixFilter) and f is not flt]:
            h.removeFilter(f)
        if flt not in h.filters:
            h.addFilter(flt)
    return flt


def uninstall(logger: None | str | logging.Logger = None) -> None:
    lg = _resolve(logger)
    for h in lg.handlers:
        for f in [f for f in h.filters if isinstance(f, RankPrefixFilter)]:
            h.removeFilter(f)
