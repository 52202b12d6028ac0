"""The kinds of finding, their severities and the kinds of evidence (ground floor: enums, no I/O).

:class:`Kind` (what a :class:`~hangdbg.model.Finding` says), :class:`Severity` (suspect, waiting,
warning, info) and :class:`SourceKind` (which evidence a finding comes from), each value with its
one-line description, and :data:`KIND_LEVELS` (what each kind is about: a rank, a node, the job).
:mod:`hangdbg.model` re-exports them: the finding model is documented in one place.
"""

from __future__ import annotations

from .enums import DocumentedEnum, Level

__all__ = ["Severity", "SEVERITY_ORDER", "SourceKind", "Kind", "KIND_LEVELS"]


class Severity(DocumentedEnum):
    """How a :class:`Finding` bears on the verdict. The order of the members is the order of
    importance (:data:`SEVERITY_ORDER`)."""

    SUSPECT = ("suspect", "names the cause of the hang or failure; the command exits 3")
    WARNING = ("warning", "abnormal and maybe related: a symptom, a timeout every rank printed, a node not read")
    WAITING = ("waiting", "ranks that only wait for others (waits_for says for whom): never the cause")
    INFO = ("info", "notable, not abnormal")


SEVERITY_ORDER: dict[Severity, int] = {s: i for i, s in enumerate(Severity)}
"""Sort key of :attr:`Finding.severity`, most important first."""


class SourceKind(DocumentedEnum):
    """The kinds of evidence, one reader each (``hangdbg.evidence``)."""

    STACKS = ("stacks", "py-spy dump texts and `hangdbg dump -o` directories (and the joint analysis of all stacks)")
    CORE = ("core", "ELF core files, read with gdb and pystack")
    CORE_JSON = ("core-json", "the JSON document of `hangdbg core` (what `hangdbg collect` brings back per core)")
    STACK_TEXT = ("stack-text", "gdb / pstack / eu-stack / lldb / py-bt / faulthandler / PyTorch `frame #N:` texts")
    NCCL = ("nccl", "NCCL_DEBUG logs")
    TORCH_LOG = ("torch-log", "PyTorch watchdog / desync / torchrun logs and torchelastic error.json files")
    FLIGHT_RECORDER = ("flight-recorder", "PyTorch flight-recorder dumps (JSON or pickle) and fr_trace text output")
    NCCL_RAS = ("nccl-ras", "NCCL RAS reports (`ncclras` client output, NCCL >= 2.24)")
    GPU = ("gpu", "kernel logs with NVIDIA Xid lines and nvidia-smi -q outputs")
    TRACES = ("traces", "per-rank files of the `tracer` package (trace-HOST-RANK-PID.txt)")
    ERROR_LINES = ("error-lines", "every error-looking line of any text log, read with the error catalog (hangdbg/catalog)")
    NODES = ("nodes", "the fan-out itself: nodes of `dump --jobid/--hosts` or `collect` that could not be read")
    CHECK = ("check", "the diagnostics job of `hangdbg check` (collectives, bandwidth, bisection)")
    LAST_STACKS = ("last-stacks", "each rank's latest stack samples that `hangdbg watch --keep-last` keeps under OUT/last/")


class Kind(DocumentedEnum):
    """What a :class:`Finding` says. ``hangdbg schema --kinds`` lists these with their level
    (``level``: what a finding of the kind is about, :data:`KIND_LEVELS`) and description."""

    level: Level

    # the stack analysis (dump, analyze, demo, core, report)
    MISSING = ("missing", "ranks expected on the examined nodes that have no process (never started, or exited)")
    JOB_ENDED = ("job-ended", "every rank found alive exited before its stack was read: the job ended (or was killed) "
                              "while hangdbg was dumping; nothing is hung now, no rank is a suspect")
    DEADLOCK = ("deadlock", "a rank whose thread waits for a lock that another of its threads waits on too")
    GIL_HOLDER = ("gil-holder", "a rank whose other thread holds the GIL (or spins) while its main thread waits in a collective")
    OUTSIDE_COLLECTIVE = ("outside-collective", "ranks in no collective while other ranks wait in one")
    DIFFERENT_COLLECTIVE = ("different-collective",
                            "ranks in another collective, or the same one from another call site, than the majority")
    BEHIND = ("behind", "ranks in the same place as others but at a lower loop counter (--locals)")
    AHEAD = ("ahead", "a few ranks at a higher loop counter than the majority in the same place (--locals)")
    P2P_MISMATCH = ("p2p-mismatch", "a point-to-point op nobody matches: a rank that never sent (or received) what its "
                    "peer waits for, or that receives from the wrong peer")
    STORE_KEY_MISSING = ("store-key-missing", "a rank that never set the store key another rank waits for")
    WAIT_CYCLE = ("wait-cycle", "ranks that wait for each other in a cycle nothing else explains (send/send, lock order)")
    UNDECIDED = ("undecided", "the stacks cannot decide between a hang and a slow step, or hide a C++ wait: what to collect")
    WAITING = ("waiting", "ranks that wait (in a collective, a p2p op, a store, a rendezvous) for the ranks in waits_for")
    UNREADABLE = ("unreadable", "ranks whose stack could not be taken (the error says why and how to fix it)")
    NODE_FAILED = ("node-failed", "a node of the fan-out that could not be read (unreachable, error, timeout)")
    NODE_UNHEALTHY = ("node-unhealthy", "a node whose rank sleeps uninterruptibly (D state: a wedged driver or file "
                      "system): drain the host (the scontrol line is in the action), not the rank's fault")
    NOT_SAVED = ("not-saved", "files of the output directory that could not be written (disk full, read-only, quota, "
                 "permission): the analysis is complete, only these files are missing on disk")
    STALL = ("stall", "hangdbg watch: the job stopped making progress (a log that stopped growing, stale heartbeats, or "
             "stacks unchanged while ranks wait); names the suspects of the dump taken then. In a post-mortem: a log "
             "without an error line that stops at a step that can wait forever (what that step waits for)")
    MIXED_JOBS = ("mixed-jobs", "the files given look like several unrelated jobs (world sizes, NCCL versions, dates differ)")
    # stack texts and core files
    CRASH = ("crash", "a backtrace text (gdb, lldb) shows a process stopped by a fatal signal")
    FATAL_ERROR = ("fatal-error", "faulthandler printed `Fatal Python error` for a rank")
    CPP_EXCEPTION = ("cpp-exception", "a PyTorch C++ exception trace (`frame #N:` lines)")
    ABORT_HANG = ("abort-hang", "a process that hangs in an NCCL communicator abort/destroy (ProcessGroupNCCL::abort)")
    CUDA_ERROR = ("cuda-error", "a failed CUDA check in a native stack (c10_cuda_check_implementation): broken CUDA context")
    COMM_INIT_FAILED = ("comm-init-failed", "a C++ trace of a failed NCCL communicator creation (broadcastUniqueNCCLID)")
    CUDA_STUCK = ("cuda-stuck", "a thread spinning in the CUDA driver under a CUDA runtime call (GPU not progressing)")
    CORE_CRASH = ("core-crash", "a core file of a process that crashed or aborted (SIGSEGV, SIGABRT, ...)")
    CORE_KILLED = ("core-killed", "a core file of a process that another process killed with a core-dumping signal")
    CORE_ON_DEMAND = ("core-on-demand", "a core file taken on demand (gcore): the process did not crash")
    CORE_UNREADABLE = ("core-unreadable", "a core file that could not be read (truncated, wrong executable, ...)")
    # NCCL_DEBUG logs
    NCCL_INIT_INCOMPLETE = ("nccl-init-incomplete", "ranks whose communicator init started but never completed")
    NCCL_CONNECT_FAILED = ("nccl-connect-failed", "a peer NCCL could not connect to, named by host")
    NCCL_SETUP_DIFFERS = ("nccl-setup-differs", "hosts whose NCCL set-up (version, plugin, interfaces) differs")
    NCCL_LAGGING = ("nccl-lagging", "ranks whose last opCount in a communicator lags (or leads) the others")
    NCCL_SLICE_DIFFERS = ("nccl-slice-differs", "the --split-on slice where a rank's collective counts first differ")
    NCCL_WARN = ("nccl-warn", "NCCL WARN lines")
    NCCL_ABORTED = ("nccl-aborted", "ranks that aborted a communicator")
    NCCL_INIT_FAILED = ("nccl-init-failed", "ranks whose communicator init returned an error (a `-> N` chain through init.cc)")
    NCCL_BOOTSTRAP = ("nccl-bootstrap", "a bootstrap problem: a rank checked in twice, a bootstrap on a virtual interface")
    NCCL_P2P_BLOCKED = ("nccl-p2p-blocked", "a single-node job that stops after GPU set-up: PCIe ACS / IOMMU blocking P2P")
    NCCL_OP_MISMATCH = ("nccl-op-mismatch", "ranks of a communicator that issued another collective (type, count, "
                        "datatype, reduction or root) at the same opCount")
    # PyTorch and torchrun logs
    CHILD_FAILED = ("child-failed", "torchrun's first failed rank (ChildFailedError), with its exit code or signal")
    CHILD_ERROR = ("child-error", "the earliest torchelastic error.json that no torchrun summary names")
    DESYNC_REPORT = ("desync-report", "ranks named by PyTorch's desync debug report")
    SEQ_LAGGING = ("seq-lagging", "ranks whose last SeqNum in a process group lags (or leads) the others")
    NO_TIMEOUT = ("no-timeout", "ranks that printed no watchdog timeout while the others did")
    DUMP_SIGNAL = ("dump-signal", "the rank that detected a timeout first and signalled the others to dump")
    WATCHDOG_TIMEOUT = ("watchdog-timeout", "ranks whose collective watchdog timed out (usually a symptom)")
    COLLECTIVE_MISMATCH = ("collective-mismatch", "a rank running another collective (op, sizes, sequence number) than "
                           "the others, per TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check")
    MODEL_MISMATCH = ("model-mismatch", "a rank whose DDP model (parameter count) differs from the other ranks'")
    COLLECTIVE_DATA = ("collective-data", "a collective delivered wrong data (gathered values contradict a rank's own): "
                       "the transport, not a rank")
    WATCHDOG_HUNG = ("watchdog-hung", "the NCCL watchdog or a process group's abort itself hung (heartbeat monitor)")
    BARRIER_MISSING = ("barrier-missing", "ranks that did not reach a monitored_barrier in time (rank 0 names them)")
    RANK_ERROR = ("rank-error", "a rank's own error: a NCCL error raised to Python, an application line naming the rank")
    OP_MISMATCH = ("op-mismatch", "ranks that run another collective (type or size) at the same SeqNum of a process group")
    FIRST_COLLECTIVE = ("first-collective", "the first collective of a process group never completed (init/connectivity)")
    LOG_INCOMPLETE = ("log-incomplete", "ranks whose only trace in the logs is a cut-off line: what they did is unknown")
    # flight recorder
    FR_MISMATCH = ("fr-mismatch", "the first collective or p2p exchange whose type, sizes or dtypes differ across ranks")
    FR_MISSING_RANK = ("fr-missing-rank", "ranks with no dump, whose record stops early, or that never posted a p2p op")
    FR_STUCK = ("fr-stuck", "collectives recorded but not completed")
    FR_CONTRADICTS = ("fr-contradicts", "the flight recorder and the stacks disagree about a rank")
    FR_AGREES = ("fr-agrees", "the flight recorder and the stacks agree")
    # NCCL RAS reports
    RAS_MISMATCH = ("ras-mismatch", "ranks of a communicator whose operation counts or status differ (NCCL RAS)")
    RAS_ERROR = ("ras-error", "ranks that reported an NCCL initialization or asynchronous error (NCCL RAS)")
    RAS_UNREACHABLE = ("ras-unreachable", "ranks or processes RAS got no data from (INCOMPLETE) or considers dead")
    RAS_OK = ("ras-ok", "NCCL RAS saw every communicator running with no error: NCCL's view only, not the job's")
    # kernel logs
    GPU_LOST = ("gpu-lost", "a GPU fell off the bus or is unusable until reset (Xid 79, the driver's report without a "
                "number, nvidia-smi cannot open it, NV_ERR_RESET_REQUIRED)")
    XID = ("xid", "an NVIDIA Xid error, with its meaning and the action that clears it")
    ECC = ("ecc", "uncorrectable ECC errors, failed or pending row remapping (nvidia-smi -q)")
    PCIE_AER = ("pcie-aer", "PCIe errors a device or port reported (kernel AER): a GPU's link or a root port")
    # hangdbg check
    CHECK_FAILED = ("check-failed", "hangdbg check: a node or GPU that fails the diagnostics job (by itself, or makes the "
                    "others fail), isolated by bisection; the action holds the sbatch --exclude value")
    CHECK_INTERFACE = ("check-interface", "hangdbg check: the job passes on another network interface than the one configured")
    CHECK_SLOW = ("check-slow", "hangdbg check: ranks, GPUs or nodes far below the median of a figure (bandwidth, "
                  "matmul TFLOP/s, memory copy)")
    CHECK_SETUP = ("check-setup", "hangdbg check: the launch does not fit the nodes (more ranks than visible GPUs with "
                   "nccl, two backends in one run) or a node's set-up differs from the others'")
    # tracer files
    TRACE_STOPPED = ("trace-stopped", "trace files without the tracer's end line: stopped, killed or still running")
    TRACE_DIVERGED = ("trace-diverged", "the first traced call that not all ranks made, or ranks whose trace stops elsewhere")
    # the error catalog (any text log)
    LAUNCH_ERROR = ("launch-error", "a launch configuration mistake a known message names (two ranks on one GPU, an "
                    "invalid device ordinal, a port in use): blames the launch, no rank or node")
    HARDWARE_ERROR = ("hardware-error", "a GPU, NIC or link fault a known message names, with its host and GPU")
    RESOURCE_ERROR = ("resource-error", "an exhausted or missing resource of a host a known message names (/dev/shm, "
                      "memory, disk, limits, a library)")
    KNOWN_ERROR = ("known-error", "a rank's own failure a known message names (a CUDA error, out of memory, an exception)")
    PEER_ERROR = ("peer-error", "a known message that says a peer failed or went away: the rank that printed it is a victim")
    ECHO = ("echo", "a known consequence of an earlier failure (a timeout, SIGTERM from the agent, an abort)")
    UNRECOGNISED_ERROR = ("unrecognised-error", "an error-looking line that no catalog entry matches, quoted")
    GPU_BLOCKED = ("gpu-blocked", "a rank whose GPU never started a collective (flight recorder: scheduled, not "
                   "started) while earlier work on its own stream runs: no peer is involved")
    # hangdbg watch: a slow (not hung) rank, and where every rank was before the job ended
    STRAGGLER = ("straggler", "hangdbg watch: a rank chronically slower than the others (later at each step's sync "
                 "point, or more compute per step): how much, since which step")
    LAST_STACKS = ("last-stacks", "watch --keep-last: where each rank was in its last stack sample before the job "
                   "ended, and how long before the end; a warning for ranks that stopped answering before the others")


KIND_LEVELS: dict[Level, str] = {
    Level.RANK: "missing deadlock gil-holder outside-collective different-collective behind ahead store-key-missing waiting unreadable "
                "crash fatal-error cpp-exception abort-hang comm-init-failed core-crash core-killed core-on-demand "
                "core-unreadable nccl-init-incomplete nccl-lagging nccl-slice-differs nccl-warn nccl-aborted nccl-init-failed "
                "child-failed child-error desync-report seq-lagging no-timeout dump-signal watchdog-timeout watchdog-hung "
                "barrier-missing rank-error log-incomplete fr-missing-rank fr-contradicts fr-agrees ras-error ras-unreachable "
                "trace-stopped known-error peer-error echo unrecognised-error straggler last-stacks",
    Level.NODE: "node-failed node-unhealthy nccl-connect-failed nccl-p2p-blocked check-failed check-slow resource-error",
    Level.GPU: "cuda-error cuda-stuck gpu-lost xid ecc pcie-aer hardware-error gpu-blocked",
    Level.JOB: "p2p-mismatch wait-cycle undecided stall mixed-jobs nccl-setup-differs nccl-bootstrap nccl-op-mismatch "
               "collective-mismatch model-mismatch collective-data op-mismatch first-collective fr-mismatch fr-stuck "
               "ras-mismatch ras-ok check-interface check-setup trace-diverged launch-error job-ended",
    Level.TOOL: "not-saved",
}
"""The kinds of each :class:`Level` (values, space-separated): every :class:`Kind` is in exactly one."""
for _level, _values in KIND_LEVELS.items():
    for _value in _values.split():
        Kind(_value).level = _level
del _level, _values, _value
