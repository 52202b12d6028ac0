"""Shared fixtures: real hung torchrun/gloo jobs (started once per module), the private SLURM
cluster and sshd (once per worker), two CLI runners (``run_main``: ``main(argv, out, err)`` in this
process; ``run_cli``: the real ``python -m hangdbg`` in a child process), the JSON contract (every
document a test reads through ``main_json``, ``run_json`` or ``read_json`` is validated against the
schema ``hangdbg schema`` prints), and the lanes: every test is marked ``real``, ``daemon`` or
``fuzz`` here, from its fixtures and names (``pytest_collection_modifyitems``)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # started in the background by a non-interactive shell (`cmd &`): children would inherit the
    # ignored SIGINT and the Ctrl-C tests could not interrupt them
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _pin_fixture_sources() -> None:
    """Serve the source of the recorded topology jobs (tests/fixtures/topology) from snapshots.

    The analysis reads the source line of a frame when its file is readable (``store.wait(`` on the
    line, a ``with lock:``). The recorded stacks name ``/hangdbg-fixtures/topology-N/demo/topology.py``,
    a path no machine has; ``tests/fixtures/topology/_source/topology-N.py`` is the demo script as it
    was when those stacks were recorded, put into :mod:`linecache` under that path (an entry without
    an mtime, which ``linecache.checkcache`` leaves alone). So the recorded verdicts depend neither on
    where the checkout lies nor on later edits of ``hangdbg/demo/topology.py``.
    """
    import linecache

    for snap in sorted((FIXTURES / "topology" / "_source").glob("topology-*.py")):
        lines = snap.read_text().splitlines(keepends=True)
        name = f"/hangdbg-fixtures/{snap.stem}/demo/topology.py"
        linecache.cache[name] = (sum(map(len, lines)), None, lines, name)


_pin_fixture_sources()


# no hangdbg.toml of the developer's (~/.config), the site's (/etc) or the checkout's changes what a
# test runs: HANGDBG_CONFIG names the one file read (hangdbg.cli.config), /dev/null an empty one
os.environ.setdefault("HANGDBG_CONFIG", os.devnull)

def run_cli(*args: str, timeout: float = 180, prefix: list[str] | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real command line (``python -m hangdbg ...``) in a child process and capture its
    output: for tests of the entry point itself (exit statuses through a process, signals, a
    terminal) and of real jobs; :func:`run_main` runs the same command in this process."""
    env = dict(env or os.environ, NO_COLOR="1", COLUMNS="160")
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "hangdbg", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )


def run_main(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run ``hangdbg ARGS`` in this process, through ``hangdbg.cli.main.main(argv, out, err)`` with
    rich consoles writing to strings, as :func:`run_cli` would run it in a child (same width, no
    colour, cwd the checkout), and return the same ``CompletedProcess`` (``returncode``, ``stdout``,
    ``stderr`` as text).

    argparse's own output (``--help``, ``--version``, usage errors) goes to ``sys.stdout`` and
    ``sys.stderr`` and ends in ``SystemExit``: both are captured here and the exit code returned.
    ``env`` (variables to set, e.g. a ``PATH`` with fake tools) holds in ``os.environ`` for the
    duration of the call, so the programs the command starts see it; ``stdin`` is what ``-`` reads.
    An exception that ``main`` lets out (a bug: a child would print a traceback) is raised."""
    from rich.console import Console

    from hangdbg.cli.main import main

    argv = [str(a) for a in args]
    out_buf, err_buf = io.StringIO(), io.StringIO()
    out = Console(file=out_buf, width=160, color_system=None, force_terminal=False, force_interactive=False)
    err = Console(file=err_buf, width=160, color_system=None, force_terminal=False, force_interactive=False)
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.update({**(env or {}), "NO_COLOR": "1", "COLUMNS": "160"})
    try:
        os.chdir(ROOT)
        sys.stdin = stdin_stream
        with contextlib.redirect_stdout(out_buf), contextlib.redirect_stderr(err_buf):
            try:
                code = main(argv, out, err)
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["hangdbg", *argv], code, out_buf.getvalue(), err_buf.getvalue())


def main_json(*args: str, **kw) -> tuple[int, dict]:
    """:func:`run_json` in this process (:func:`run_main`): the exit status and the validated document."""
    res = run_main(*args, "--json", **kw)
    assert res.stdout.strip(), f"no JSON printed; stderr:\n{res.stderr}"
    return res.returncode, validate(json.loads(res.stdout))


@functools.lru_cache(maxsize=1)
def schema_validator():
    """A draft 2020-12 validator of the schema that ``hangdbg schema`` prints (built once per
    process, in this process: ``schema_text()`` is what the command prints)."""
    import jsonschema

    from hangdbg.report.schema import schema_text

    schema = json.loads(schema_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(doc: dict) -> dict:
    """Assert that ``doc`` follows the schema (with the path of the first error); returns it."""
    errors = sorted(schema_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{doc.get('command')} document breaks the schema at {list(errors[0].absolute_path)}: {errors[0].message[:500]}"
    return doc


def frames_of(doc: dict, thread: dict) -> list[dict]:
    """The frames (innermost first) of one ``stacks.ranks[].threads[]`` entry of ``doc`` (each
    thread names its stack in ``stacks.stack_table``; a report keeps them under ``stacks`` too)."""
    return doc["stacks"]["stack_table"][thread["stack"]]


def read_json(path) -> dict:
    """A document written under ``-o DIR``, validated."""
    return validate(json.loads(Path(path).read_text()))


def run_json(*args: str, **kw) -> tuple[int, dict]:
    """Run a command with ``--json`` in a child process (:func:`run_cli`); its exit status and its
    document (validated against the schema). :func:`main_json` runs it in this process."""
    res = run_cli(*args, "--json", **kw)
    assert res.stdout.strip(), f"no JSON printed; stderr:\n{res.stderr}"
    return res.returncode, validate(json.loads(res.stdout))


GOLDEN = Path(__file__).resolve().parent / "golden"


MAPS = {"environ", "ip_hosts", "seqs", "hosts", "collectives", "communicators", "formats", "groups", "slices"}
"""Objects keyed by data (variable names, addresses, group labels...): their shape is one ``"*"``."""


def shape(value, key: str = ""):
    """The shape of JSON data: objects keep their keys (maps keyed by data, :data:`MAPS`, become
    ``{"*": shape}``), lists the merged shape of their items, scalars their type name (``"int|null"``
    when items differ)."""
    if isinstance(value, dict):
        if key in MAPS:
            merged = None
            for v in value.values():
                merged = _merge(merged, shape(v))
            return {"*": merged} if merged is not None else {}
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        merged = None
        for item in value:
            merged = _merge(merged, shape(item, key))
        return [] if merged is None else [merged]
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def _merge(a, b):
    if a is None or a == b:  # (None: a key the other object does not have)
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):  # (the facts of several readers: the union of their keys)
        return {k: _merge(a.get(k), b.get(k)) for k in [*a, *[k for k in b if k not in a]]}
    if isinstance(a, list) and isinstance(b, list):
        return b if not a else a if not b else [_merge(a[0], b[0])]
    names = set(str(a).split("|")) | set(str(b).split("|")) if isinstance(a, str) and isinstance(b, str) else {str(a), str(b)}
    return "|".join(sorted(names))


def check_golden(doc: dict, name: str) -> None:
    """The document's shape (keys in order, value types) is the one pinned in ``tests/golden/NAME.json``.

    ``HANGDBG_UPDATE_GOLDEN=1`` rewrites the file instead (review the diff before committing it).
    """
    got = shape(doc)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("HANGDBG_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
        return
    want = json.loads(path.read_text())
    assert got == want, f"the shape of the {name} document changed: compare with {path} (HANGDBG_UPDATE_GOLDEN=1 rewrites it)"


def suspects(doc: dict) -> list[dict]:
    """The findings of severity ``suspect`` of a document, in its order."""
    return [f for f in doc["findings"] if f["severity"] == "suspect"]


def of_kind(doc: dict, kind: str) -> list[dict]:
    """The findings of one kind."""
    return [f for f in doc["findings"] if f["kind"] == kind]


@pytest.fixture(scope="module")
def hung_job(request):
    """A real demo job hung in the module's ``SCENARIO`` (and ``NPROC``, default 4; ``ARGS``: more
    arguments of the job script, default none)."""
    pytest.importorskip("torch")
    from hangdbg.demo.launch import DemoJob

    scenario = request.module.SCENARIO
    nproc = getattr(request.module, "NPROC", 4)
    job = DemoJob(scenario, nproc, args=getattr(request.module, "ARGS", ())).start()
    try:
        job.wait_ready()
        yield job
    finally:
        job.stop()


@pytest.fixture(scope="session")
def slurm_cluster():
    """A private 2-node SLURM cluster (tests/infra/slurm.py), booted once per pytest worker (the
    ``localslurm`` xdist group keeps every test that uses it on one worker) and stopped at the end
    of the session. Tests take it through :func:`cluster`."""
    from infra.slurm import LocalSlurm, SlurmUnavailable

    try:
        c = LocalSlurm().start()
    except SlurmUnavailable as exc:
        pytest.skip(f"no local SLURM cluster: {exc}")
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def cluster(slurm_cluster):
    """The worker's SLURM cluster (:func:`slurm_cluster`), handed to one test module at a time:
    after the module every job it left is cancelled and the nodes are idle again, as a fresh
    cluster's would be."""
    yield slurm_cluster
    slurm_cluster.reset()


@pytest.fixture(scope="session")
def sshd_server():
    """A private sshd on 127.0.0.1 with node1..node3 aliases (tests/infra/sshd.py), started once
    per pytest worker (the ``localsshd`` xdist group keeps every test that uses it on one worker)
    and stopped at the end of the session. Tests take it through :func:`sshd`."""
    from infra.sshd import LocalSshd, SshdUnavailable

    try:
        server = LocalSshd().start()
    except SshdUnavailable as exc:
        pytest.skip(f"no local sshd: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sshd(sshd_server):
    """The worker's sshd (:func:`sshd_server`), handed to one test module at a time: the ssh
    sessions a module left open (and what runs in them) are ended after it."""
    yield sshd_server
    sshd_server.end_sessions()


@pytest.fixture(scope="module")
def ray_head():
    """A private one-node Ray cluster on 127.0.0.1 (tests/infra/ray_cluster.py) for one test module;
    every process it started (and every driver) is killed after it, even when a test failed."""
    from infra.ray_cluster import LocalRay, RayUnavailable

    pytest.importorskip("ray")
    head = LocalRay()
    try:
        head.start()
    except RayUnavailable as exc:
        pytest.skip(f"no local Ray cluster: {exc}")
    try:
        yield head
    finally:
        head.stop()


@pytest.fixture
def rank_process() -> Iterator[int]:
    """A sleeping Python process with RANK/WORLD_SIZE set, owned by the test's user: a rank to dump
    (run as root: a rank of another user's job for a scanner run as ``nobody``); its pid."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env)
    try:
        time.sleep(0.3)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()



@pytest.fixture
def leftovers(tmp_path_factory, monkeypatch):
    """The test's own processes and temporary files (tests/infra/leftovers.py): the environment is
    marked and ``TMPDIR`` is an empty folder of the test's; after the test, none of its processes
    may be alive (10 s grace) and its TMPDIR must be empty. A test with remote sessions sets
    ``leftovers.extra = sshd.session_pids``. What is left is killed after the check."""
    from infra.leftovers import Leftovers

    tracker = Leftovers(tmp_path_factory.mktemp("tmpdir"))
    for key, value in tracker.env().items():
        monkeypatch.setenv(key, value)
    yield tracker
    try:
        tracker.assert_none()
        assert not tracker.temp_files(), f"temporary files left: {tracker.temp_files()}"
    finally:
        tracker.kill()

# --------------------------------------------------------------------------------------- lanes
# Every test is put in its lane here, from its fixtures and its name, so that nobody has to remember
# a decorator; `pytest -m "not real and not daemon and not fuzz"` is the fast lane. A test no rule
# catches but that belongs elsewhere says so itself (``@pytest.mark.real``, ``pytestmark``).

DAEMON_FIXTURES = {
    "slurm_cluster": "the private SLURM cluster (munged, slurmctld, two slurmd)",
    "sshd_server": "the private sshd on loopback",
    "ray_head": "a private one-node Ray cluster on 127.0.0.1",
}
DAEMON_GROUPS = {"slurm_cluster": "localslurm", "sshd_server": "localsshd", "ray_head": "localray"}
"""The xdist group of each daemon: under ``--dist loadgroup`` the daemon boots on one worker only."""

REAL_FIXTURES = {
    "hung_job": "a real hung torchrun/gloo demo job",
    "topology_dump": "a real hung demo job of a topology scenario",
    "rank_process": "a real process, dumped with real py-spy",
    "fake_rank": "a real process, dumped with real py-spy",
    "sleeper": "a real process, dumped with real py-spy",
    "zombie_and_live": "real processes, dumped with real py-spy",
    "real_dumps": "the flight-recorder dumps of a real hung gloo job",
    "torchrun_runs": "two real torchrun/gloo jobs that fail",
    "torch_core": "the core of a real torch process, read with gdb",
    "cores": "real core files, read with gdb",
    "hung_ranks": "real processes dumped with py-spy and gcore",
    "crashed_node": "a real core file, read with gdb",
    "dead_job": "the core of a real torch process, read with gdb",
    "big_report": "a 10,000-rank report through the real command line",
}
"""Fixtures that start real jobs or real tools (py-spy, gdb, torchrun): a test that uses one
(directly or through another fixture) is ``real``."""

REAL_MODULE_PREFIX = "test_real_"
DAEMON_MODULES = {"test_infra_slurm", "test_infra_sshd"}
FUZZ_MODULES = {"test_fuzz_mutations", "test_fuzz_readers", "test_fuzz_regressions"}
REAL_NAME = re.compile(r"^test_real_|(?:^|_)chromium(?:_|$)")
"""A test named for what it runs on, ``test_real_...`` (``test_real_segfault_root_cause``), or for
Chromium is ``real``."""
FUZZ_WORD = re.compile(r"(?:^|_)fuzz")
"""``test_fuzz_...``, ``test_fuzzed_...``: ``fuzz``."""
HEAVY_EXAMPLES = 100
"""A hypothesis test that runs more examples than this is a heavy one: ``fuzz``."""


def _hypothesis_examples(item) -> int:
    """How many examples a hypothesis test asks for (0 for other tests)."""
    fn = getattr(item, "obj", None)
    settings = getattr(fn, "_hypothesis_internal_use_settings", None)
    if settings is None or not getattr(fn, "is_hypothesis_test", False):
        return 0
    return settings.max_examples


def lanes_of(item) -> set[str]:
    """The lanes (``real``, ``daemon``, ``fuzz``) the rules put a test in; none: the fast lane."""
    module = item.module.__name__ if item.module is not None else ""
    name = item.originalname if hasattr(item, "originalname") else item.name
    fixtures = set(item.fixturenames)
    lanes = set()
    if fixtures & DAEMON_FIXTURES.keys() or module in DAEMON_MODULES:
        lanes.add("daemon")
    if fixtures & REAL_FIXTURES.keys() or module.startswith(REAL_MODULE_PREFIX) or REAL_NAME.search(name):
        lanes.add("real")
    if module in FUZZ_MODULES or FUZZ_WORD.search(name) or _hypothesis_examples(item) > HEAVY_EXAMPLES:
        lanes.add("fuzz")
    return lanes


def _daemon_group(item) -> str | None:
    """The xdist group of the daemon a test uses, if any."""
    daemons = sorted(DAEMON_GROUPS[f] for f in set(item.fixturenames) & DAEMON_GROUPS.keys())
    if len(daemons) > 1:
        raise pytest.UsageError(f"{item.nodeid} uses both daemons {daemons}: give it a group of its own")
    return daemons[0] if daemons else None


def _shares_a_module_fixture(item) -> bool:
    """Whether a test uses a module-scoped fixture (a real job started once per module, say)."""
    return any(defs[-1].scope == "module" for defs in item._fixtureinfo.name2fixturedefs.values())


def xdist_groups(items) -> dict:
    """{test: xdist group} for ``--dist loadgroup``: a daemon's tests go to its group (the daemon
    boots on one worker); the tests that share a module-scoped fixture go to their module's group,
    or to the module's daemon group when other tests of the module use a daemon (the fixture is
    set up once, on one worker). Other tests are spread one by one."""
    module_daemon: dict[str, str] = {}
    for item in items:
        group = _daemon_group(item)
        if group is not None:
            other = module_daemon.setdefault(item.module.__name__, group)
            if other != group:
                raise pytest.UsageError(f"{item.module.__name__} uses both daemons ({other}, {group}): split it")
    groups = {}
    for item in items:
        group = _daemon_group(item)
        if group is None and _shares_a_module_fixture(item):
            group = module_daemon.get(item.module.__name__, item.module.__name__)
        if group is not None:
            groups[item] = group
    return groups


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks under loadgroup
def pytest_collection_modifyitems(config, items):
    groups = xdist_groups(items)
    for item in items:
        for lane in sorted(lanes_of(item)):
            item.add_marker(getattr(pytest.mark, lane))
        if item in groups and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(groups[item]))


def pytest_runtest_setup(item):
    """Under ``--dist loadgroup`` a worker tells xdist the group of a test through its node id
    (``...@group``). With pytest 9.2 and pytest-xdist 3.8 that no longer takes effect
    (pytest-xdist#1386): the groups are silently ignored and a daemon or a module's real job would
    start on both workers. Such a test fails here, before its fixtures start anything."""
    if getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
        pytest.fail(f"pytest-xdist ignored this test's xdist_group under --dist loadgroup (pytest-xdist#1386, "
                    f"pytest {pytest.__version__}): install pytest<9.2, as pyproject.toml asks", pytrace=False)
