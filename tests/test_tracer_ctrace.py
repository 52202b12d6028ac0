"""tracer/_ctrace.c: the optional C trace function (and frame hook) of NicerTrace on Python 3.11.

Run in real subprocesses; the C path is compared with the pure-Python path (TRACER_PURE=1) on
the same script. Everything but the backend checks is skipped when the extension is not built
(``pip install -e .`` or ``python setup.py build_ext --inplace`` builds it).
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PY311 = sys.version_info[:2] == (3, 11)


def _built() -> bool:
    """Whether tracer._ctrace is built in this tree (the traced subprocesses import tracer from
    ROOT): an extension file for this interpreter in tracer/ (importable or not)."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return PY311 and any((ROOT / "tracer" / f"_ctrace{sfx}").exists() for sfx in suffixes)


BUILT = _built()
needs_c = pytest.mark.skipif(not BUILT, reason="tracer._ctrace not built for this Python 3.11 "
                             "(pip install -e . or python setup.py build_ext --inplace)" if PY311
                             else "the C path is for Python 3.11 only")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "TRACER_PURE")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _run(args, cwd, **env) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60,
                         env=_env(**env), cwd=cwd)
    assert res.returncode == 0, res.stderr
    return res


# ------------------------------------------------------------------------------------- backend
def test_backend_is_c_on_311_when_built(tmp_path):
    code = "import tracer; print(tracer.backend())"
    default = _run(["-c", code], tmp_path).stdout.strip()
    pure = _run(["-c", code], tmp_path, TRACER_PURE="1").stdout.strip()
    if sys.version_info >= (3, 12):
        assert default == pure == "monitoring"
        return
    assert pure == "settrace"
    if not BUILT:
        pytest.skip("tracer._ctrace not built: tracer.backend() is 'settrace' "
                    "(pip install -e . or python setup.py build_ext --inplace)")
    assert default == "ctrace"


def test_falls_back_without_extension(tmp_path):
    """tracer works, on the pure-Python path, when tracer._ctrace cannot be imported."""
    code = textwrap.dedent(f"""\
        import sys
        sys.modules["tracer._ctrace"] = None          # import fails with ImportError
        import tracer

        def f():
            return 42

        tr = tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="t.txt", timing=False)
        assert tr.run(f) == 42
        print(tracer.backend(), tr.backend)
        """)
    (tmp_path / "nox.py").write_text(code)
    out = _run([str(tmp_path / "nox.py")], tmp_path).stdout.split()
    want = "monitoring" if sys.version_info >= (3, 12) else "settrace"
    assert out == [want, want]
    assert "> __main__:5 f\n" in (tmp_path / "t.txt").read_text()


# ------------------------------------------------------------------- excluded / included, C path
# A fake site-packages library (excluded) that calls back into user code (included) in every
# way 3.11 runs a Python frame: a plain call, a call from C (map, sorted key), a generator
# resumed by the library, __getitem__, and a long loop in a library function called once.
LIB = '''\
def call(fn, x):
    return fn(x)


def call_from_c(fn, xs):
    return sorted(map(fn, xs), key=fn)


def drain(gen):
    out = []
    for v in gen:
        out.append(v)
    return out


def index(obj, i):
    return obj[i]


def busy(n, fn):
    total = 0
    for i in range(n):
        total += i % 7
    return total + fn(0)


def lib_gen(n):
    for i in range(n):
        yield i


def call_both(f, x, g, y):
    f(x)
    return g(y)


def wait_then_call(fn, lock, k):
    fn(-1)
    lock.acquire()
    for i in range(k):
        fn(i)
    return k
'''

SCRIPT = '''\
import json
import sys
import threading

sys.path.insert(0, sys.argv[2])
import fakelib

import tracer


def cb(x):
    return x + 1


def user_gen(n):
    for i in range(n):
        yield cb(i)


class Box:
    def __getitem__(self, i):
        return cb(i)


def in_thread(res):
    res.append(fakelib.call(cb, 5))
    res.append(type(sys.gettrace()).__name__)


tr = tracer.NicerTrace(outdir=sys.argv[1], filename="t.txt", timing=False)
tr.start()
a = fakelib.call(cb, 1)
b = fakelib.call_from_c(cb, [3, 1, 2])
c = fakelib.drain(user_gen(3))
d = fakelib.index(Box(), 7)
e = fakelib.busy(20000, cb)
g = fakelib.lib_gen(3)
first = next(g)
res = []
t = threading.Thread(target=in_thread, args=(res,))
t.start(); t.join()                          # one line: the thread's lines come after it
stats = tr._ct.stats() if tr._ct is not None else None
cached = len(tr._cache)
tr.stop()
later = []


def after(frame, event, arg):
    if event == "line":
        later.append((frame.f_code.co_name, frame.f_lineno))
    return after


sys.settrace(after)
rest = list(g)
sys.settrace(None)
print(json.dumps({"backend": tr.backend, "values": [a, b, c, d, e, first, rest, res], "stats": stats,
                  "cached": cached,
                  "lib_gen_lines_after_stop": sorted({ln for name, ln in later if name == "lib_gen"}),
                  "gettrace_after": repr(sys.gettrace()), "threading_after": repr(threading.gettrace())}))
'''


@pytest.fixture(scope="module")
def traced_both(tmp_path_factory):
    """SCRIPT run on the C path (with and without the frame hook) and on the pure path:
    (result json, trace text) for each."""
    base = tmp_path_factory.mktemp("ctrace")
    site = base / "site-packages"
    site.mkdir()
    (site / "fakelib.py").write_text(LIB)
    (base / "script.py").write_text(SCRIPT)
    out = {}
    for name, env in (("c", {}), ("c-nohook", {"TRACER_FRAME_HOOK": "0"}), ("pure", {"TRACER_PURE": "1"})):
        d = base / name
        d.mkdir()
        res = _run([str(base / "script.py"), str(d), str(site)], base, **env)
        out[name] = (json.loads(res.stdout), (d / "t.txt").read_text())
    return out


def _body(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0].startswith("# tracer v1 ") and lines[-1].startswith("# tracer end elapsed=")
    return lines[1:-1]


@needs_c
def test_c_path_traces_included_callbacks_not_the_library(traced_both):
    result, text = traced_both["c"]
    assert result["backend"] == "ctrace"
    assert result["values"] == [2, [2, 3, 4], [1, 2, 3], 8, 20000 // 7 * 21 + sum(range(20000 % 7)) + 1, 0,
                                [1, 2], [6, "CTracer"]]
    body = _body(text)
    # every callback into user code, from every kind of caller, is traced (call line + its line)
    calls = [ln for ln in body if ln.startswith("           - > ")]
    assert calls.count("           - > __main__:11 cb") == 1 + 6 + 3 + 1 + 1 + 1   # call, map+key, gen, getitem, busy, thread
    assert calls.count("           - > __main__:15 user_gen") == 4                   # 3 resumes + the end
    assert calls.count("           - > __main__:21 Box.__getitem__") == 1
    assert calls.count("           - > __main__:25 in_thread") == 1
    assert body.count("           - script.py:12 | return x + 1") == 13
    # the library never appears: no call line, no line of it
    assert not any("fakelib" in ln.split("|")[0] for ln in body), [ln for ln in body if "fakelib" in ln]
    assert not any(re.search(r"[^\w]threading\b|json|sorted", ln.split("|")[0]) for ln in body)


@needs_c
def test_c_path_answers_excluded_code_in_c(traced_both):
    """Excluded frames never reach Python: the frame hook runs them untraced, and the only
    call events passed to the Python trace function are those of included code."""
    result, text = traced_both["c"]
    stats = result["stats"]
    assert stats["enabled"] == 1 and stats["frame_hook"] == 1
    # the call events handed to the Python trace function are exactly the traced calls: 13
    # callbacks, 4 user_gen resumes, __getitem__, in_thread
    assert stats["traced_calls"] == sum(1 for ln in _body(text) if " > " in ln) == 19
    # the library's frames (call x2, call_from_c, drain, index, busy, lib_gen, threading's) ran
    # untraced; the only excluded call event seen is the new thread's first frame (Thread.run,
    # entered through CPython's trampoline, which hands over to the C function)
    assert stats["untraced_frames"] >= 8
    assert stats["excluded_calls"] <= 1
    # each code object was decided once (decisions fill the Python cache)
    assert 0 < stats["decisions"] <= result["cached"]


@needs_c
def test_c_path_without_frame_hook(traced_both):
    """TRACER_FRAME_HOOK=0 (what happens when another PEP 523 hook is installed): excluded code
    runs in tracing mode, and its call events are answered in C."""
    result, text = traced_both["c-nohook"]
    stats = result["stats"]
    assert result["backend"] == "ctrace"
    assert stats["frame_hook"] == 0 and stats["untraced_frames"] == 0
    assert stats["traced_calls"] == sum(1 for ln in _body(text) if " > " in ln) == 19
    assert stats["excluded_calls"] >= 8


@needs_c
@pytest.mark.parametrize("variant", ["c", "c-nohook"])
def test_c_and_pure_paths_write_the_same_trace(traced_both, variant):
    c_result, c_text = traced_both[variant]
    p_result, p_text = traced_both["pure"]
    assert p_result["backend"] == "settrace"
    assert c_result["values"] == p_result["values"][:-1] + [[6, "CTracer"]]
    assert p_result["values"][-1] == [6, "function"]
    assert _body(c_text) == _body(p_text)


@needs_c
@pytest.mark.parametrize("variant", ["c", "c-nohook", "pure"])
def test_trace_state_restored_on_stop(traced_both, variant):
    result = traced_both[variant][0]
    assert result["gettrace_after"] == "None" and result["threading_after"] == "None"
    # a generator of excluded code that was running under the tracer: a tracer installed after
    # stop() sees its lines (without the frame hook the C path turns line events off in excluded
    # frames, from their call event to their return event)
    assert result["lib_gen_lines_after_stop"] == [28, 29]


@needs_c
def test_deep_recursion_gives_up_the_frame_hook(tmp_path):
    """Past 3000 nested frames (a raised recursion limit) the hook is removed, since every
    hooked call costs C stack: no crash, and what excluded frames call afterwards (inlined
    again, in their C frame; here in another thread) is still traced."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "fakelib.py").write_text(LIB)
    script = tmp_path / "deep.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        import threading
        import time
        sys.path.insert(0, {str(site)!r})
        import fakelib
        import tracer

        sys.setrecursionlimit(200000)

        def rec(n):
            return 0 if n == 0 else 1 + rec(n - 1)

        def cb(x):
            return x + 1

        seen = []

        def in_thread(x):
            seen.append(x)

        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="d.txt", timing=False) as tr:
            lock = threading.Lock()
            lock.acquire()
            t = threading.Thread(target=fakelib.wait_then_call, args=(in_thread, lock, 300))
            t.start()
            while not seen:
                time.sleep(0.001)
            time.sleep(0.2)                               # the thread waits in the library frame
            r = fakelib.call_both(rec, 50000, cb, 5)      # gives up the hook, deep down
            lock.release()                                # the library frame calls in_thread 300x
            t.join()
            stats = tr._ct.stats()
        print(r, stats["frame_hook_gave_up"], stats["frame_hook_users"], len(seen))
        """))
    out = _run([str(script)], tmp_path).stdout.split()
    assert out == ["6", "1", "1", "301"]
    text = (tmp_path / "d.txt").read_text()
    assert text.count("> __main__:10 rec\n") == 50001
    assert text.count("> __main__:13 cb\n") == 1 and "deep.py:14 | return x + 1\n" in text
    # the other thread's library frame was waiting when the hook went: its callbacks after that
    # (inlined again, in that frame's C frame) are traced too
    assert text.count("> __main__:18 in_thread\n") == 301
    assert "fakelib" not in text.split("\n", 1)[1].replace("fakelib.call_both", "").replace(
        "fakelib.wait_then_call", "")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_previous_trace_function_and_nesting(tmp_path, pure):
    """stop() puts back the trace function that was set before start() (a Python one, or an
    enclosing NicerTrace, which goes on tracing); the frame hook is released."""
    script = tmp_path / "nest.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        import tracer

        seen = []

        def mine(frame, event, arg):
            seen.append(event)
            return None

        def work(k):
            return k * 2

        sys.settrace(mine)
        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="outer.txt", timing=False) as outer:
            work(1)
            with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="inner.txt", timing=False) as inner:
                work(2)
                hooked = inner._ct.stats()["frame_hook_users"] if inner._ct else 0
            assert sys.gettrace() is (outer._ct or outer._global), sys.gettrace()
            work(3)
        assert sys.gettrace() is mine, sys.gettrace()
        sys.settrace(None)
        after = outer._ct.stats()["frame_hook_users"] if outer._ct else 0
        print(tracer.backend(), hooked, after)
        """))
    out = _run([str(script)], tmp_path, TRACER_PURE=pure).stdout.split()
    if out[0] == "ctrace":
        assert out[1:] == ["2", "0"]
    outer = (tmp_path / "outer.txt").read_text()
    inner = (tmp_path / "inner.txt").read_text()
    assert "nest.py:15 | work(1)\n" in outer and "nest.py:20 | work(3)\n" in outer
    assert outer.count("> __main__:10 work\n") == 2          # work(1), work(3): inner had the thread
    assert inner.count("> __main__:10 work\n") == 1 and "nest.py:17 | work(2)\n" in inner


@needs_c
def test_ctrace_object_reinstalls_itself(tmp_path):
    """sys.settrace(sys.gettrace()) (what debuggers and coverage tools do to save/restore)
    keeps the C path: the CTracer, called as a Python trace function, puts itself back."""
    script = tmp_path / "rt.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        import tracer

        def work():
            return 1

        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename="rt.txt", timing=False) as tr:
            saved = sys.gettrace()
            sys.settrace(None)
            sys.settrace(saved)
            work()
            print(type(sys.gettrace()).__name__, sys.gettrace() is saved)
        """))
    assert _run([str(script)], tmp_path).stdout.split() == ["CTracer", "True"]
    assert "> __main__:4 work\n" in (tmp_path / "rt.txt").read_text()


@pytest.mark.real
@needs_c
def test_torch_compile_chains_to_the_frame_hook(tmp_path):
    """TorchDynamo installs its own frame hook on top of ours for a compiled call (calling ours
    for the frames it does not compile, putting ours back after): the trace is the same as on
    the pure-Python path, and the hook is still held afterwards."""
    pytest.importorskip("torch")
    script = tmp_path / "dyn.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        import warnings
        import torch
        import tracer

        warnings.simplefilter("ignore")

        class M(torch.nn.Module):
            def forward(self, x):
                y = x * 2
                return y + 1

        def f(x):
            z = x.sin()
            return z * 3

        m = M()
        cf = torch.compile(f, backend="eager")
        name = "dyn-" + tracer.backend() + ".txt"
        with tracer.NicerTrace(outdir={str(tmp_path)!r}, filename=name, timing=False) as tr:
            a = m(torch.ones(2))
            b = cf(torch.ones(2))
            c = m(torch.ones(2))
            st = tr._ct.stats() if tr._ct else {{}}
        print(name, st.get("frame_hook"), st.get("frame_hook_users"))
        """))
    assert _run([str(script)], tmp_path).stdout.split() == ["dyn-ctrace.txt", "1", "1"]
    assert _run([str(script)], tmp_path, TRACER_PURE="1").stdout.split() == ["dyn-settrace.txt", "None", "None"]
    c_body = _body((tmp_path / "dyn-ctrace.txt").read_text())
    assert c_body == _body((tmp_path / "dyn-settrace.txt").read_text())
    assert c_body.count("           - > __main__:9 M.forward") == 2
    assert "           - dyn.py:10 | y = x * 2" in c_body
