"""Whose memory filled the GPU, from the numbers of PyTorch's CUDA out-of-memory message (pure; no I/O).

The caching allocator's message (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, ``OutOfMemoryError``) states the
GPU's capacity, what is free, and how much this process holds:

* PyTorch >= 2.1: ``Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 2.12 MiB is free.
  Process 1234 has 40.00 GiB memory in use. ... Including non-PyTorch memory, this process has 38.00 MiB memory in
  use.``
* older: ``Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total capacity; 0 bytes already allocated; 18.06 MiB free;
  0 bytes reserved in total by PyTorch)``.

When this process holds a small part of a GPU that is full, the memory is another process's: another job, or
several ranks on one GPU (the rank's device never set from its local rank), or a leftover process.
"""

from __future__ import annotations

import re

__all__ = ["held_elsewhere"]

_SIZE = r"(\d+(?:\.\d+)?) ?(bytes|[KMGT]iB)"
_NEW = re.compile(r"GPU \d{1,3} has a total capacity of " + _SIZE + r" of which " + _SIZE + r" is free\.(?P<rest>.{0,2000}?)"
                  r"this process has " + _SIZE + r" memory in use")
_OLD = re.compile(r"\(GPU \d{1,3}; " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; " + _SIZE
                  + r" free; " + _SIZE + r" reserved in total by PyTorch\)")
_OTHER = re.compile(r"Process \d{1,10} has " + _SIZE + r" memory in use")
_UNIT = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
OWN_SHARE = 0.25
"""This process holds less than this share of the GPU's capacity..."""
FREE_SHARE = 0.05
"""...while less than this share is free: the rest is held by other processes."""


def _bytes(n: str, unit: str) -> float:
    return float(n) * _UNIT[unit]


def held_elsewhere(text: str) -> str:
    """A sentence saying the GPU's memory is held by other processes, when an out-of-memory message's numbers show
    it (this process holds under :data:`OWN_SHARE` of a GPU with under :data:`FREE_SHARE` free); "" otherwise."""
    m = _NEW.search(text)
    if m is not None:
        total, free, own = _bytes(*m.group(1, 2)), _bytes(*m.group(3, 4)), _bytes(*m.group(6, 7))
        others = len(_OTHER.findall(m.group("rest")))
        own_text, total_text, free_text = f"{m.group(6)} {m.group(7)}", f"{m.group(1)} {m.group(2)}", f"{m.group(3)} {m.group(4)}"
    else:
        m = _OLD.search(text)
        if m is None:
            return ""
        total, free, own = _bytes(*m.group(1, 2)), _bytes(*m.group(5, 6)), _bytes(*m.group(7, 8))
        others = 0
        own_text, total_text, free_text = f"{m.group(7)} {m.group(8)}", f"{m.group(1)} {m.group(2)}", f"{m.group(5)} {m.group(6)}"
    if total <= 0 or own >= OWN_SHARE * total or free >= FREE_SHARE * total:
        return ""
    listed = f" ({others} other process{'es' if others != 1 else ''} listed)" if others else ""
    return (f"this process holds only {own_text} of the GPU's {total_text} and {free_text} is free: the memory is held by "
            f"other processes{listed} - another job, several ranks on this one GPU (the rank's device not set from its "
            "local rank, the same CUDA_VISIBLE_DEVICES for every rank) or a leftover process")
