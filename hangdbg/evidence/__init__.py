"""Post-mortem evidence: one closed sub-package per kind, and what reads them all into one verdict.

==========================  =========================================================================
sub-package                 reads
==========================  =========================================================================
:mod:`.stacks`              py-spy dump texts, ``hangdbg dump -o`` directories (kind ``stacks``);
                            gdb / pstack / eu-stack / lldb / py-bt / faulthandler texts (``stack_text``)
:mod:`.core`                ELF core files (gdb, pystack); the JSON documents of ``hangdbg core``
:mod:`.nccl`                NCCL_DEBUG logs
:mod:`.nccl_ras`            NCCL RAS reports (text and JSON)
:mod:`.torch_log`           PyTorch watchdog / desync / torchrun logs, torchelastic ``error.json``
:mod:`.flight_recorder`     PyTorch flight-recorder dumps (JSON, pickle, ``fr_trace`` text)
:mod:`.gpu`                 kernel logs with NVIDIA Xid lines, ``nvidia-smi -q`` (kind ``gpu``)
:mod:`.traces`              files of the ``tracer`` package
==========================  =========================================================================

Each kind holds the same rooms: ``grammar`` (lines to records), ``analysis`` (records to findings),
``facts`` (its typed facts, frozen dataclasses) and ``reader`` (``READER``: a :class:`~.base.Reader`).
A kind imports the ground floor, :mod:`hangdbg.text`, :mod:`hangdbg.tools`, :mod:`hangdbg.stacks`
and :mod:`.base`, never another kind (``tests/test_layering.py``). Above the kinds:
:mod:`.registry` (every reader, by import), :mod:`.walk` (the files of a directory, classified by
content), :mod:`.read` (``read_evidence``: every file into one verdict), :mod:`.verdict` (the first
failure, not its echoes), :mod:`.crosscheck` (flight recorder against stacks), :mod:`.fr_join` (the joint verdict of stacks
and flight recorder: the flight recorder decides where the stacks are identical), :mod:`.fr_files`
(a dump directory's ``fr/`` folder) and :mod:`.jobs` (files of two different jobs).
"""
