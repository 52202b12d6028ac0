"""Forward-pass overhead of inf/nan detection: no hooks vs transformers vs hangdbg.

A tiny GPT2 built from a config (no download), no overflow, eval + no_grad, CPU. The three
variants run alternately in one process (same model object, hooks attached/removed per
round), median of N rounds. Host syncs: ours counts its own (``host_syncs``); for
transformers every ``Tensor.item`` call during one forward is counted by monkeypatching (the
``f"{t:8.2e}"`` formatting of a 0-d tensor goes through ``.item()`` as well).

    python bench/overflow_overhead.py [--rounds 15] [--iters 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers.debug_utils import DebugUnderflowOverflow as HFDebug  # noqa: E402

from bench._common import source_state  # noqa: E402
from hangdbg.hooks.overflow import DebugUnderflowOverflow  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "overflow_overhead.json"


def remove_all_hooks(model):
    for m in model.modules():
        m._forward_hooks.clear()
        m._forward_pre_hooks.clear()
        m._forward_hooks_with_kwargs.clear()
        m._forward_hooks_always_called.clear()


def count_hf_syncs(model, ids) -> int:
    n = 0
    orig_item, orig_fmt = torch.Tensor.item, torch.Tensor.__format__

    def item(self):
        nonlocal n
        n += 1
        return orig_item(self)

    torch.Tensor.item = item  # Tensor.__format__ of a 0-d tensor goes through .item() too
    try:
        dbg = HFDebug(model)
        with torch.no_grad():
            model(ids)
        del dbg
    finally:
        torch.Tensor.item, torch.Tensor.__format__ = orig_item, orig_fmt
        remove_all_hooks(model)
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=5, help="forwards per timed sample")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=a.layers, n_embd=a.embd, n_head=4, vocab_size=1000,
                                  n_positions=a.seq, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq))
    n_modules = sum(1 for _ in model.modules())

    def run(variant: str) -> float:
        dbg = None
        if variant == "transformers":
            dbg = HFDebug(model)
        elif variant == "hangdbg":
            dbg = DebugUnderflowOverflow(model)
        with torch.no_grad():
            model(ids)  # warm (and attaches nothing else)
            t0 = time.perf_counter()
            for _ in range(a.iters):
                model(ids)
            dt = (time.perf_counter() - t0) / a.iters
        if variant == "hangdbg":
            dbg.remove()
        remove_all_hooks(model)
        return dt * 1e3

    variants = ["none", "transformers", "hangdbg"]
    for v in variants:  # warm-up
        run(v)
    samples = {v: [] for v in variants}
    for r in range(a.rounds):
        order = variants[r % 3:] + variants[:r % 3]
        for v in order:
            samples[v].append(run(v))
    med = {v: statistics.median(s) for v, s in samples.items()}
    added = {v: med[v] - med["none"] for v in variants}
    ratio = added["hangdbg"] / added["transformers"] if added["transformers"] > 0 else None

    ours = DebugUnderflowOverflow(model)
    with torch.no_grad():
        for _ in range(3):
            model(ids)
    ours_syncs = ours.host_syncs / 3
    ours.remove()
    hf_syncs = count_hf_syncs(model, ids)

    print(f"tiny GPT2: n_layer={a.layers} n_embd={a.embd} batch={a.batch}x{a.seq}, {n_modules} modules, "
          f"CPU, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"median of {a.rounds} rounds x {a.iters} forwards")
    print(f"{'variant':<14} {'ms/forward':>11} {'added ms':>9} {'host syncs/fwd':>15}")
    print(f"{'none':<14} {med['none']:>11.2f} {0:>9.2f} {0:>15}")
    print(f"{'transformers':<14} {med['transformers']:>11.2f} {added['transformers']:>9.2f} {hf_syncs:>15}")
    print(f"{'hangdbg':<14} {med['hangdbg']:>11.2f} {added['hangdbg']:>9.2f} {ours_syncs:>15g}")
    print(f"ours_added / transformers_added = {ratio:.3f} (goal <= 0.5)" if ratio is not None else "ratio n/a")

    result = {
        "benchmark": "overflow_overhead",
        "model": {"type": "GPT2LMHeadModel", "n_layer": a.layers, "n_embd": a.embd, "n_head": 4,
                  "vocab_size": cfg.vocab_size, "batch": a.batch, "seq": a.seq, "modules": n_modules},
        "device": "cpu",
        "rounds": a.rounds, "iters_per_sample": a.iters,
        "ms_per_forward": med,
        "added_ms": added,
        "ratio_ours_added_over_transformers_added": ratio,
        "goal_ratio": 0.5,
        "host_syncs_per_forward": {"none": 0, "transformers": hf_syncs, "hangdbg": ours_syncs},
        "samples_ms": samples,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "threads": torch.get_num_threads(),
        **source_state(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
