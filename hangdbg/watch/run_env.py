"""The debug environment ``hangdbg run`` gives the command it starts (pure: no I/O).

Each variable is set only when the user's environment does not have it already (an empty value
counts as set: a user who wrote ``VAR=`` meant it); :func:`debug_env` says which were set and
which were kept. ``OUT`` is the run's output directory. Sources of the names:

* ``TORCH_FR_BUFFER_SIZE`` (and the older ``TORCH_NCCL_TRACE_BUFFER_SIZE``): entries of the flight
  recorder per rank. torch 2.13 ``torch/csrc/distributed/c10d/FlightRecorder.hpp`` reads
  ``{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}`` with default 2000 (NCCL records by
  default); ``torch/distributed/distributed_c10d.py`` (the torchcomms/gloo path) reads the same two
  with default ``"0"`` (off). Set to torch's own C++ default, :data:`FR_BUFFER` (2000).
* ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``: the NCCL watchdog writes the flight recorder when a collective
  times out (``ProcessGroupNCCL.hpp``: "must be set together with TORCH_NCCL_ENABLE_MONITORING=1 and
  TORCH_NCCL_TRACE_BUFFER_SIZE > 0"; monitoring is on by default). NCCL (and XCCL) only: gloo has
  no watchdog dump.
* ``TORCH_FR_DUMP_TEMP_FILE`` / ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` = ``OUT/fr/rank_``: the prefix of
  that dump, ``<prefix><rank>`` (both strings are in libtorch_cpu 2.13; ``FlightRecorderDetail.hpp``
  ``DebugInfoWriter``); the names are :data:`hangdbg.tools.fr_pipe.PREFIX_VARS`.
* ``TORCH_FR_DEBUG_INFO_PIPE_FILE`` / ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` = ``OUT/fr/pipe_``: the
  stem of each rank's dump pipe ``<stem><rank>.pipe`` (``ProcessGroupNCCL.hpp`` ``DumpPipe``,
  ``debugInfoPipeFile_`` "Stores TORCH_NCCL_DEBUG_INFO_PIPE_FILE"; its string is in libtorch_cuda,
  which the CPU wheel lacks), which ``dump`` writes to ask a rank for its recorder
  (:mod:`hangdbg.tools.fr_pipe`, :data:`~hangdbg.tools.fr_pipe.PIPE_VARS`); NCCL/XCCL only.
  ``TORCH_FR_DEBUG_INFO_PIPE_FILE`` is not in torch 2.13's headers or CPU libraries (fr_pipe cites
  ``ProcessGroupXCCL.hpp`` of newer torch); it is set as the first name fr_pipe reads.
* ``NCCL_DEBUG_FILE`` = ``OUT/nccl/%h.%p.log``: NCCL writes its log there, one file per process
  (NCCL user guide, "Logging": "NCCL_DEBUG_FILE: writes logs to files (%h host, %p PID)"). It only
  takes effect with ``NCCL_DEBUG``, which is never raised here unless asked (``nccl_debug``).
* ``NCCL_RAS_ENABLE=1``: NCCL's RAS subsystem (NCCL >= 2.24, on by default; "Troubleshooting: RAS");
  set so that a site default of 0 does not silently leave ``dump`` without RAS answers.
* ``HANGDBG_HEARTBEAT_DIR`` = ``OUT/heartbeat``: where :func:`hangdbg.hooks.heartbeat.heartbeat`
  (and the :mod:`hangdbg.integrations` callbacks) write, and what ``run`` watches.
* ``PET_LOG_DIR`` = ``OUT/logs``, ``PET_TEE=3``: torchrun's ``--log-dir`` and ``--tee`` (torch 2.13
  ``torch/distributed/run.py`` declares them with ``argparse_util.env``, whose value comes from
  ``PET_{DEST}`` when the option is not on the command line; ``3`` tees stdout and stderr of every
  local rank to ``LOG_DIR/<run id>/attempt_N/<local rank>/{stdout,stderr}.log`` and the console).
  Left out when the command line names ``--log-dir``/``--tee``/``--redirects`` (``-t``/``-r``)
  anywhere: the user chose; an option on the command line wins over ``PET_*`` anyway.
* ``HANGDBG_DEMO_DEBUG_SERVER=1``: the demo job's switch (:mod:`hangdbg.demo.job`) that makes
  every rank call ``torch.distributed.debug.start_debug_server`` (then ``dump`` fetches each rank's
  flight recorder and traceback from it: :mod:`hangdbg.collect.live_sources`). torch 2.13 has no
  environment variable that starts the debug server (``torch/distributed/debug/__init__.py``:
  only the function); other jobs ignore this variable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..tools.fr_pipe import PIPE_VARS, PREFIX_VARS

__all__ = ["DebugEnv", "FR_BUFFER", "NCCL_DEBUG_LEVELS", "TORCHRUN_LOG_OPTIONS", "debug_env", "out_dirs",
           "names_torchrun_logs"]

FR_BUFFER = "2000"
"""``TORCH_FR_BUFFER_SIZE`` set: torch's C++ default (``FlightRecorder.hpp``), entries per rank."""
NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
"""``NCCL_DEBUG`` levels (NCCL user guide, "Logging")."""
TORCHRUN_LOG_OPTIONS = ("--log-dir", "--log_dir", "--tee", "-t", "--redirects", "-r")
"""torchrun's options about its per-rank log files (``torch/distributed/run.py``)."""
SUBDIRS = ("fr", "nccl", "heartbeat", "logs")
"""The directories under OUT the variables point into (NCCL and torch do not create them)."""


@dataclass(frozen=True, slots=True)
class DebugEnv:
    """The environment of the command ``run`` starts.

    Attributes:
        env: the whole environment (the user's, plus the variables set).
        set: the variables set by hangdbg, name -> value, in the order of the module docstring.
        kept: the variables hangdbg would have set but the user already had, name -> the user's value.
    """

    env: dict[str, str]
    set: dict[str, str]
    kept: dict[str, str]


def names_torchrun_logs(argv: Sequence[str]) -> bool:
    """True when ``argv`` has one of :data:`TORCHRUN_LOG_OPTIONS` (alone or as ``--opt=value``), or
    a short option glued to its value (``-t3``, ``-r0:1``) anywhere: the user chose torchrun's log
    files. Conservative: a script's own ``-t`` also counts (then only the default is left out)."""
    for arg in argv:
        name = arg.split("=", 1)[0]
        if name in TORCHRUN_LOG_OPTIONS or (len(arg) > 2 and arg[:2] in ("-t", "-r") and arg[2:3].isdigit()):
            return True
    return False


def wanted(out: Path, argv: Sequence[str], nccl_debug: str | None = None, heartbeat: str | None = None) -> dict[str, str]:
    """The variables ``run`` would set, in order (see the module docstring).

    Args:
        out: the run's output directory (absolute, so that ranks with another working directory
            find it).
        argv: the command (only read for torchrun's log options).
        nccl_debug: ``NCCL_DEBUG`` to set (one of :data:`NCCL_DEBUG_LEVELS`), or None: not set.
        heartbeat: the heartbeat directory (default ``OUT/heartbeat``).
    """
    fr = out / "fr"
    env = {"TORCH_FR_BUFFER_SIZE": FR_BUFFER, "TORCH_NCCL_TRACE_BUFFER_SIZE": FR_BUFFER,
           "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}
    env.update({name: str(fr / "rank_") for name in PREFIX_VARS})
    env.update({name: str(fr / "pipe_") for name in PIPE_VARS})
    env["NCCL_DEBUG_FILE"] = str(out / "nccl" / "%h.%p.log")
    if nccl_debug:
        env["NCCL_DEBUG"] = nccl_debug
    env["NCCL_RAS_ENABLE"] = "1"
    env["HANGDBG_HEARTBEAT_DIR"] = heartbeat or str(out / "heartbeat")
    if not names_torchrun_logs(argv):
        env.update(PET_LOG_DIR=str(out / "logs"), PET_TEE="3")
    env["HANGDBG_DEMO_DEBUG_SERVER"] = "1"
    return env


def debug_env(environ: Mapping[str, str], out: Path, argv: Sequence[str], nccl_debug: str | None = None,
              heartbeat: str | None = None) -> DebugEnv:
    """``environ`` with the debug variables of :func:`wanted` added where it has none of them.

    A pair of names for one setting (``TORCH_FR_BUFFER_SIZE`` and ``TORCH_NCCL_TRACE_BUFFER_SIZE``,
    the two prefixes, the two pipe stems) is one choice: when the user set either, neither is set
    (torch reads the first that is set, so setting the other could override the user's).
    """
    pairs = [("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"), tuple(PREFIX_VARS), tuple(PIPE_VARS),
             ("PET_LOG_DIR", "PET_TEE")]
    want = wanted(out, argv, nccl_debug, heartbeat)
    env, set_, kept = dict(environ), {}, {}
    for name, value in want.items():
        group = next((g for g in pairs if name in g), (name,))
        users = [g for g in group if g in environ]
        if users:
            if name in environ:
                kept[name] = environ[name]
            continue
        env[name] = set_[name] = value
    return DebugEnv(env, set_, kept)


def out_dirs(out: Path) -> list[Path]:
    """The directories under ``out`` to create before the command starts (:data:`SUBDIRS`)."""
    return [out / d for d in SUBDIRS]
