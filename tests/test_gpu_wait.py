"""A rank waiting on its GPU (``WaitKind.GPU``): a CUDA synchronize or a copy to the host seen in its
py-spy stack, from torch's Python frames, the source line or native frames. The recorded H200 dump
(tests/fixtures/gpu_h200/live_cuda_spin_hang1.json, see SOURCE.md) is re-analysed from its stacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hangdbg.collect.needs import needs
from hangdbg.enums import ThreadStatus
from hangdbg.frames import Frame
from hangdbg.model import Analysis, Kind, RankDump, Severity, Thread
from hangdbg.stacks.analysis import analyze
from hangdbg.stacks.gpu_sync import gpu_sync
from hangdbg.stacks.saved import load_dump_texts
from hangdbg.waits import WaitKind

H200 = Path(__file__).parent / "fixtures" / "gpu_h200"
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
CUDA = "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py"
STREAMS = "/venv/lib/python3.11/site-packages/torch/cuda/streams.py"

TRAIN = """import torch
import torch.distributed as dist


def train_step(x, loss):
    dist.all_reduce(x)
    value = loss.item()
    torch.cuda.synchronize()
    plain_python_work(x)
    return value
"""
# lines: 6 all_reduce, 7 .item(), 8 torch.cuda.synchronize(), 9 plain_python_work(x)


def _block(rank: int, status: str, frames: str, world: int = 4) -> tuple[str, str]:
    text = (f"# hangdbg rank={rank} pid={100 + rank} host=n1 local_rank={rank} world_size={world} "
            f"local_world_size={world} sample=1\n"
            f"Process {100 + rank}: python train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f'Thread {100 + rank} ({status}): "MainThread"\n{frames}')
    return f"rank-{rank:04d}.txt", text


def _frames(*lines: str) -> str:
    return "".join(f"    {line}\n" for line in lines)


def _job(tmp_path: Path, odd: tuple[int, str, str], world: int = 4) -> Analysis:
    """Every rank in all_reduce at train.py:6 but ``odd`` = (rank, status, frames)."""
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    texts = []
    for r in range(world):
        if r == odd[0]:
            texts.append(_block(r, odd[1], odd[2].format(train=train), world))
        else:
            waits = _frames(f"all_reduce ({C10D}:2501)", f"_exception_logger.<locals>.wrapper ({LOGGER}:83)",
                            f"train_step ({train}:6)", f"<module> ({train}:12)")
            texts.append(_block(r, "idle", waits, world))
    dumps, _ = load_dump_texts(texts)
    return analyze(dumps)


def _suspects(a: Analysis) -> list:
    return [f for f in a.findings if f.severity is Severity.SUSPECT]


ITEM_PY = _frames("train_step ({train}:7)", "<module> ({train}:12)")
ITEM_NATIVE = _frames("0x7f00000000a1 (libcuda.so.1)", "cuStreamSynchronize (libcuda.so.1)",
                      "0x7f00000000b2 (libcudart.so.12)", "cudaStreamSynchronize (libcudart.so.12)",
                      "at::native::_local_scalar_dense_cuda (libtorch_cuda.so)",
                      "at::_ops::_local_scalar_dense::call (libtorch_cpu.so)", "at::native::item (libtorch_cpu.so)",
                      "THPVariable_item (libtorch_python.so)", "train_step ({train}:7)", "<module> ({train}:12)",
                      "0x7f00000000c3 (libc.so.6)")


@pytest.mark.parametrize("status", ["active", "idle"])
def test_a_rank_in_item_while_the_others_wait_in_all_reduce_waits_on_its_gpu(tmp_path, status):
    a = _job(tmp_path, (2, status, ITEM_PY))
    (s,) = _suspects(a)
    assert s.ranks == (2,) and s.kind is Kind.OUTSIDE_COLLECTIVE
    assert s.summary.startswith("waiting on its GPU in .item() at ")
    assert "train.py:7 in train_step() `value = loss.item()`" in s.summary
    assert "its GPU has not finished earlier work" in s.summary and "computing" not in s.summary
    assert "nvidia-smi" in s.action and "cuda-gdb" in s.action and "py-spy dump --native" in s.action
    assert a.waits[2].kind is WaitKind.GPU and a.headline.startswith("suspect rank 2: waiting on its GPU")
    # the waiting ranks are never suspects: they wait for rank 2
    (w,) = [f for f in a.findings if f.kind is Kind.WAITING]
    assert w.ranks == (0, 1, 3) and w.waits_for == (2,)
    assert needs(a).native == {2}  # the native frames would name the CUDA call


def test_native_frames_name_the_cuda_calls(tmp_path):
    a = _job(tmp_path, (1, "active", ITEM_NATIVE))
    (s,) = _suspects(a)
    assert s.ranks == (1,)
    assert s.summary.startswith("waiting on its GPU in cudaStreamSynchronize -> cuStreamSynchronize under .item() at ")
    assert "native" in a.waits[1].evidence and not needs(a).native


def test_native_frames_alone_say_it_without_a_readable_source(tmp_path):
    frames = ITEM_NATIVE.replace("({train}:", "(gone/train.py:")  # a relative path: the source line is not read
    a = _job(tmp_path, (3, "active", frames))
    (s,) = _suspects(a)
    assert s.ranks == (3,)
    assert s.summary.startswith("waiting on its GPU in cudaStreamSynchronize -> cuStreamSynchronize at ")


def test_torch_cuda_synchronize_frame_without_native_frames(tmp_path):
    frames = _frames(f"synchronize ({CUDA}:1040)", "train_step ({train}:8)", "<module> ({train}:12)")
    a = _job(tmp_path, (0, "active", frames))
    (s,) = _suspects(a)  # no longer "inside a C++ call": undecided, take native frames
    assert s.ranks == (0,) and s.summary.startswith("waiting on its GPU in torch.cuda.synchronize at ")
    assert "train.py:8 in train_step() `torch.cuda.synchronize()`" in s.summary


def test_every_rank_in_synchronize_and_none_in_a_collective_names_nobody(tmp_path):
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    frames = _frames(f"synchronize ({CUDA}:1040)", f"train_step ({train}:8)", f"<module> ({train}:12)")
    dumps, _ = load_dump_texts([_block(r, "active", frames) for r in range(4)])
    a = analyze(dumps)
    assert not _suspects(a) and not any(f.severity is Severity.WAITING for f in a.findings)
    assert "no single rank stands out" in a.headline
    assert all(w.kind is WaitKind.GPU for w in a.waits.values())
    # in different places (one in .item(), the others in synchronize): still nobody waits in a collective
    item = _frames(f"train_step ({train}:7)", f"<module> ({train}:12)")
    dumps, _ = load_dump_texts([_block(r, "active", item if r == 1 else frames) for r in range(4)])
    a = analyze(dumps)
    assert not _suspects(a) and not a.edges


def test_a_cpu_rank_computing_in_a_plain_function_still_computes(tmp_path):
    frames = _frames("train_step ({train}:9)", "<module> ({train}:12)")
    a = _job(tmp_path, (1, "active", frames))
    assert a.waits[1].kind is WaitKind.COMPUTE and a.waits[1].detail == "computing"
    assert "GPU" not in a.headline and "computing" in a.headline  # one sample: undecided, on CPU


def test_recorded_h200_dump_waits_on_its_gpu():
    """hangdbg dump --json of gpu_hang.py on an H200: rank 1 spins in a CUDA kernel and synchronizes,
    rank 0 waits in all_reduce (gloo with CUDA tensors)."""
    doc = json.loads((H200 / "live_cuda_spin_hang1.json").read_text())
    st = doc["stacks"]
    table = [tuple(Frame(f["function"], f["file"], f["line"], f["native"], tuple((k, v) for k, v in f["locals"]))
                   for f in stack) for stack in st["stack_table"]]

    def dumps(native: bool) -> list[RankDump]:
        out = []
        for r in st["ranks"]:
            threads = tuple(Thread(t["thread_id"], t["name"], ThreadStatus(t["status"]),
                                   table[t["stack"]] if native else tuple(f for f in table[t["stack"]] if not f.native))
                            for t in r["threads"])
            out.append(RankDump(r["rank"], r["pid"], r["host"], r["local_rank"], r["world_size"], threads=threads,
                                samples=(threads,), rank_source=r["rank_source"]))
        return out

    for native, call in ((True, "cudaDeviceSynchronize -> cuCtxSynchronize_v2 under torch.cuda.synchronize"),
                         (False, "torch.cuda.synchronize")):
        a = analyze(dumps(native))
        (s,) = _suspects(a)
        assert s.ranks == (1,) and s.hosts == ("vm",)
        assert a.headline == (f"suspect rank 1: waiting on its GPU in {call} at .gpu/gpu_hang.py:14, in no collective: "
                              "its GPU has not finished earlier work (a kernel still running, or queued behind one); "
                              "rank 0 waits for it in all_reduce at .gpu/gpu_hang.py:15")
        (w,) = [f for f in a.findings if f.kind is Kind.WAITING]
        assert w.ranks == (0,) and w.waits_for == (1,)


def _thread(*frames: Frame, status: ThreadStatus = ThreadStatus.ACTIVE) -> Thread:
    return Thread(1, "MainThread", status, frames)


def _n(function: str, lib: str = "libcuda.so.1") -> Frame:
    return Frame(function, lib, None, True)


USER = Frame("step", "train.py", 3)


@pytest.mark.parametrize("frames, op", [
    ((_n("cuCtxSynchronize"),), "cuCtxSynchronize"),
    ((_n("cuStreamSynchronize_ptsz"), _n("cudaStreamSynchronize_ptsz", "libcudart.so.12")),
     "cudaStreamSynchronize_ptsz -> cuStreamSynchronize_ptsz"),
    ((_n("cuEventSynchronize"), _n("cudaEventSynchronize", "libcudart.so.12")),
     "cudaEventSynchronize -> cuEventSynchronize"),
    ((_n("cuMemcpyDtoH_v2"), _n("cudaMemcpy", "libcudart.so.12")), "cudaMemcpy -> cuMemcpyDtoH_v2"),
    ((_n("cudaMemcpy2D(void*, unsigned long)", "libcudart.so.12"),), "cudaMemcpy2D"),  # gdb's parameter list
    ((_n("c10::cuda::device_synchronize()", "libc10_cuda.so"),), "cuda::device_synchronize"),  # cudart without symbols
    ((Frame("Event.synchronize", STREAMS, 226),), "torch.cuda.Event.synchronize"),
    ((Frame("synchronize", STREAMS, 95),), "torch.cuda.synchronize"),  # py-spy before qualified names
    ((Frame("Stream.query", STREAMS, 80),), "torch.cuda.Stream.query"),
    ((Frame("synchronize", "/venv/lib/python3.12/site-packages/torch/accelerator/__init__.py", 190),),
     "torch.accelerator.synchronize"),
])
def test_cuda_synchronizations_are_recognised(frames, op):
    w = gpu_sync(_thread(*frames, USER))
    assert w is not None and w.op == op and w.site == USER


@pytest.mark.parametrize("frames", [
    (_n("cuMemcpyDtoHAsync_v2"), _n("cudaMemcpyAsync", "libcudart.so.12")),  # async: the host does not wait
    (_n("cudaLaunchKernel", "libcudart.so.12"),),
    (_n("cudaStreamWaitEvent", "libcudart.so.12"),),
    (Frame("Event.wait", STREAMS, 200),),  # makes a stream wait (cudaStreamWaitEvent), not the host
    (Frame("Stream.wait_stream", STREAMS, 120),),
    (Frame("synchronize", "/home/me/mytorch/cuda/__init__.py", 3),),  # not torch's
    (Frame("forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125),),
])
def test_other_calls_are_not_gpu_waits(frames):
    assert gpu_sync(_thread(*frames, USER)) is None


@pytest.mark.parametrize("line, op", [
    ("loss = loss.item()", ".item()"), ("xs = t.tolist()", ".tolist()"), ("a = t.detach().cpu().numpy()", ".cpu()"),
    ("a = t.numpy(force=True)", ".numpy()"), ("y = t.to('cpu')", '.to("cpu")'),
    ("y = t.to(device=\"cpu\")", '.to("cpu")'), ("torch.cuda.synchronize(0)", "torch.cuda.synchronize"),
    ("torch.cuda.current_stream().synchronize()", ".synchronize()"),
    ("while not done.query():", ".query()"),
])
def test_source_lines_that_wait_on_the_gpu(tmp_path, line, op):
    f = tmp_path / "t.py"
    f.write_text(f"import torch\n{line}\n")
    frame = Frame("step", str(f), 2)
    w = gpu_sync(_thread(frame))
    assert w is not None and w.op == op and w.site == frame and not w.native


@pytest.mark.parametrize("line", ["for k, v in d.items():", "x = model(batch)", "df.query('a > 1')", "t.to(device)",
                                  "work.wait()"])
def test_source_lines_that_do_not(tmp_path, line):
    f = tmp_path / "t.py"
    f.write_text(f"import torch\n{line}\n")
    assert gpu_sync(_thread(Frame("step", str(f), 2))) is None


def test_the_schema_documents_the_gpu_wait():
    from hangdbg.report.schema import json_schema

    kinds = {k["const"]: k["description"] for k in json_schema()["$defs"]["WaitKind"]["oneOf"]}
    assert kinds["gpu"].startswith("waiting on its GPU") and set(kinds) == {k.value for k in WaitKind}
    assert WaitKind.GPU.doc == kinds["gpu"] and str(WaitKind.GPU) == "gpu"
