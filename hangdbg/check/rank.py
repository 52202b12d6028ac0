"""One rank of ``hangdbg check``'s diagnostics job (run as a script: stdlib and torch only).

The node launcher (:mod:`hangdbg.check.node`) starts one of these per GPU (or per slot
on CPU) with the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``) and ``HANGDBG_CHECK_SLOT`` (the GPU index, or slot, this rank tests). Each step
prints one line ``HANGDBG-CHECK {json}`` on stdout as it ends::

    {"step": "all_reduce", "rank": 3, "ok": false, "seconds": 30.0, "timeout": true,
     "error": "no result within 30 s"}

Steps, in order: ``facts`` (host, device, memory, NUMA), ``alloc`` (allocate, fill, check and
free a tensor: most of the free memory of the GPU, ``--alloc-bytes`` on CPU), ``interface``
(the ``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME`` of the backend names interfaces this node
has), ``rendezvous`` (every rank but 0 opens a TCP connection to ``MASTER_ADDR:MASTER_PORT``,
retrying until ``--init-timeout``, so a rank that cannot reach it says so instead of timing out
in the store client; then every rank checks in on rank 0's TCP store and waits for the others:
a rank that failed an earlier step checks in with its failure, and the others stop waiting at
once instead of after ``--init-timeout``), ``init`` (``init_process_group``), ``barrier``, ``all_reduce`` / ``all_gather`` / ``broadcast`` of known
tensors with the result checked on every rank, ``send_recv`` around the ring (each rank sends
to rank+1 and receives from rank-1), and ``bandwidth``: an all_reduce of ``--size`` bytes timed
over ``--iters`` iterations (algbw = size / time; busbw = algbw x 2(n-1)/n, the nccl-tests
convention) and the same ring exchange of ``--size`` bytes, timed per rank (the bandwidth of
the link from rank-1 to this rank); ``node_bandwidth``: the same all_reduce within each node (two
nodes or more); then the steps of this rank's device alone (:class:`HealthSteps`: ``matmul``
TFLOP/s, device-memory ``copy`` GB/s, ``host_copy`` host<->device GB/s; ``"health": false`` in
the job leaves them out).

Hard timeouts: the process group's own timeout is ``--init-timeout`` for the rendezvous and
``--timeout`` for the steps after it; a watchdog thread ends the process (exit status 4) when a
step is still running ``--timeout`` + 5 seconds after it began (``--init-timeout`` + 5 for init),
so a rank never outlives its budget even when torch does not raise. A rank stopped by a signal
(SIGSTOP) cannot print anything: the node launcher reports it.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder (hangdbg/check/) is sys.path[0], and its bisect.py would
# shadow the standard library's (random and statistics import it): drop it before they load.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

import json  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from datetime import timedelta  # noqa: E402
from typing import Any  # noqa: E402

PREFIX = "HANGDBG-CHECK "
STEPS = ("facts", "alloc", "interface", "rendezvous", "init", "barrier", "all_reduce", "all_gather", "broadcast", "send_recv",
         "bandwidth", "node_bandwidth", "matmul", "copy", "host_copy")
_lock = threading.Lock()


def _load_health_steps() -> type:
    """:class:`HealthSteps` of ``rank_health.py`` beside this file, loaded by path (this folder is
    off ``sys.path``, see above; the script imports nothing of hangdbg)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hangdbg_check_rank_health", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "rank_health.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HealthSteps


HealthSteps: Any = _load_health_steps()


def emit(step: str, ok: bool, seconds: float, **fields) -> None:
    """One result line on stdout (whole, flushed)."""
    doc = {"step": step, "rank": int(os.environ.get("RANK", "0")), "ok": ok, "seconds": round(seconds, 6), **fields}
    with _lock:
        sys.stdout.write(PREFIX + json.dumps(doc, default=str) + "\n")
        sys.stdout.flush()


class Watchdog:
    """Ends the process when the current step overruns its hard deadline."""

    def __init__(self) -> None:
        self.step = "start"
        self.limit = 0.0
        self.started = time.monotonic()
        self._cond = threading.Condition()
        threading.Thread(target=self._watch, daemon=True).start()

    def begin(self, step: str, limit: float) -> None:
        with self._cond:
            self.step, self.limit, self.started = step, limit, time.monotonic()
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while True:
                left = self.started + self.limit - time.monotonic() if self.limit else None
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
        emit(self.step, False, time.monotonic() - self.started, timeout=True,
             error=f"no result within {self.limit:g} s (hangdbg's hard timeout)")
        os._exit(4)


def _numa_of_pci(bus_id: str) -> int | None:
    try:
        with open(f"/sys/bus/pci/devices/{bus_id.lower()}/numa_node") as f:
            value = int(f.read().strip())
        return value if value >= 0 else None
    except (OSError, ValueError):
        return None


def _numa_of_cpus() -> list[int]:
    """NUMA nodes of the CPUs this process may run on (Linux sysfs)."""
    try:
        allowed = os.sched_getaffinity(0)
        nodes = []
        base = "/sys/devices/system/node"
        for name in sorted(os.listdir(base)):
            if name.startswith("node") and name[4:].isdigit():
                with open(f"{base}/{name}/cpulist") as f:
                    cpus = _cpulist(f.read())
                if cpus & allowed:
                    nodes.append(int(name[4:]))
        return nodes
    except (OSError, ValueError):
        return []


def _cpulist(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def facts(torch, device) -> dict:
    out = {
        "hostname": socket.gethostname(), "pid": os.getpid(), "torch": torch.__version__,
        "slot": os.environ.get("HANGDBG_CHECK_SLOT"), "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "device": str(device), "cpus": len(os.sched_getaffinity(0)), "numa": _numa_of_cpus(),
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME"), "NCCL_SOCKET_IFNAME": os.environ.get("NCCL_SOCKET_IFNAME"),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        bus = getattr(props, "pci_bus_id", None)
        if bus is None and hasattr(props, "pci_domain_id"):
            bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        out.update(gpu_name=props.name, gpu_memory=props.total_memory, gpu_uuid=str(getattr(props, "uuid", "")) or None,
                   gpu_pci=bus, gpu_numa=_numa_of_pci(bus) if isinstance(bus, str) else None)
    return out


def connect_store(dist, rank: int, world: int, addr: str, port: int, limit: float):
    """Rank 0: the TCP store's server; the others: reach it (a plain TCP connection first, so
    that an unreachable address is an error of its own: ``ConnectionError``), then its client."""
    if rank != 0:
        end = time.monotonic() + limit
        last = "no attempt"
        while True:
            try:
                with socket.create_connection((addr, port), timeout=min(5.0, limit)):
                    break
            except OSError as exc:
                last = f"{type(exc).__name__}: {exc.strerror or exc}"
            if time.monotonic() >= end:
                raise ConnectionError(f"cannot reach the rendezvous at {addr}:{port} within {limit:g} s: {last}")
            time.sleep(0.2)
    return dist.TCPStore(addr, port, world, rank == 0, timedelta(seconds=limit), wait_for_workers=False)


def announce(dist, dog: Watchdog, rank: int, world: int, addr: str, port: int, init_timeout: float, failed: str) -> None:
    """A rank that failed before the rendezvous checks in with its failure, so that the others
    stop waiting for it at once (best effort: an unreachable store is left alone)."""
    dog.begin("announce", init_timeout + 5)
    try:
        store = connect_store(dist, rank, world, addr, port, min(init_timeout, 30.0))
        store.set(f"hangdbg/in/{rank}", failed[:2000])
        store.add("hangdbg/failed", 1)
        store.add("hangdbg/in", 1)
        if rank == 0:  # the store lives in this process: keep it until the others have read it
            end = time.monotonic() + init_timeout
            while store.add("hangdbg/in", 0) < world and time.monotonic() < end:
                time.sleep(0.1)
            time.sleep(1.0)
    except Exception:
        pass


class Job:
    """The diagnostics job's parameters (``hangdbg.check.node.CheckJob``, given as JSON: the only
    argument of this script). Seconds: ``init_timeout``, ``timeout``; bytes: ``size``,
    ``alloc_bytes``."""

    FIELDS = {"backend": str, "init_timeout": float, "timeout": float, "size": int, "iters": int, "alloc_bytes": int,
              "health": bool}

    def __init__(self, backend: str = "auto", init_timeout: float = 120.0, timeout: float = 30.0, size: int = 64 << 20,
                 iters: int = 5, alloc_bytes: int = 64 << 20, health: bool = True) -> None:
        self.backend, self.init_timeout, self.timeout = backend, init_timeout, timeout
        self.size, self.iters, self.alloc_bytes, self.health = size, iters, alloc_bytes, health

    @classmethod
    def from_json(cls, text: str) -> "Job":
        """The job of ``text`` (a JSON object of :attr:`FIELDS`; missing ones keep their default).

        Raises:
            ValueError: not a JSON object, an unknown field, a value of the wrong type.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) - set(cls.FIELDS):
            raise ValueError(f"not a job: {text[:200]!r}")
        return cls(**{k: cls.FIELDS[k](v) for k, v in data.items()})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        job = Job.from_json(argv[0] if argv else "{}")
    except ValueError as exc:
        print(f"usage: rank.py JOB_JSON ({exc})", file=sys.stderr)
        return 2
    dog = Watchdog()
    dog.begin("facts", job.init_timeout + 5)
    torch, dist, device = _start(job, dog)
    ok = RankCheck(job, dog, torch, dist, device).run()
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # no atexit: a process group torn down by a failed peer may hang in its destructor


def _start(job: Job, dog: Watchdog):
    """The ``facts`` step: torch imported, the device chosen (``job.backend`` resolved), the facts
    printed; ``(torch, torch.distributed, device)``. A rank that cannot take part (no torch, no
    GPU) says why, tells the others not to wait, and exits 1."""
    t0 = time.monotonic()
    try:
        import torch
        import torch.distributed as dist

        use_cuda = job.backend == "nccl" or (job.backend == "auto" and torch.cuda.is_available())
        job.backend = "nccl" if use_cuda else "gloo"
        if use_cuda and torch.version.cuda is None:
            raise SetupFailed("cpu-only", f"--backend nccl needs CUDA: torch {torch.__version__} is a CPU-only build")
        if use_cuda and not torch.cuda.is_available():
            raise RuntimeError(f"--backend nccl needs a GPU: torch {torch.__version__} (CUDA {torch.version.cuda}) sees none "
                               f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}; is the driver loaded, "
                               "the GPU on the bus?)")
        device = torch.device("cuda", _slot()) if use_cuda else torch.device("cpu")
        if use_cuda:
            torch.cuda.set_device(device)
        emit("facts", True, time.monotonic() - t0, backend=job.backend, **facts(torch, device))
        return torch, dist, device
    except Exception as exc:  # no torch, no GPU: the rank cannot take part
        text = _error(exc)
        emit("facts", False, time.monotonic() - t0, error=text, **_setup(exc))
        if "torch.distributed" in sys.modules:  # torch is there: tell the others not to wait
            announce(sys.modules["torch.distributed"], dog, int(os.environ.get("RANK", "0")),
                     int(os.environ.get("WORLD_SIZE", "1")), os.environ.get("MASTER_ADDR", "127.0.0.1"),
                     int(os.environ.get("MASTER_PORT", "29500")), job.init_timeout,
                     f"failed facts: {text.splitlines()[0] if text else ''}")
        sys.stdout.flush()
        os._exit(1)


class RankCheck(HealthSteps):
    """The steps after ``facts``, each printed as it ends (:func:`emit`): ``alloc``, ``interface``,
    ``rendezvous``, ``init``, the collectives with their results checked, ``bandwidth``."""

    COLLECTIVES = ("barrier", "all_reduce", "all_gather", "broadcast", "send_recv", "bandwidth", "node_bandwidth")
    HEALTH = ("matmul", "copy", "host_copy")

    def __init__(self, job: Job, dog: Watchdog, torch, dist, device) -> None:
        self.job, self.dog, self.torch, self.dist, self.device = job, dog, torch, dist, device
        self.use_cuda = job.backend == "nccl"
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.addr, self.port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self.failures: list[str] = []
        self.stores: list = []
        self.group: list = []

    def run(self) -> bool:
        """Every step in order; False when one failed (the later ones are not run)."""
        job = self.job
        if not (self.step("alloc", self.alloc) and self.step("interface", self.interface)):
            announce(self.dist, self.dog, self.rank, self.world, self.addr, self.port, job.init_timeout, self.failures[-1])
            return False
        ok = self.step("rendezvous", self.rendezvous, job.init_timeout) and self.step("init", self.init, job.init_timeout)
        for name in self.COLLECTIVES + (self.HEALTH if job.health else ()):
            ok = ok and self.step(name, getattr(self, name))
        self.dog.begin("end", job.timeout + 5)
        if ok:
            try:
                self.dist.destroy_process_group()
            except Exception:
                pass
        return ok

    def step(self, name: str, fn, limit: float | None = None) -> bool:
        """Run one step under the watchdog (``limit`` seconds, default the job's timeout) and print
        its result; a wrong result (``wrong`` in what it returns) fails it."""
        self.dog.begin(name, (limit or self.job.timeout) + 5)
        start = time.monotonic()
        try:
            fields = fn() or {}
        except Exception as exc:
            took = time.monotonic() - start
            text = _error(exc)
            emit(name, False, took, error=text, timeout=_is_timeout(text))
            self.failures.append(f"failed {name}: {text.splitlines()[0] if text else ''}")
            return False
        bad = fields.pop("wrong", None)
        if bad:
            self.failures.append(f"failed {name}: {bad}")
        emit(name, bad is None, time.monotonic() - start, **({"error": bad, "wrong_result": True} if bad else {}), **fields)
        return bad is None

    def alloc(self) -> dict:
        torch = self.torch
        free: int | None
        total: int | None
        if self.use_cuda:
            free, total = torch.cuda.mem_get_info()
            nbytes = int(free * 0.9) // 4 * 4
        else:
            free = total = None
            nbytes = self.job.alloc_bytes // 4 * 4
        t = torch.full((nbytes // 4,), 1.5, dtype=torch.float32, device=self.device)
        got = float(t[:: max(1, t.numel() // 1024)].sum())
        want = 1.5 * len(range(0, t.numel(), max(1, t.numel() // 1024)))
        del t
        if self.use_cuda:
            torch.cuda.empty_cache()
        self.sync()
        out: dict = {"bytes": nbytes, "free_bytes": free, "total_bytes": total}
        if got != want:
            out["wrong"] = f"the tensor read back {got}, not {want}"
        return out

    def interface(self) -> dict:
        names = {n for _, n in socket.if_nameindex()}
        var = "NCCL_SOCKET_IFNAME" if self.use_cuda else "GLOO_SOCKET_IFNAME"
        value = os.environ.get(var)
        if value and not _ifname_matches(var, value, names):
            raise RuntimeError(f"{var}={value} names no interface of this node (it has {', '.join(sorted(names))})")
        return {"variable": var, "value": value}

    def rendezvous(self) -> dict:
        store = connect_store(self.dist, self.rank, self.world, self.addr, self.port, self.job.init_timeout)
        self.stores.append(store)
        try:
            return self.check_in(store)
        except TimeoutError:
            raise
        except Exception as exc:  # the store's host (rank 0) went away while this rank waited
            raise TimeoutError(f"stopped waiting: the rendezvous host (rank 0) went away: {_error(exc)}") from None

    def check_in(self, store) -> dict:
        """Check in on rank 0's store and wait for every rank; a rank that failed earlier checked
        in with its failure, and then nobody waits any longer."""
        rank, world = self.rank, self.world
        store.set(f"hangdbg/in/{rank}", "ok")
        store.add("hangdbg/in", 1)
        end = time.monotonic() + self.job.init_timeout + (2.0 if rank == 0 else 0.0)  # the host leaves last
        while True:
            if store.add("hangdbg/failed", 0) > 0:
                said = [(r, store.get(f"hangdbg/in/{r}").decode(errors="replace")) for r in range(world)
                        if store.check([f"hangdbg/in/{r}"])]
                bad = "; ".join(f"rank {r} {text}" for r, text in said if text != "ok")
                if rank == 0:  # the store lives here: keep it until every rank has read the news
                    while store.add("hangdbg/in", 0) < world and time.monotonic() < end:
                        time.sleep(0.1)
                    time.sleep(0.5)
                raise TimeoutError(f"stopped waiting: {bad[:1000]}")
            if store.add("hangdbg/in", 0) >= world:
                return {"address": f"{self.addr}:{self.port}", "hosts_store": rank == 0}
            if time.monotonic() >= end:
                missing = [r for r in range(world) if not store.check([f"hangdbg/in/{r}"])]
                raise TimeoutError(f"ranks {missing[:32]} did not check in within {self.job.init_timeout:g} s")
            time.sleep(0.1)

    def init(self) -> dict:
        dist = self.dist
        kw = {"device_id": self.device} if self.use_cuda else {}  # nccl: the rank's own GPU, never a guess by rank
        dist.init_process_group(self.job.backend, store=dist.PrefixStore("pg", self.stores[0]), rank=self.rank,
                                world_size=self.world, timeout=timedelta(seconds=self.job.init_timeout), **kw)
        # the steps run in a group of every rank whose timeout is the job's (the default group's
        # is the init timeout, which covers the ranks' different start times)
        self.group.append(dist.new_group(timeout=timedelta(seconds=self.job.timeout)))
        return {"world_size": dist.get_world_size(), "backend": dist.get_backend()}

    def barrier(self) -> dict:
        self.dist.barrier(group=self.group[0])
        return {}

    def all_reduce(self) -> dict:
        t = self.torch.full((1024,), float(self.rank + 1), device=self.device)
        self.dist.all_reduce(t, group=self.group[0])
        self.sync()
        want = self.world * (self.world + 1) / 2
        wrong = int((t != want).sum())
        return {"wrong": f"{wrong} of 1024 values differ from {want:g} (first {float(t[0]):g})"} if wrong else {}

    def all_gather(self) -> dict:
        torch, world = self.torch, self.world
        t = torch.tensor([float(self.rank)], device=self.device)
        outs = [torch.zeros(1, device=self.device) for _ in range(world)]
        self.dist.all_gather(outs, t, group=self.group[0])
        self.sync()
        got = [int(o.item()) for o in outs]
        return {"wrong": f"gathered {got[:16]}, not ranks 0..{world - 1} in order"} if got != list(range(world)) else {}

    def broadcast(self) -> dict:
        torch, device = self.torch, self.device
        t = torch.arange(1024, dtype=torch.float32, device=device) if self.rank == 0 else torch.zeros(1024, device=device)
        self.dist.broadcast(t, 0, group=self.group[0])
        self.sync()
        wrong = int((t != torch.arange(1024, dtype=torch.float32, device=device)).sum())
        return {"wrong": f"{wrong} of 1024 values differ from rank 0's"} if wrong else {}

    def ring(self, n: int) -> tuple[float, Any, int]:
        """Send ``n`` floats to rank+1 and receive as many from rank-1: seconds, the buffer, rank-1."""
        dist, group, rank = self.dist, self.group[0], self.rank
        right, left = (rank + 1) % self.world, (rank - 1) % self.world
        t = self.torch.full((n,), float(rank), device=self.device)
        buf = self.torch.empty(n, device=self.device)
        start = time.monotonic()
        if self.use_cuda:  # NCCL: the send and the receive in one group call (no ordering deadlock)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, right, group), dist.P2POp(dist.irecv, buf, left, group)])
            for req in reqs:
                req.wait()
            self.sync()
            return time.monotonic() - start, buf, left
        if rank % 2 == 0:  # gloo pairs: even ranks send first, odd ranks receive first
            s = dist.isend(t, right, group=group)
            r = dist.irecv(buf, left, group=group)
        else:
            r = dist.irecv(buf, left, group=group)
            s = dist.isend(t, right, group=group)
        r.wait()
        took = time.monotonic() - start
        s.wait()
        return took, buf, left

    def send_recv(self) -> dict:
        if self.world == 1:
            return {"skipped": "one rank"}
        _, buf, left = self.ring(1024)
        wrong = int((buf != float(left)).sum())
        return {"wrong": f"{wrong} of 1024 values from rank {left} are wrong"} if wrong else {"from_rank": left}

    def node_bandwidth(self) -> dict:
        """The bandwidth all_reduce within each node (its ranks only: NVLink/PCIe, no network),
        for nodes of two or more ranks; the same figures as :meth:`bandwidth` (nccl-tests'
        algbw and busbw). Every rank creates every node's group (``new_group`` is collective)."""
        sizes = [int(x) for x in os.environ.get("HANGDBG_CHECK_NODE_SIZES", "").split(",") if x.isdigit()]
        if len(sizes) < 2 or sum(sizes) != self.world:
            return {"skipped": "one node: the bandwidth step measured it" if len(sizes) == 1 else "node sizes unknown"}
        mine, base = None, 0
        for size in sizes:
            group = self.dist.new_group(list(range(base, base + size)), timeout=timedelta(seconds=self.job.timeout))
            if base <= self.rank < base + size:
                mine = (group, size)
            base += size
        if mine is None or mine[1] < 2:
            return {"skipped": "one rank on this node"}
        group, size = mine
        return {**self._all_reduce_bw(group, size), "ranks": size, "scope": "node"}

    def _all_reduce_bw(self, group, size: int) -> dict:
        """An all_reduce of ``--size`` bytes in ``group`` (``size`` ranks) timed over ``--iters``
        after a warm-up: the mean time, algbw = bytes / time, busbw = algbw x 2(n-1)/n."""
        dist, job = self.dist, self.job
        n = max(1, job.size // 4)
        nbytes = n * 4
        t = self.torch.ones(n, device=self.device)
        dist.all_reduce(t, group=group)  # warm-up
        self.sync()
        times = []
        for _ in range(job.iters):
            dist.barrier(group=group)
            start = time.monotonic()
            dist.all_reduce(t, group=group)
            self.sync()
            times.append(time.monotonic() - start)
        avg = sum(times) / len(times)
        algbw = nbytes / avg / 1e9
        return {"bytes": nbytes, "iters": job.iters, "time_s": avg, "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (size - 1) / size}

    def bandwidth(self) -> dict:
        dist, group, world, job = self.dist, self.group[0], self.world, self.job
        if world == 1:
            return {"skipped": "one rank: no link to measure"}  # an all_reduce of one rank moves no byte
        out = self._all_reduce_bw(group, world)
        n = out["bytes"] // 4
        p2p = []
        for _ in range(max(1, job.iters)):
            dist.barrier(group=group)
            took, _buf, left = self.ring(n)
            p2p.append(took)
        mid = statistics.median(p2p)
        out.update(recv_from=left, recv_time_s=mid, recv_gbps=out["bytes"] / mid / 1e9)
        return out


def _slot() -> int:
    """This rank's GPU: its slot (``HANGDBG_CHECK_SLOT``) among the GPUs CUDA shows it, which is
    ``LOCAL_RANK`` in the run of every GPU (torchrun's convention: device = cuda:LOCAL_RANK)."""
    text = os.environ.get("HANGDBG_CHECK_SLOT") or os.environ.get("LOCAL_RANK") or "0"
    return int(text) if text.isdigit() else 0


class SetupFailed(RuntimeError):
    """A rank that cannot take part because of the set-up: ``setup`` is the value of a
    ``hangdbg.check.blame.SetupError`` (this script imports nothing of hangdbg)."""

    def __init__(self, setup: str, message: str) -> None:
        super().__init__(message)
        self.setup = setup


def _setup(exc: BaseException) -> dict:
    """``{"setup": VALUE}`` of a failed ``facts`` step whose cause is the set-up (``cpu-only``;
    ``no-torch``: the import of torch itself failed), else ``{}``."""
    if isinstance(exc, SetupFailed):
        return {"setup": exc.setup}
    if isinstance(exc, ModuleNotFoundError) and exc.name == "torch":
        return {"setup": "no-torch"}
    return {}


def _error(exc: BaseException) -> str:
    name = RuntimeError.__name__ if isinstance(exc, SetupFailed) else type(exc).__name__  # the words of torch's own checks
    text = f"{name}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("Exception raised from", "frame #"))]
    return "\n".join(lines[:6])[:2000] or traceback.format_exc(limit=1)[-500:]


def _ifname_matches(var: str, value: str, names: set[str]) -> bool:
    """Whether ``GLOO_SOCKET_IFNAME`` (interface names, comma-separated, each must exist) or
    ``NCCL_SOCKET_IFNAME`` (prefixes; ``=`` exact names; ``^`` a list to exclude) selects an
    interface of ``names`` (format: the NCCL environment variables documentation, NCCL 2.x)."""
    items = [v.strip() for v in value.split(",") if v.strip()]
    if var == "GLOO_SOCKET_IFNAME":
        return bool(items) and all(v in names for v in items)
    exclude = value.startswith("^")
    body = value[1:] if exclude else value
    exact = body.startswith("=")
    wanted = [v.strip() for v in (body[1:] if exact else body).split(",") if v.strip()]
    hit = [n for n in names if any(n == w if exact else n.startswith(w) for w in wanted)]
    return bool(set(names) - set(hit)) if exclude else bool(hit)


def _is_timeout(text: str) -> bool:
    low = text.lower()
    if text.startswith("ConnectionError: cannot reach the rendezvous"):
        return False  # this rank's own failure, not a wait for others
    return "timed out" in low or "timeout" in low or "time out" in low


if __name__ == "__main__":
    sys.exit(main())
