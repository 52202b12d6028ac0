"""The room map of the package, read from the source (every import statement, lazy ones inside
functions included; see docs/architecture.md):

* each layer imports only layers below it (or its own package), and there is no import cycle;
* the ground floor (``model`` and friends, ``text/``) imports nothing from the project but itself;
* an evidence kind (``hangdbg.evidence.<kind>``) never imports another kind: only the floors below
  the evidence and ``hangdbg.evidence.base``;
* only ``report/`` and ``cli/`` import rich, jinja2 or pydantic; only ``cli/`` imports argparse;
* no module is over 600 lines and no function over 100, but for :data:`LONG_FUNCTIONS`;
* ``tracer/`` imports the standard library only; every reader is registered.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "hangdbg"

GROUND = {"hangdbg._version", "hangdbg.errors", "hangdbg.enums", "hangdbg.model", "hangdbg.rankset", "hangdbg.launch_env",
          "hangdbg.launchers", "hangdbg.frames", "hangdbg.waits", "hangdbg.outdir", "hangdbg.parallel",
          "hangdbg.headline", "hangdbg.events", "hangdbg.exit_status", "hangdbg.kinds",
          "hangdbg.sources", "hangdbg.redact"}
"""Frozen dataclasses, enums and small pure helpers: import nothing from the project but the
ground floor itself and ``hangdbg.text`` (model re-exports frames and waits)."""

LAYERS = {  # the longest matching prefix decides
    "ground": 0, "hangdbg.text": 0,
    "hangdbg.tools": 1, "hangdbg.hooks": 1, "hangdbg.catalog": 1,
    "hangdbg.stacks": 2, "hangdbg.transport": 2,
    "hangdbg.integrations": 2,  # trainers' callbacks over hooks.heartbeat (issue 30)
    "hangdbg.evidence.base": 3,
    "hangdbg.evidence.stacks": 4, "hangdbg.evidence.core": 4, "hangdbg.evidence.nccl": 4,
    "hangdbg.evidence.nccl_ras": 4, "hangdbg.evidence.torch_log": 4, "hangdbg.evidence.flight_recorder": 4,
    "hangdbg.evidence.gpu": 4, "hangdbg.evidence.traces": 4, "hangdbg.evidence.error_lines": 4,
    "hangdbg.evidence.last_stacks": 4,
    "hangdbg.evidence": 5,
    "hangdbg.collect": 6, "hangdbg.check": 6, "hangdbg.demo": 6,
    "hangdbg.watch": 7,
    "hangdbg.report": 8,
    "hangdbg.api": 9,
    "hangdbg.cli": 10,
    "hangdbg": 11,  # the package's own __init__ (public API) and __main__
}
KINDS = sorted(k for k, v in LAYERS.items() if v == 4)
"""The evidence kinds: closed families, each imports none of the others."""

DEMO_JOBS = ("hangdbg.demo.job", "hangdbg.demo.topology", "hangdbg.demo.in_process", "hangdbg.demo.long_step")
"""The demo training scripts parse their own command line (``--scenario``, ``--steps``) as the user's
own training script does under torchrun: they are examples of the code hangdbg debugs, not part of it."""

VIEWS = ("hangdbg.report", "hangdbg.cli")
"""The only packages that may import rich, jinja2 or pydantic (rendering and the JSON Schema)."""

LONG_FUNCTIONS: dict[str, int] = {}
"""``module:function`` -> its length in lines, for functions allowed over 100 lines (this list
only shrinks: a function that got shorter fails the test until its entry is lowered or removed)."""


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()
TREES = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """``(module, line)`` of every import of a hangdbg module in ``path`` (resolved to the most
    specific module that exists), wherever the statement is (module level, functions, classes)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(TREES[name]):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the module pkg.sub; `from mod import name` imports mod
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES or f"{mod}.{a.name}" in GROUND else mod
                       for a in node.names]
        for t in targets:
            if not (t == "hangdbg" or t.startswith("hangdbg.")):
                continue
            while t not in MODULES and t not in GROUND and "." in t:
                t = t.rsplit(".", 1)[0]
            out.append((t, node.lineno))
    return sorted(set(out))


def _third_party(name: str) -> list[tuple[str, int]]:
    """``(top-level package, line)`` of every import of another distribution in module ``name``."""
    out = []
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.module.split(".")[0], node.lineno))
    return out


def _layer(mod: str) -> tuple[str, int]:
    if mod in GROUND:
        return "ground", 0
    if mod in ("hangdbg", "hangdbg.__main__"):
        return "hangdbg", LAYERS["hangdbg"]
    parts = mod.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return prefix, LAYERS[prefix]
    pytest.fail(f"{mod}: no layer for it (add its package to LAYERS or the module to GROUND)")


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


def test_ground_floor_imports_only_the_ground_floor():
    for m in MODULES:
        if _layer(m)[1] == 0:
            bad = [t for t, _ in GRAPH[m] if _layer(t)[1] != 0]
            assert not bad, f"{m} imports {bad}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    pkg, rank = _layer(module)
    for target, line in GRAPH[module]:
        if target == module:
            continue
        tpkg, trank = _layer(target)
        assert trank < rank or tpkg == pkg, (
            f"{MODULES[module].relative_to(ROOT)}:{line} imports {target} ({tpkg}, layer {trank}) "
            f"from layer {rank} ({pkg})")


@pytest.mark.parametrize("kind", KINDS)
def test_evidence_kinds_never_import_each_other(kind):
    others = [k for k in KINDS if k != kind]
    for m, edges in GRAPH.items():
        if m == kind or m.startswith(kind + "."):
            for t, line in edges:
                assert not any(t == o or t.startswith(o + ".") for o in others), (
                    f"{MODULES[m].relative_to(ROOT)}:{line} imports {t}: a kind never imports another kind")
                assert _layer(t)[1] < 3 or t == "hangdbg.evidence.base" or t.startswith(kind), (
                    f"{MODULES[m].relative_to(ROOT)}:{line} imports {t}, above the evidence kinds")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_views_import_rich_jinja2_or_pydantic(module):
    if module.startswith(VIEWS):
        return
    for top, line in _third_party(module):
        assert top not in ("rich", "jinja2", "pydantic"), (
            f"{MODULES[module].relative_to(ROOT)}:{line} imports {top}: rendering belongs in hangdbg.report")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_only_the_command_line_imports_argparse(module):
    if module.startswith("hangdbg.cli") or module in DEMO_JOBS:
        return
    for top, line in _third_party(module):
        assert top != "argparse", (f"{MODULES[module].relative_to(ROOT)}:{line} imports argparse: options are parsed "
                                   "in hangdbg.cli, which hands typed plans down")


def test_no_import_cycle():
    """No cycle among modules (edges to the module imported, not to its package's __init__)."""
    edges = {m: {t for t, _ in GRAPH[m] if t in MODULES and t != m} for m in MODULES}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


def test_tracer_is_stdlib_only_and_never_imports_hangdbg():
    for p in sorted((ROOT / "tracer").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for n in names:
                top = n.split(".")[0]
                assert top in sys.stdlib_module_names or top == "tracer", f"{p.name} imports {n}"


@pytest.mark.parametrize("path", sorted([*PKG.rglob("*.py"), *(ROOT / "tracer").rglob("*.py")]),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_600_lines(path):
    assert len(path.read_text().splitlines()) <= 600, f"{path.relative_to(ROOT)}: split it"


def _long_functions() -> dict[str, int]:
    out = {}
    for path in sorted([*PKG.rglob("*.py"), *(ROOT / "tracer").rglob("*.py")]):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > 100:
                    out[f"{mod}:{node.name}"] = n
    return out


def test_no_function_over_100_lines_but_the_allowed_ones():
    found = _long_functions()
    new = {k: v for k, v in found.items() if k not in LONG_FUNCTIONS}
    assert not new, f"functions over 100 lines (split them): {new}"
    grown = {k: (v, LONG_FUNCTIONS[k]) for k, v in found.items() if k in LONG_FUNCTIONS and v > LONG_FUNCTIONS[k]}
    assert not grown, f"allowed long functions grew (now, allowed): {grown}"
    shrunk = {k: v for k, v in LONG_FUNCTIONS.items() if found.get(k, 0) < v}
    assert not shrunk, f"allowed long functions shrank or went: lower or remove their entries in LONG_FUNCTIONS: {shrunk}"


def test_every_evidence_kind_has_one_registered_reader():
    from hangdbg.evidence.base import Reader
    from hangdbg.evidence.registry import READERS
    from hangdbg.model import SourceKind

    kinds = [r.kind for r in READERS]
    assert len(kinds) == len(set(kinds))
    # nodes are the fan-out's and check the diagnostics job's, not a file's
    assert set(kinds) == set(SourceKind) - {SourceKind.NODES, SourceKind.CHECK}
    assert all(isinstance(r, Reader) for r in READERS)
    for r in READERS:  # each reader lives in its kind's package
        package = type(r).__module__.rsplit(".", 1)[0]
        assert package in KINDS, f"{type(r).__name__} of {r.kind} lives in {package}, not in an evidence kind"
    assert {type(r).__module__.rsplit(".", 1)[0] for r in READERS} == set(KINDS)


def test_every_finding_kind_has_a_priority_and_a_description():
    from hangdbg.evidence.verdict import PRIORITY
    from hangdbg.model import Kind, Severity, SourceKind

    assert set(PRIORITY) == set(Kind)
    for enum in (Kind, Severity, SourceKind):
        assert all(m.doc for m in enum), enum


def test_every_finding_kind_is_made_somewhere():
    """No kind documented but never emitted: each `Kind.X` appears in the code that makes findings."""
    from hangdbg.model import Kind

    made = "".join(p.read_text() for name, p in MODULES.items()
                   if name not in ("hangdbg.model", "hangdbg.evidence.verdict"))
    for k in Kind:
        assert f"Kind.{k.name}" in made, f"{k} is documented but no module makes it"


def test_every_public_name_resolves():
    """Every name of ``hangdbg.__all__`` (loaded lazily) and of ``hangdbg.api.__all__`` can be used:
    a moved module is never left behind in the lazy table."""
    import hangdbg
    import hangdbg.api

    for name in hangdbg.__all__:
        assert getattr(hangdbg, name) is not None, name
    for name in hangdbg.api.__all__:
        assert getattr(hangdbg.api, name) is not None, name


def test_no_module_beside_a_child_program_shadows_the_standard_library():
    """The programs hangdbg runs by path (``python hangdbg/check/rank.py``, the demo jobs) have their
    directory first on ``sys.path``: a module there named like a standard module (``bisect.py``)
    would be imported instead of it, by ``random`` inside torch."""
    from hangdbg.check.node import RANK_SCRIPT
    from hangdbg.demo.launch import IN_PROCESS_SCRIPT, JOB_SCRIPT, LONG_STEP_SCRIPT, TOPOLOGY_SCRIPT

    for script in (RANK_SCRIPT, JOB_SCRIPT, TOPOLOGY_SCRIPT, IN_PROCESS_SCRIPT, LONG_STEP_SCRIPT):
        assert script.is_file(), script
        clash = sorted(p.stem for p in script.parent.glob("*.py") if p.stem in sys.stdlib_module_names)
        assert not clash, f"{script.parent.relative_to(ROOT)} holds {clash}: named like standard modules"
