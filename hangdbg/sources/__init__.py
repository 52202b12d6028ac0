"""The evidence readers: one module per kind of evidence, all behind one typed protocol.

============================  =====================================================================
module                        reads
============================  =====================================================================
:mod:`.pyspy`                 py-spy dump texts, ``hangdbg dump -o`` directories (kind ``stacks``)
:mod:`.core`                  ELF core files (gdb, pystack)
:mod:`.core_json`             the JSON documents of ``hangdbg core`` (what ``collect`` brings back)
:mod:`.stack_text`            gdb / pstack / eu-stack / lldb / py-bt / faulthandler / ``frame #N:`` texts
:mod:`.nccl`                  NCCL_DEBUG logs
:mod:`.torch_log`             PyTorch watchdog / desync / torchrun logs, torchelastic ``error.json``
:mod:`.flight_recorder`       PyTorch flight-recorder dumps (JSON, pickle)
:mod:`.xid`                   kernel logs with NVIDIA Xid lines, ``nvidia-smi -q`` (kind ``gpu``)
:mod:`.traces`                files of the ``tracer`` package
============================  =====================================================================

Each module has a ``READER`` (a :class:`Reader`: ``sniff(head)``, ``takes(name, head)``,
``read(paths) -> SourceReport``; readers of stacks are also :class:`StackReader`\\ s), registered
by import in :mod:`.registry`. :mod:`.walk` classifies the files of a directory by content and
:mod:`.evidence` reads them all into one verdict (``hangdbg report``). Layering: this package
sits above :mod:`hangdbg.parse` (the grammars) and :mod:`hangdbg.analyze` (the findings) and
below :mod:`hangdbg.report`, :mod:`hangdbg.collect` and the command line.
"""

from __future__ import annotations

from .base import Reader, ReaderBase, StackReader

__all__ = ["Reader", "StackReader", "ReaderBase"]
