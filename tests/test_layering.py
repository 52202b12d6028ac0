"""The layering of the package, read from the source (every import statement, lazy ones inside
functions included): each layer imports only layers below it, the ground floor imports nothing
from the project, there is no import cycle, `tracer/` never imports hangdbg, no module is over
600 lines, and every reader is registered."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "hangdbg"

GROUND = {"hangdbg._version", "hangdbg.errors", "hangdbg.model", "hangdbg.facts", "hangdbg.rankset",
          "hangdbg.launch_env", "hangdbg.launchers", "hangdbg._ncclscan", "hangdbg.frames", "hangdbg.waits",
          "hangdbg.outdir", "hangdbg.parallel"}
"""Import nothing from the project but the ground floor itself (model re-exports frames and waits)."""

LAYERS = {
    "ground": 0,
    "hangdbg.tools": 1, "hangdbg.hooks": 1,
    "hangdbg.parse": 2,
    "hangdbg.analyze": 3,
    "hangdbg.sources": 4,
    "hangdbg.report": 5,
    "hangdbg.collect": 6, "hangdbg.demo": 6,
    "hangdbg.cli": 7,
    "hangdbg": 8,  # the package's own __init__ (public API) and __main__
}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """``(module, line)`` of every import of a hangdbg module in ``path`` (resolved to the most
    specific module that exists), wherever the statement is (module level, functions, classes)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def _layer(mod: str) -> tuple[str, int]:
    if mod in GROUND:
        return "ground", 0
    if mod in ("hangdbg", "hangdbg.__main__"):
        return "hangdbg", LAYERS["hangdbg"]
    pkg = ".".join(mod.split(".")[:2])
    assert pkg in LAYERS, f"{mod}: no layer for {pkg} (add it to LAYERS)"
    return pkg, LAYERS[pkg]


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


def test_ground_floor_imports_only_the_ground_floor():
    for m in GROUND & set(MODULES):
        assert all(t in GROUND for t, _ in GRAPH[m]), f"{m} imports {GRAPH[m]}"


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


def test_parse_imports_only_the_ground_floor():
    for m, edges in GRAPH.items():
        if m.startswith("hangdbg.parse"):
            assert {t for t, _ in edges} <= GROUND | {x for x in MODULES if x.startswith("hangdbg.parse")}, m


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
    import sys

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


def test_every_evidence_kind_has_one_registered_reader():
    from hangdbg.model import SourceKind
    from hangdbg.sources.base import Reader
    from hangdbg.sources.registry import READERS

    kinds = [r.kind for r in READERS]
    assert len(kinds) == len(set(kinds))
    # nodes are the fan-out's and check the diagnostics job's, not a file's
    assert set(kinds) == set(SourceKind) - {SourceKind.NODES, SourceKind.CHECK}
    assert all(isinstance(r, Reader) for r in READERS)
    for name in ("core", "core_json", "flight_recorder", "nccl", "pyspy", "stack_text", "torch_log", "traces", "xid"):
        assert f"hangdbg.sources.{name}" in MODULES  # one module per evidence kind


def test_every_finding_kind_has_a_priority_and_a_description():
    from hangdbg.analyze.verdict import PRIORITY
    from hangdbg.model import Kind, Severity, SourceKind

    assert set(PRIORITY) == set(Kind)
    for enum in (Kind, Severity, SourceKind):
        assert all(m.doc for m in enum), enum


def test_every_finding_kind_is_made_somewhere():
    """No kind documented but never emitted: each `Kind.X` appears in the code that makes findings."""
    from hangdbg.model import Kind

    made = "".join(p.read_text() for name, p in MODULES.items()
                   if name not in ("hangdbg.model", "hangdbg.analyze.verdict"))
    for k in Kind:
        assert f"Kind.{k.name}" in made, f"{k} is documented but no module makes it"
