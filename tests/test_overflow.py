"""hangdbg.hooks.overflow: inf/nan detection with one host sync per forward (real small models)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hangdbg.hooks.overflow import BatchLimitReached, DebugUnderflowOverflow, OverflowDetected, detect_overflow


class LogNet(nn.Module):
    """lin -> log (nan for the negative entries) -> out."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.log = Log()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.log(self.lin(x)))


class Log(nn.Module):
    def forward(self, x):
        return torch.log(x)


class Safe(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_detect_overflow_unit(capsys):
    assert detect_overflow(torch.ones(3), "x") is False
    assert detect_overflow(torch.tensor([1.0, float("nan")]), "x") is True
    assert "x has nans" in capsys.readouterr().out
    assert detect_overflow(torch.tensor([1.0, float("-inf")]), "y") is True
    assert "y has infs" in capsys.readouterr().out
    assert detect_overflow(torch.tensor([float("inf"), float("nan")]), "z") is True
    out = capsys.readouterr().out
    assert "z has nans" in out and "z has infs" in out
    assert detect_overflow(torch.arange(5), "ints") is False
    assert detect_overflow(None, "none") is False
    assert detect_overflow("text", "str") is False
    assert detect_overflow(torch.empty(0), "empty") is False
    assert detect_overflow(torch.tensor([60000.0]).half() * 2, "half") is True


def test_nan_from_log_names_the_module(capsys):
    torch.manual_seed(0)
    model = LogNet()
    dbg = DebugUnderflowOverflow(model)
    with pytest.raises(OverflowDetected) as ei:
        model(torch.randn(8, 4))
    e = ei.value
    assert isinstance(e, RuntimeError)
    assert e.module_name == "log" and e.module_class == "Log" and e.ctx == "output"
    report = str(e)
    assert report == e.report
    assert "Detected inf/nan during batch_number=0" in report
    assert re.search(r"Last \d+ forward frames:", report)
    assert "abs min  abs max  metadata" in report
    assert re.search(r"^\s+log Log$", report, re.M)
    assert re.search(r"^\s+lin Linear$", report, re.M)
    assert re.search(r"^\S+ \S+ weight$", report, re.M)
    assert re.search(r"^\S+ \S+ input\[0\]$", report, re.M)
    assert re.search(r"^\s*\S+\s+nan output$", report, re.M)
    # the frames after the bad one (out Linear) are not in the report
    assert not re.search(r"^\s+out Linear$", report, re.M)
    assert "Detected inf/nan during batch_number=0" in capsys.readouterr().out
    assert dbg.host_syncs == 1 and dbg.detected_overflow


def test_one_host_sync_per_forward_and_ring_buffer():
    torch.manual_seed(0)
    model = Safe()
    dbg = DebugUnderflowOverflow(model, max_frames_to_save=2)
    for _ in range(5):
        model(torch.randn(3, 4))
    assert dbg.host_syncs == 5 and dbg.batch_number == 5
    assert [f.name for f in dbg.frames] == ["b", ""]
    dbg.remove()
    model(torch.randn(3, 4))
    assert dbg.host_syncs == 5


def test_bf16_model():
    torch.manual_seed(0)
    model = LogNet().to(torch.bfloat16)
    DebugUnderflowOverflow(model)
    with pytest.raises(OverflowDetected) as ei:
        model(torch.randn(8, 4, dtype=torch.bfloat16))
    assert ei.value.module_name == "log"


def test_fp16_autocast_overflow():
    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.after = nn.Linear(8, 8)
            with torch.no_grad():
                self.lin.weight.fill_(1e4)

        def forward(self, x):
            return self.after(self.lin(x))

    model = Big()
    DebugUnderflowOverflow(model)
    with torch.autocast("cpu", dtype=torch.float16), pytest.raises(OverflowDetected) as ei:
        model(torch.ones(2, 8))
    assert ei.value.module_name == "lin"
    assert re.search(r"^\s*\S+\s+inf output$", ei.value.report, re.M)


@dataclasses.dataclass
class Out:
    hidden: object
    extra: object = None


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, batch):  # a dict input
        return self.inner((batch["x"], batch["y"]))


class Inner(nn.Module):
    def forward(self, pair):  # a tuple input, a dataclass output
        x, y = pair
        return Out(hidden={"h": x * 1.0, "bad": y / 0.0}, extra=[x])


def test_dict_tuple_dataclass_inputs_outputs():
    model = Containers()
    DebugUnderflowOverflow(model)
    with pytest.raises(OverflowDetected) as ei:
        model({"x": torch.ones(2), "y": torch.ones(2)})
    e = ei.value
    assert e.module_name == "inner" and e.ctx == "output.hidden[bad]"
    for ctx in ("input[0][0]", "input[0][1]", "output.hidden[h]", "output.hidden[bad]", "output.extra[0]"):
        assert ctx in e.report


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_backward_check_finds_nan_gradient():
    class SqrtNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.sq = Sqrt()
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            return self.head(self.sq(self.lin(x)))

    class Sqrt(nn.Module):
        def forward(self, x):
            return torch.sqrt(x.abs() * 0.0)  # finite forward (zeros), inf gradient

    torch.manual_seed(0)
    model = SqrtNet()
    dbg = DebugUnderflowOverflow(model, check_backward=True)
    loss = model(torch.randn(3, 4)).sum()  # forward is clean
    assert dbg.host_syncs == 1
    with pytest.raises(OverflowDetected) as ei:
        loss.backward()
    e = ei.value
    assert e.phase == "backward" and e.module_name == "sq" and e.ctx.startswith("grad_input")
    assert "Detected inf/nan during batch_number=0" in e.report
    assert "sq Sqrt (backward)" in e.report
    assert dbg.host_syncs == 2


def test_batch_tracing_and_abort(capsys):
    model = Safe()
    DebugUnderflowOverflow(model, trace_batch_nums=[1, 2], abort_after_batch_num=2)
    model(torch.randn(2, 4))
    assert "Starting batch number" not in capsys.readouterr().out
    model(torch.randn(2, 4))
    out = capsys.readouterr().out
    assert "*** Starting batch number=1 ***" in out and "*** Finished batch number=1 ***" in out
    assert re.search(r"^\s+a Linear$", out, re.M) and "abs min  abs max  metadata" in out
    with pytest.raises(BatchLimitReached):
        model(torch.randn(2, 4))
    assert "*** Starting batch number=2 ***" in capsys.readouterr().out


def test_tracing_turns_detection_off(capsys):
    model = LogNet()
    DebugUnderflowOverflow(model, trace_batch_nums=[0])
    model(-torch.ones(2, 4) * 100)  # nan, but batch 0 is traced, not checked
    assert "nan output" in capsys.readouterr().out


def test_rank_in_header_and_per_rank_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    model = LogNet()
    DebugUnderflowOverflow(model, report_dir=tmp_path, stream=io.StringIO())
    with torch.no_grad():
        model.lin.weight.fill_(-1.0)
        model.lin.bias.zero_()
    with pytest.raises(OverflowDetected) as ei:
        model(torch.ones(2, 4))
    assert ei.value.rank == 3
    assert "Detected inf/nan during batch_number=0 on rank=3" in ei.value.report
    f = tmp_path / "overflow-rank3.txt"
    assert f.is_file() and "on rank=3" in f.read_text() and ei.value.report_path == str(f)


@pytest.mark.real
def test_ddp_wrapped_names(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        ddp = nn.parallel.DistributedDataParallel(LogNet())
        dbg = DebugUnderflowOverflow(ddp, stream=io.StringIO())
        assert dbg.model is ddp.module
        with pytest.raises(OverflowDetected) as ei:
            ddp(torch.randn(16, 4))
        assert ei.value.module_name == "log" and ei.value.rank == 0
        assert "on rank=0" in ei.value.report
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------- agreement with transformers
def _tiny_gpt2(layer: int):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # make this layer's MLP overflow fp16 (> 65504)
        model.transformer.h[layer].ln_2.weight.fill_(300.0)
        model.transformer.h[layer].mlp.c_fc.weight.mul_(1e3)
    return model.half()


def _transformers_first_bad(model, ids) -> tuple[str, str]:
    from transformers.debug_utils import DebugUnderflowOverflow as HFDebug

    HFDebug(model)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(Exception) as ei:
        model(ids)
    assert "inf/nan detected" in str(ei.value)
    out = buf.getvalue()
    assert "Detected inf/nan during batch_number=0" in out
    # the last frame of transformers' report is the module where it stopped
    names = re.findall(r"^ {17} (\S+) (\S+)$", out, re.M)
    return names[-1]


@pytest.mark.parametrize("layer", [0, 1])
def test_agrees_with_transformers_on_first_module(layer):
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    hf_name, hf_cls = _transformers_first_bad(_tiny_gpt2(layer), ids)
    model = _tiny_gpt2(layer)
    dbg = DebugUnderflowOverflow(model, stream=io.StringIO())
    with pytest.raises(OverflowDetected) as ei:
        model(ids)
    assert (ei.value.module_name, ei.value.module_class) == (hf_name, hf_cls)
    assert hf_name == f"transformer.h.{layer}.mlp.c_fc"
    assert dbg.host_syncs == 1
    # same report shape: the last frame is the bad module, with its weight/input/output lines
    last = ei.value.report.split(f" {hf_name} {hf_cls}\n")[-1]
    assert re.search(r"^\S+ \S+ weight$", last, re.M) and re.search(r"^\s*\S+\s+inf output$", last, re.M)


def test_import_hangdbg_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, hangdbg, hangdbg.hooks; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
