"""A log line's message and its context: every known prefix peeled off.

A line reaches a log file through many hands: a launcher (``[rank3]:``, ``[default3]:``, mpirun's
``[1,3]<stdout>:``, Ray's ``(Worker pid=12, ip=...)``), a logger (timestamps, glog's
``E1126 00:32:28.123 472 ProcessGroupNCCL.cpp:632]``, Python's ``ERROR:name:``), NCCL's own header
(``host:pid:tid [dev] file.cc:123 NCCL WARN``), PyTorch's ``[PG ID 0 ... Rank 3]``, an exception
class (``torch.distributed.DistBackendError: ``), syslog (``Nov 26 00:32:07 host kernel:``) and the
thread it was pasted in (Markdown quotes, list bullets). :func:`parse_line` peels all of them,
keeps what they say (time, host, pid, rank, local rank, GPU) and returns the message the catalog
matches. Formats: NCCL 2.28 ``src/debug.cc`` (``%s:%d:%d [%d] `` header, ``[%F %T] `` timestamp
of ``NCCL_DEBUG_TIMESTAMP_FORMAT``), PyTorch 2.x ``c10/util/Logging.cpp`` (glog header),
``ProcessGroupNCCL.cpp`` ``logPrefix()`` (``[PG ID %d PG GUID %s Rank %d] ``), torchrun's
``--tee`` / ``--log-line-prefix-template`` default ``[{role_name}{local_rank}]:``.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from dataclasses import dataclass

from ..text.lines import strip_prefix

__all__ = ["Message", "parse_line", "looks_like_error", "ERROR_WORDS", "ERROR_STEMS"]

_ISO = re.compile(r"\[?(?P<d>\d{4}-\d\d-\d\d)[T \-](?P<t>\d\d:\d\d:\d\d)(?P<f>[.,]\d+)?")
_NCCL = re.compile(
    r"(?P<host>[\w.\-]{1,253}):(?P<pid>\w{1,12})(?::(?P<tid>\w{1,12}))? \[(?P<dev>-?\d{1,4})\] "
    r"(?:(?:(?P<src>[\w./\-]{1,200}:\d{1,6}) )?(?:NCCL )?|[^\n]{1,300}?:\d{1,6} NCCL )(?P<level>WARN|INFO|ERROR|ABORT|TRACE)\s?")
# (a net plugin's line names its function, which in C++ is a whole signature: "int f(int):544 NCCL WARN")
# a NCCL line pasted without its header (``init.cc:1247 NCCL WARN ...``), or of a version that
# wrote no ``NCCL`` before the level (``include/socket.h:344 WARN ...``)
_NCCL_BARE = re.compile(r"(?:\[(?P<dev>-?\d{1,4})\]\s)?(?:(?P<src>[\w./\-]{1,200}\.(?:cc|cu|h|c|cpp):\d{1,6})\s(?:NCCL\s)?|NCCL\s"
                        r"|[\w:~<>]{1,200}:\d{1,6}\sNCCL\s)(?P<level>WARN|ERROR)\s")
# c10/util/Logging.cpp writes the date as (tm_mon + 1) * 100 + tm_mday: "E909" on Sep 9, "E1126" on Nov 26
_GLOG = re.compile(r"\[?(?P<lvl>[EWIF])(?P<md>\d{3,4}) (?P<t>\d\d:\d\d:\d\d)(?:\.\d+)?\s+(?:\d{1,10}\s+)?[\w./\-]{1,300}:\d{1,6}\]\s?"
                   r"|\[(?P<lvl2>[EWIF]) [\w.\-]{1,200}:\d{1,6}\]\s?")
_C10D_RANK = re.compile(r"\[(?:PG(?: ID)? [^\]\n]{0,200}?)?Rank (?P<rank>\d{1,9})\]:?\s?")
_EXC = re.compile(r"(?:(?:[A-Za-z_][\w]*\.){0,6}[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure)|Exception)"
                  r"(?:\([\w.]{1,120}\))?(?:\[[^\]\n]{0,80}\])?:\s+")
_LOGGER = re.compile(
    r"(?:\[(?P<lvl4>ERROR|WARNING|WARN|CRITICAL|FATAL|INFO|DEBUG|error|warning|warn|critical|fatal|info|debug)\]\s?"
    r"|(?P<lvl5>ERROR|WARNING|CRITICAL|FATAL)(?::[\w.\-]{0,120}:|\s*[-:|]\s+)"
    r"|\[[\w.\-/]{1,120}\.py:\d{1,6}(?::[\w<>]{1,80})?\]\s?|[\w.\-]{1,120} - (?P<lvl6>ERROR|WARNING|CRITICAL|INFO|DEBUG) - )")
_ELASTIC_OLD = re.compile(r"\[(?P<lvl4>ERROR|WARNING|INFO|DEBUG|CRITICAL)\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
                          r"[a-z_]\w{0,60}: ")
"""torchelastic's own log format of PyTorch 1.9-1.10 (torch/distributed/elastic/utils/logging.py:
``[%(levelname)s] %(asctime)s %(module)s: %(message)s``): level, time and module name before the message."""
_SYSLOG = re.compile(r"(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4}\]) ?"
                     r"(?:(?P<host>[\w.\-]{1,253}) )?(?:kernel|[\w.\-]{1,80}(?:\[\d+\])?):\s")
_RAY = re.compile(r"\((?:[\w.]{1,120}\s)?(?:rank=(?P<rank>\d{1,9})\s)?pid=(?P<pid>\d{1,10})(?:,\s?ip=(?P<host>[\w.:\-]{1,80}))?"
                  r"(?:,\s?actor_id=\w{1,64})?\)\s?|\((?:raylet|gcs_server|dashboard)[^)]{0,80}\)\s?")
# a rank a program's own logger writes before its message: DeepSpeed's log_dist "[Rank 0] " (deepspeed/utils/
# logging.py), "[RANK 3]", "[rank 5/8]", "[rank=3]", "RANK 3: ", "rank=3 " (dist.get_rank() in a format string)
_USER_RANK = re.compile(r"\[(?:global[_ ]?)?rank\s?[=:]?\s?(?P<rank>\d{1,9})(?:\s?/\s?\d{1,9})?\]:?\s?"
                        r"|(?:global[_ ]?)?rank(?:\s?(?P<r2>\d{1,9}):|=(?P<r3>\d{1,9})\s?[:|\-]?)\s", re.IGNORECASE)
_PASTE = re.compile(r"(?:>\s?|[-*+] (?=\S)|#{1,6} |`{1,3}|\"|'|\$ )")
_WHAT = re.compile(r"what\(\):\s+")
_JSON_KEY = re.compile(r'(?:\{\s*)?"(?:message|msg|error|err|reason|detail|details|description|exception|what)"\s*:\s*"', re.I)
"""A JSON field that holds a message, as an error file or a structured log prints it (torchelastic's
error_handler dumps its error.json: ``"message": "RendezvousConnectionError: ..."``): the value is the
message (its closing quote and comma go too)."""
_EXC_BARE = re.compile(r"(?P<cls>(?:[A-Za-z_]\w*\.){0,6}[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|Failure)):?")
# more hands a line passes through: ANSI colours (raw, syslog-escaped "#033[", or with the ESC lost in a
# paste); Kubernetes' CRI log format ("<time> stderr F <line>"); a label before a launcher prefix (pdsh
# "node03: ", srun --label "3: ", a pid "[80750] "); loguru ("| ERROR    | mod:func:12 - "); Hydra's
# "[name][LEVEL] - "; a "2024/01/01 12:00:00 " time
_MORE = re.compile(
    r"(?:\x1b|#033)?\[\d{1,3}(?:;\d{1,3})*m"
    r"|(?:stdout|stderr) [FP] "
    r"|(?:(?P<host>[A-Za-z][\w.\-]{0,63})|\d{1,6}|\[\d{1,10}\]):? (?=\[(?:rank\d|default\d|\d+,\d+\]<|\d+\]<))"
    # pdsh's "host: " before a launcher's bracketed time (DeepSpeed's multi-node runner: "node2: [2024-01-01 10:00:00,000]")
    r"|(?P<host2>[A-Za-z][\w.\-]{0,63}): (?=\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d)"
    r"|(?:\|\s{0,4})?(?P<level>TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL)\s{0,8}\|\s{0,4}[\w.<>\-]{1,120}:[\w.<>\-]{1,120}:\d{1,6} - "
    r"|\[[\w.\-]{1,80}\]\[(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\] - "
    # log4j's "[%-5p] %t %c - " after its date (TorchServe's log4j2.xml, pytorch/serve frontend/server/src/main/resources):
    # the level of a worker's forwarded stdout is INFO whatever the line says, so it is not taken
    r"|\[(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ?\] [^\s\[\]]{1,200} [\w.$]{1,200} - "
    r"|\d{4}/\d\d/\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)? "
    # the Message field of kubectl describe ("Message:          The node was low on ..."), aligned by blanks
    r"|Message:\s{3,}(?=\S)"
    # pytest's failure report: the exception's lines under "E" and blanks (_pytest/_code/code.py, fail_marker "E")
    r"|E {3,8}(?=[A-Za-z_\[])"
    # MPICH Hydra's banner rows "=   BAD TERMINATION ..." (src/pm/hydra/mpiexec/pmiserv_cb.c HYDU_dump_noprefix)
    r"|= {2,8}(?=[A-Z])")
# Slurm's log.c prefix (program name, then the level: src/common/log.c); Ray's and vLLM's Python loggers
# (``WARNING worker.py:1866 -- ``, ``ERROR 01-01 00:00:00 [file.py:230] ``); horovod's C++ logger
# (``[time W 123 file.cc:107]`` once its time is gone); Lightning's ``[rank: N]``.
_TOOLS = re.compile(
    r"(?:srun|slurmstepd|sbatch|salloc|scontrol|sacct|squeue)(?:\[\d{1,10}\])?:\s(?:(?P<lvl6>error|warning|fatal|debug):\s)?"
    r"|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s[\w.\-]{1,120}\.py:\d{1,6}\s--\s"
    r"|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s\d\d-\d\d\s\d\d:\d\d:\d\d(?:\.\d+)?\s\[?[\w.\-/]{1,120}:\d{1,6}\]\s?"
    r"|[EWIF]\s\d{1,10}\s[\w./\-]{1,200}:\d{1,6}\]\s?"
    # horovod's "[2024-01-01 00:00:00.000000: W /tmp/pip/horovod/common/stall_inspector.cc:107] " once its time is gone
    # (horovod/common/logging.cc: "[" time ": " level " " file ":" line "] ")
    r"|:\s[EWIF]\s[\w./\-]{1,200}\.(?:cc|h|cpp):\d{1,6}\]\s?"
    r"|\[rank:\s?(?P<rank>\d{1,9})\]\s?"
    # Ray's RAY_LOG message head "file.cc:LINE: " (ray src/ray/util/logging.cc: basename, line, ": ")
    r"|(?P<src>[\w.\-]{1,120}\.(?:cc|cpp|h)):\d{1,6}:\s(?=[A-Z0-9(])")
# Open MPI's BTL_ERROR / BTL_PEER_ERROR prefix "[host][[jobid,job],vpid][file.c:line:func] " (opal/mca/btl/
# base/btl_base_error.h: hostname, OPAL_NAME_PRINT of the process, __FILE__, __LINE__, __func__): the vpid is the
# process's rank in MPI_COMM_WORLD
# srun's task status "%s: %s %s: ..." (node, "task"/"tasks", the task ids: SchedMD/slurm src/srun/launch.c:388): the
# node is the host of the tasks (the task ids are SLURM_PROCID, a rank only when srun starts one task per rank)
_SRUN_TASKS = re.compile(r"(?P<host>[A-Za-z][\w.\-]{0,63}): tasks? [\d,\-\[\]]{1,200}: (?=[A-Z])")
# rich's logging.RichHandler (Textualize/rich rich/_log_render.py LogRender): an optional "[time]" column, the level
# padded to 8 columns, the message, and the caller's "file.py:line" at the right edge of the terminal (accelerate's,
# Lightning's and torchelastic's loggers under rich): the level goes first, the path last, each only with the other
_RICH_LEVEL = re.compile(r"\s{0,4}(?:\[\d\d/\d\d/\d\d(?:\d\d)? \d\d:\d\d:\d\d\]\s{1,4})?"
                         r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s{1,8}(?=\S)")
_RICH_PATH = re.compile(r"\s{2,}(?P<src>[\w.\-]{1,80}\.py:\d{1,6})\s*$")
# UCX's fatal-error prefix "[host:pid:thread:tid] " (openucx/ucx src/ucs/debug/log.c, the pid left-aligned in its column)
_UCX = re.compile(r"\[(?P<host>[\w.\-]{1,253}):(?P<pid>\d{1,10}) {0,6}:\d{1,6}:\d{1,10}\]\s{1,4}")
_OMPI = re.compile(r"\[(?P<host>[\w.\-]{1,253})\](?:\[\[\d{1,10},\d{1,10}\],(?P<rank>\d{1,9})\])?"
                   r"\[(?P<src>[\w.\-]{1,120}\.c:\d{1,6}):\w{1,120}\]\s?")
# Open MPI's opal_output prefix "[host:pid] " (open-mpi/ompi v4.1.6 opal/util/output.c: "[%s:%05d] " of the node name and
# the pid, written before each line of a stream that asks for it); a host has a letter (a "[12:34]" time is none)
_OPAL_OUT = re.compile(r"\[(?=[\w.\-]{0,252}[A-Za-z])(?P<host>[A-Za-z0-9][\w.\-]{0,252}):(?P<pid>\d{1,10})\]\s")
# MPICH's error-stack level "FUNC(LINE)....: MESSAGE": the location "%s(%d)" (fcname, line), dots up to the
# stack's widest location, ": " (pmodels/mpich v4.1.2 src/mpi/errhan/errutil.c MPIR_Err_print_stack_string)
_MPICH_STACK = re.compile(r"(?P<src>[A-Za-z_]\w{0,120}\(\d{1,7}\))\.*: ?")
# HPE Cray MPICH's error prefix "MPICH ERROR [Rank %d] [job id %s] [%s date] [%s node] - " (Cray MPICH is closed; the
# form is the one its users post, e.g. LUMI and NERSC reports; the date and node may be absent or "[unknown]")
_CRAY_MPICH = re.compile(r"MPICH (?P<lvl>ERROR) \[Rank (?P<rank>\d{1,9})\](?: \[job id [^\]\n]{0,64}\])?(?: \[[^\]\n]{1,40}\])*?"
                         r"(?: \[(?!unknown\])(?P<host>[A-Za-z][\w.\-]{0,62})\])?(?: - |\s*$)")
# MPICH's MPID_Abort head "Abort(%d)%s%s: " with " on node %d" (the MPI_COMM_WORLD rank, whatever its name says) and
# " (rank %d in comm %d)" (the rank in the communicator of that context id; 0 is MPI_COMM_WORLD) (pmodels/mpich
# v4.1.2 src/mpid/ch4/src/ch4_globals.c MPID_Abort; ch3 src/mpid/ch3/src/mpid_abort.c)
_MPID_ABORT = re.compile(r"Abort\(-?\d{1,12}\)(?: on node (?P<rank>\d{1,9}))?(?: \(rank (?:(?P<r2>\d{1,9}) in comm 0|"
                         r"\d{1,9} in comm \d{1,12})\))?: ?")
# MPICH's MPI_Abort text "application called MPI_Abort(%s, %d) - process %d" (src/mpi/init/abort.c): the process is
# the caller's rank in that communicator; in MPI_COMM_WORLD (named, or its handle 0x44000000) the global rank
_MPI_ABORT_WORLD = re.compile(r"application called MPI_Abort\((?:MPI_COMM_WORLD|comm=0x44000000), -?\d{1,12}\) - "
                              r"process (?P<rank>\d{1,9})\b|MPI_ABORT was invoked on rank (?P<r2>\d{1,9}) in "
                              r"communicator MPI_COMM_WORLD\b")
# (Open MPI's "MPI_ABORT was invoked on rank %d in communicator %s" names the rank in that communicator, likewise)
# Ascend CANN's log line "[Level] ModuleName(PID,PName):DateTimeMS [FileName:LineNumber]LogContent" (CANN log
# reference, "log record format": https://www.hiascend.com/document/detail/zh/canncommercial/5046/troublemanagement/
# logreference/atlaslog_24_0008.html; newer CANN adds microseconds, HCCP adds "tid:N," and "func(line) : ")
_CANN_LOG = re.compile(r"\[(?P<level>ERROR|WARNING|INFO|DEBUG|EVENT)\] [A-Z][A-Za-z0-9_]{0,40}\((?P<pid>\d{1,10}),[^)\n]{0,120}\):"
                       r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}(?:\.\d{3})? \[(?P<src>[^\]\n:]{1,200}:\d{1,7})\]\s?"
                       r"(?:tid:\d{1,10},)?(?:[A-Za-z_]\w{0,120}\(\d{1,7}\)\s?:\s?)?")
# Ascend CANN's error-code line "CODE: yyyy-mm-dd-hh:mm:ss.SSS.SSS MESSAGE", in newer CANN "Name_Of_Error(CODE): " after
# "[PID: N] TIME " (or "CODE: [PID: N] TIME "): an error code of the CANN error code reference (EI0006, EJ0001, EE1001,
# EZ9999, E19999: "E", a component letter or digit, four digits)
_CANN_TIME = r"\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d{2,3}){0,2}"
_CANN_CODE = re.compile(r"(?:[A-Z][A-Za-z0-9]{0,40}(?:_[A-Za-z0-9]{1,40}){1,12}\()?(?P<src>E[A-Z1-9]\d{4})\)?: "
                        r"(?:\[PID: (?P<pid>\d{1,10})\] )?(?:" + _CANN_TIME + r"\s)?")
_CANN_PID = re.compile(r"\[PID: (?P<pid>\d{1,10})\] " + _CANN_TIME + r"\s")
# the lines under a CANN error-code line that carry its detail: "CODE[PID: N] TIME (CODE): TEXT" ("EZ9999[PID: 17833]
# 2025-12-23-07:36:19.237.396 (EZ9999):  HCCL_BUFFSIZE is too SMALL, ..."), the same code's message in the error
# manager's record form
_CANN_DETAIL = re.compile(r"(?P<src>E[A-Z1-9]\d{4})\[PID: (?P<pid>\d{1,10})\] " + _CANN_TIME + r"\s\((?P=src)\):\s{1,4}")
# oneCCL's log record (oneapi-src/oneCCL src/common/log/log.cpp write_prefix: strftime "%Y:%m:%d-%H:%M:%S" then
# ":(TID) "; src/common/log/log.hpp LOG_ERROR / LOG_WARN: "|CCL_ERROR| FILE:LINE FUNCTION: MESSAGE")
_ONECCL = re.compile(r"(?:\d{4}:\d\d:\d\d-\d\d:\d\d:\d\d:\((?P<pid>\d{1,10})\) )?\|CCL_(?P<level>ERROR|WARN|INFO|DEBUG|TRACE)\| "
                     r"(?:(?P<src>[\w./\-]{1,200}\.(?:cpp|hpp|cc|h):\d{1,7}) [\w:~<>]{1,160}: )?")
# torch_npu's error-code line "[ERROR] TIME (PID:N, Device:N, RankID:N). ERR<submodule><code> SUBMODULE TEXT" (Ascend/pytorch
# torch_npu/csrc/core/npu/NPUException.cpp formatErrorCode; RankID -1 when no rank is set): its pid, device and rank
_NPU_ERR = re.compile(r"(?:\[ERROR\] )?" + _CANN_TIME + r" \(PID:(?P<pid>\d{1,10}), Device:(?P<dev>-?\d{1,4}), "
                      r"RankID:(?:-1|(?P<rank>\d{1,9}))\)\.? ")
# torch_npu's check prefix "FUNC:FILE:LINE " before its message (Ascend/pytorch torch_npu/csrc/distributed/HCCLUtils.hpp
# HCCL_CHECK_ERROR: __func__, __FILE__, __LINE__; a CMake build names the file compiler_depend.ts)
_FUNC_AT = re.compile(r"[A-Za-z_]\w{0,80}:(?P<src>[\w./\-]{1,300}\.(?:cpp|cc|c|h|hpp|ts):\d{1,6}) (?=[A-Z])")
# Python's warnings.formatwarning: "FILE:LINE: CATEGORY: MESSAGE" (CPython Lib/warnings.py, "%s:%s: %s: %s\n")
_PYWARN = re.compile(r"(?P<src>\S{1,300}\.py:\d{1,7}): (?P<lvl2>(?:[A-Z]\w{0,60})?Warning): "
                     r"|(?P<lvl3>[A-Z]\w{0,60}Warning): ")
"""(the file and line go where a paste kept only the category and message: ``UserWarning: CUDA initialization: ...``;
a bare ``Warning: `` is a message's own word, as NCCL's ``WARN Warning: remote FLID ...``)"""
# c10's and gloo's enforce prefix: "[enforce fail at FILE:LINE] CONDITION. MSG" (c10/util/Exception.cpp,
# gloo/common/logging.cc EnforceNotMet); CAFFE_THROW leaves the condition empty ("] . PytorchStreamWriter ...")
_ENFORCE = re.compile(r"\[enforce fail at [^\]\n]{1,300}:\d{1,6}\]\s*"
                      r"(?:(?![^\n]{0,200}?\.\s+[-\w.]{1,40} vs [-\w.]{1,40}(?:\W|$))[^\n]{0,200}?\.(?:\s+|$))?")
"""(a comparison's condition is kept: ``GLOO_ENFORCE_LE(a, b)`` writes ``a <= b. X vs Y``, the values alone say nothing)"""
# dmesg -x's facility and level ("kern  :err   : "), also as talosctl dmesg prints them after the node
# ("10.0.0.5: kern:     err: [2026-04-22T21:25:20.46Z]: "): util-linux dmesg.c facility/level names
_DMESG_X = re.compile(r"(?:(?P<host>[\w.\-]{1,253}): )?(?:kern|user|daemon|syslog|auth)\s{0,8}:\s{0,8}"
                      r"(?:emerg|alert|crit|err|warn|warning|notice|info|debug)\s{0,8}:\s{0,8}(?:\[[^\]\n]{1,40}\]:?\s{0,4})?")
_EXC_LOWER = re.compile(r"(?:[A-Za-z_]\w{0,60}\.){1,6}[a-z]\w{0,40}(?:error|timeout):\s+")
_DOCKER = re.compile(r"[\w.\-]{1,120}\s+\|\s")
# a row of kubectl describe's Events table: Type, Reason, Age, From, Message, two blanks or more apart
# (k8s.io/kubectl pkg/describe/describe.go DescribeEvents: "Type\tReason\tAge\tFrom\tMessage")
_K8S_EVENT = re.compile(r"(?:Normal|Warning)\s{2,}[A-Za-z]{2,60}\s{2,}\S{1,40}(?: \(x\d{1,6} over \S{1,20}\))?\s{2,}"
                        r"[\w\-/.,:]{1,120}(?: [\w\-/.,:]{1,120}){0,3}\s{2,}")

ERROR_WORDS = re.compile(
    r"\b(?:error|errors|fail|failed|failure|fatal|abort|aborted|aborting|exception|traceback|timed? ?out|timeout|"
    r"killed|kill|segmentation fault|segfault|bus error|core dumped|signal|sig(?:kill|term|segv|bus|abrt)|oom|"
    r"out of memory|denied|refused|unreachable|s?xid|panic|cannot|could not|couldn't|unable to|mismatch|illegal|"
    r"invalid|corrupt(?:ed|ion)?|undefined symbol|crash(?:ed|es)?|no space left|exited with|exits with|exit code|exitcode|return code|died|dead|unhandled|"
    r"not found|not enough|fallen off the bus|no route to host|name or service not known|oomkilled|evicted|"
    r"insufficient|can not|cancell?ed at|no such file or directory|unavailable|no cuda-capable device|"
    # an exception class before its message (RuntimeError: ..., torch.distributed.DistBackendError: ...), in a
    # line whose prefix hid it from the exception's own peel (CPython traceback.format_exception_only: "Cls: msg")
    r"[a-z]\w{0,60}(?:error|exception)(?=: ))\b",
    re.IGNORECASE)
"""Words that make a line look like an error (for :func:`looks_like_error`)."""
# a level word marks a line benign, not a setting a message names ("run with NCCL_DEBUG=INFO for details")
ERROR_STEMS: tuple[str, ...] = (
    "error", "fail", "warn", "fatal", "abort", "exception", "traceback", "timeout", "timed out", "killed", "kill",
    "fault", "bus error", "core dumped", "signal", "sig", "oom", "out of memory", "denied", "refused", "unreachable",
    "xid", "panic", "cannot", "could not", "couldn't", "unable to", "mismatch", "illegal", "invalid", "corrupt",
    "no space left", "exit", "return code", "died", "dead", "unhandled", "not found", "not enough", "critical",
    "undefined symbol", "crash",
    "fallen off the bus", "no route to host", "name or service not known", "oomkilled", "evicted", "insufficient",
    "can not", "cancelled at", "canceled at", "no such file or directory", "unavailable", "no cuda-capable device")
"""Lowercase substrings one of which every line :data:`ERROR_WORDS` matches holds (a cheap first test,
also given to ``grep -F -i`` for large files)."""
_BENIGN = re.compile(r"NCCL (?:INFO|TRACE)|UserWarning|FutureWarning|DeprecationWarning|(?<!=)\bINFO\b|(?<!=)\bDEBUG\b"
                     # a counter or flag row of a status report at zero (nvidia-smi -q: "Uncorrectable Error : 0",
                     # "Remapping Failure Occurred : No"), and a section title of one ("ECC Errors")
                     r"|^\s*[A-Za-z][\w ()/-]{0,60}?(?:error|errors|failure|failures|fault|faults|occurred|exceeded)\s*:\s*"
                     r"(?:0|no|none|n/a|false|disabled)\s*$"
                     # any row of such a report (padded: "Key<spaces>: value", which no exception or log message
                     # writes) whose value says nothing happened ("Access Timeout Recovery : N/A")
                     r"|^\s*[A-Za-z][\w ()/.-]{0,60}?\S\s+:\s*(?:0|no|none|n/a|false|disabled|not supported|not active)\s*$"
                     r"|^\s*(?:[A-Za-z][\w-]{0,30}\s){0,3}errors\s*$"
                     r"|\b(?:0|no) errors?\b|error_file:\s*$|ignore|retrying|will retry"
                     r"|\b(?:exit|return)[ _]?(?:code|status)\s*[:=]?\s*0\b", re.IGNORECASE)  # success


_CRITICAL = re.compile(r"\bCRITICAL\b")
"""Python logging's highest level, as its formats write it (``CRITICAL:root:...``, ``... CRITICAL: ...``)."""


_TIMEOUT_SETTING = re.compile(r"""['"]\w*time_?out\w*['"]\s*:\s*\d|\b\w*time_?out\w*=\d""", re.IGNORECASE)
"""A timeout that is a setting, not an event: a dict or JSON key (torchelastic's launch-config dump
``rdzv_configs : {'timeout': 900}``) or a keyword/variable (``timeout=1800``)."""


@dataclass(frozen=True, slots=True)
class Message:
    """One log line's message and what its prefixes said.

    Attributes:
        text: the message, prefixes removed (what the catalog matches from its start).
        time: seconds since the epoch (UTC as written; no zone conversion) of a full date-time
            prefix, else None. A time of day without a date (glog, syslog) is kept in ``clock``.
        clock: seconds since midnight of the prefix's time of day, or None.
        host: the host of a NCCL header or syslog prefix, or None.
        pid: the process id of a NCCL header or Ray prefix, or None.
        rank: the global rank a prefix names (``[rank3]:``, ``[1,3]<stdout>:``, ``Rank 3]``), or None.
        local_rank: torchrun's ``[default3]:`` local rank, or None.
        dev: NCCL's ``[dev]`` CUDA device of the header, or None.
        level: ``WARN`` / ``INFO`` / ... of a NCCL header, ``E``/``W`` of a glog header, else "".
        src: the ``file.cc:LINE`` of a NCCL header (where NCCL printed it), else "".
        exception: the Python exception class the message followed (``KeyError``,
            ``torch.distributed.DistBackendError``), else "": the line ends a traceback.
    """

    text: str
    time: float | None = None
    clock: float | None = None
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    local_rank: int | None = None
    dev: int | None = None
    level: str = ""
    src: str = ""
    exception: str = ""


def _seconds(d: str, t: str) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(f"{d} {t}", "%Y-%m-%d %H:%M:%S")))
    except ValueError:
        return None


def _clock(t: str) -> float:
    h, m, s = t.split(":")
    return int(h) * 3600 + int(m) * 60 + int(s)


_SPACES = str.maketrans({"\xa0": " ", "\u2009": " ", "\u202f": " "})


_RECORD_TEXT = ("message", "msg", "log", "error", "err", "reason", "detail", "details", "description", "exception",
                "what", "text")
"""The fields of a JSON Lines record that hold its message, in the order they are looked for."""


def _json_record(line: str) -> tuple[str, dict] | None:
    """``(message, record)`` of a line that is one JSON object (a structured logger's record, a container runtime's
    ``{"log": ...}``): the first text field of :data:`_RECORD_TEXT` ("" for a record without one, which is data,
    not a message); None for any other line."""
    body = line.strip()
    if not (body.startswith("{") and body.endswith("}")) or len(body) > 65536:
        return None
    try:
        record = json.loads(body)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    text = next((v for k in _RECORD_TEXT if isinstance(v := record.get(k), str) and v.strip()), "")
    return text, record


def parse_line(line: str) -> Message:
    """Peel every known prefix off ``line`` (without its line ending) and keep their context; a line that is
    one JSON object is its message field, with its ``rank`` and ``host`` (:func:`_json_record`).

    Never raises; a line with no known prefix is its own message.
    """
    if "\xa0" in line or "\u2009" in line or "\u202f" in line:  # a paste from a web page: no-break / thin spaces
        line = line.translate(_SPACES)
    when: float | None = None
    clock: float | None = None
    host = level = src = exc = None
    pid = rank = local = dev = None
    if (rich := _RICH_LEVEL.match(line)) is not None and (path := _RICH_PATH.search(line, rich.end())) is not None:
        level, src, line = rich.group("level"), path.group("src"), line[rich.end():path.start()]
    if line[:1] in "{ " and (rec := _json_record(line)) is not None:
        line, fields = rec[0], rec[1]
        rank = fields["rank"] if isinstance(fields.get("rank"), int) and not isinstance(fields["rank"], bool) else None
        host = next((v for k in ("host", "hostname", "node") if isinstance(v := fields.get(k), str) and v), None)
    text = line
    json_value = False
    for _ in range(12):  # prefixes nest: "[rank3]:[E1126 ...] [PG ID 0 ... Rank 3] RuntimeError: ..."
        p = strip_prefix(text)
        rank = rank if rank is not None else p.rank
        local = local if local is not None else p.local_rank
        host = host if host is not None else p.host
        text = p.text
        for rx in (_MORE, _JSON_KEY, _PASTE, _DOCKER, _K8S_EVENT, _RAY, _SYSLOG, _DMESG_X, _CANN_LOG, _CANN_DETAIL, _CANN_CODE, _CANN_PID, _ONECCL, _NPU_ERR, _FUNC_AT, _OMPI, _OPAL_OUT, _UCX, _CRAY_MPICH, _MPID_ABORT, _MPICH_STACK, _PYWARN, _ENFORCE, _GLOG, _NCCL, _NCCL_BARE, _TOOLS, _C10D_RANK, _USER_RANK, _ELASTIC_OLD, _LOGGER,
                   _WHAT, _EXC, _EXC_LOWER):
            m = rx.match(text)
            if m is None or m.end() == 0 or (rx is _PASTE and exc is not None):  # KeyError: 'labels' keeps its quote
                continue
            g = m.groupdict()
            if (g.get("host") or g.get("host2")) and host is None:
                host = g.get("host") or g["host2"]
            if g.get("pid") and pid is None and g["pid"].isdigit():
                pid = int(g["pid"])
            if g.get("dev") and dev is None:
                dev = int(g["dev"])
            r = g.get("rank") or g.get("r2") or g.get("r3")
            if r and rank is None:
                rank = int(r)
            lv = g.get("level") or g.get("lvl") or g.get("lvl2") or g.get("lvl3") or g.get("lvl4") or g.get("lvl5") or g.get("lvl6")
            if lv:
                level = level or lv
            if g.get("src") and src is None:
                src = g["src"]
            if rx is _GLOG and g.get("t") and clock is None:
                clock = _clock(g["t"])
            if rx is _EXC and exc is None:
                exc = m.group(0).split("(", 1)[0].split("[", 1)[0].rstrip(": \t")
            if rx is _JSON_KEY:
                json_value = True
            text = text[m.end():]
            break
        else:
            break
    m = _ISO.search(line, 0, max(len(line) - len(text), 0))
    if m is not None:
        when, clock = _seconds(m.group("d"), m.group("t")), _clock(m.group("t"))
    text = text.strip().rstrip("`")
    if json_value:  # the field's closing quote (and the comma of the next field), its escaped quotes
        text = text.removesuffix(",").rstrip().removesuffix("}").rstrip().removesuffix('"').replace('\\"', '"')
    if exc is None:  # a bare "KeyError" ends a traceback too (the class is its whole message)
        m = _EXC_BARE.fullmatch(text)
        if m is not None:
            exc = m.group("cls")
    if rank is None and text.startswith(("application called MPI_Abort", "MPI_ABORT was")) and \
            (m := _MPI_ABORT_WORLD.match(text)):
        rank = int(m.group("rank") or m.group("r2"))
    if host is None and (m := _SRUN_TASKS.match(text)) is not None:
        host = m.group("host")  # srun's task status names its node first (kept in the message: entries read it)
    return Message(text, when, clock, host, pid, rank, local, dev, level or "", src or "", exc or "")


_LOADER_FAILED = re.compile(r"version [`'\u2018][\w.@-]{1,120}['\u2019] not found \(required by |undefined symbol: ")
"""The dynamic linker's failures (glibc elf/dl-version.c, elf/dl-lookup.c), an error at any level: NCCL reports a net
or tuner plugin whose dlopen failed on an INFO line (``NET/Plugin : dlerror=%s No plugin found (%s), using internal
implementation``, NCCL 2.19 src/net.cc) and goes on without it."""


def looks_like_error(line: str) -> bool:
    """True when ``line`` reads like an error report: a NCCL ``WARN``, or an error word
    (:data:`ERROR_WORDS`) on a line that is not a NCCL ``INFO`` / Python warning / debug line."""
    if "NCCL WARN" in line or ("CRITICAL" in line and _CRITICAL.search(line) is not None):
        return True
    low = line.lower()
    if not any(s in low for s in ERROR_STEMS):
        return False
    if "time" in low:
        line = _TIMEOUT_SETTING.sub(" ", line)
    return ERROR_WORDS.search(line) is not None and (_BENIGN.search(line) is None or _LOADER_FAILED.search(line) is not None)
