"""Recognise launcher processes (torchrun, deepspeed, accelerate, mpirun, srun) by command line.

A launcher spawns ranks and is never one itself. Pure function of the argv, shared by the live
process scan and by the loader of saved dumps (``py-spy dump --subprocesses`` output includes
the launcher).
"""

from __future__ import annotations

import os
import shlex

__all__ = ["is_hangdbg", "is_launcher"]

_MAX_CMDLINE = 16384  # characters of a command-line string read (a launcher names itself early)
_PROGRAMS = frozenset({"torchrun", "deepspeed", "accelerate", "mpirun", "mpiexec", "srun"})
_MODULES = (
    "torch.distributed.run",
    "torch.distributed.launch",
    "deepspeed.launcher",
    "accelerate.commands",
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
)


def is_launcher(cmdline: list[str] | str) -> bool:
    """True when ``cmdline`` (argv list, or a space-joined string) runs a launcher.

    Matches the program (or the script after the interpreter) named ``torchrun``, ``deepspeed``,
    ``accelerate``, ``mpirun``, ``mpiexec`` or ``srun``, and ``python -m`` of their modules;
    multiprocessing's resource tracker and forkserver helpers are not ranks either. Of a string,
    only the first ``_MAX_CMDLINE`` (16384) characters are read.
    """
    if isinstance(cmdline, str):
        cmdline = cmdline[:_MAX_CMDLINE]  # shlex is super-linear: a garbled 1 MB line took minutes
        try:
            argv = shlex.split(cmdline)
        except ValueError:
            argv = cmdline.split()
    else:
        argv = cmdline
    if any(os.path.basename(arg) in _PROGRAMS for arg in argv[:3]):
        return True
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m":
            return argv[i + 1].startswith(_MODULES)
        if arg == "-c":
            return any(m in argv[i + 1] for m in _MODULES[-2:])
    return False


def is_hangdbg(cmdline: list[str]) -> bool:
    """True when ``cmdline`` runs hangdbg itself (``python -m hangdbg ...`` or the ``hangdbg``
    script): never a rank, although an agent of another run (a ``watch`` sampling the job, a
    second ``dump --jobid``) carries the job's ``SLURM_JOB_ID``/``SLURM_PROCID`` like its ranks."""
    if any(os.path.basename(arg) == "hangdbg" for arg in cmdline[:2]):
        return True
    return any(arg == "-m" and cmdline[i + 1] in ("hangdbg", "hangdbg.__main__") for i, arg in enumerate(cmdline[:-1]))
