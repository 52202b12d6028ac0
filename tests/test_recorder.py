"""The in-job op recorder: the record parser (good, torn, garbled, empty), the file writer and the
reader by pid without torch, then real gloo jobs: one process checking async ops and the P2POp
patch, and a 4-rank torchrun job hung with rank 1 in a ``recv`` nobody sends, read from outside."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hangdbg.hooks.recorder import _head, _RecordFile, _suffix, record_dir
from hangdbg.stacks.op_record import CurrentOp, OpRecord, parse_op_record
from hangdbg.collect.op_records import read_op_records, record_path

ROOT = Path(__file__).resolve().parent.parent

GOOD = ('{"gen":                   7,"version":1,"pid":4242,"rank":1,"world_size":4,'
        '"groups":{"WORLD":[0,1,2,3],"1":[1,2,3]},"op":{"op":"recv","group":"WORLD",'
        '"group_ranks":[0,1,2,3],"peer":0,"seq":2,"async":false,"state":"running",'
        '"since":1764000000.123456}' + " " * 200 + ',"end":                   7}\n')


def _doc(**changes) -> str:
    doc = json.loads(GOOD)
    for key, value in changes.items():
        if key.startswith("op_"):
            doc["op"][key[3:]] = value
        else:
            doc[key] = value
    return json.dumps(doc)


# -- parser ------------------------------------------------------------------------------------

def test_parse_good_record():
    rec = parse_op_record(GOOD)
    assert rec == OpRecord(pid=4242, rank=1, world_size=4, groups=(("WORLD", (0, 1, 2, 3)), ("1", (1, 2, 3))),
                           op=CurrentOp(op="recv", group="WORLD", group_ranks=(0, 1, 2, 3), peer=0, seq=2,
                                        state="running", async_=False, since=1764000000.123456))
    assert rec.group_ranks("1") == (1, 2, 3) and rec.group_ranks("nope") is None
    with pytest.raises(AttributeError):
        rec.pid = 1  # type: ignore[misc]  # frozen


def test_parse_before_init_and_before_any_op():
    rec = parse_op_record(_doc(rank=None, world_size=None, groups={}, op=None))
    assert rec is not None and rec.rank is None and rec.world_size is None and rec.groups == () and rec.op is None


def test_parse_op_without_group_ranks_takes_them_from_groups():
    doc = json.loads(GOOD)
    del doc["op"]["group_ranks"]
    doc["op"]["group"] = "1"
    rec = parse_op_record(json.dumps(doc))
    assert rec is not None and rec.op is not None and rec.op.group_ranks == (1, 2, 3)


@pytest.mark.parametrize("text", [
    GOOD.replace(',"end":                   7', ',"end":                   8'),  # new end, old gen
    GOOD.replace('"gen":                   7', '"gen":                   6'),
    GOOD[:len(GOOD) // 2],  # cut in the middle
    GOOD.replace(',"end":                   7', ''),  # no end at all
], ids=["end-ahead", "gen-behind", "cut", "no-end"])
def test_parse_torn_record_is_none(text):
    assert parse_op_record(text) is None


@pytest.mark.parametrize("text", [
    "", "   \n", "\x00" * 4096, " " * 4096,
], ids=["empty", "blank", "nuls", "spaces"])
def test_parse_empty_is_none(text):
    assert parse_op_record(text) is None


@pytest.mark.parametrize("text", [
    "not json", "[1, 2]", "{", '"x"', "{}", "[" * 100000,
    _doc(version=2), _doc(pid=True), _doc(pid=-3), _doc(pid="4242"), _doc(rank="1"), _doc(world_size=1.5),
    _doc(groups=[]), _doc(groups={"WORLD": [0, "1"]}), _doc(groups={"WORLD": [-1]}), _doc(op=[]),
    _doc(op_state="stuck"), _doc(op_seq=None), _doc(op_seq=True), _doc(op_peer="0"), _doc(op_async=1),
    _doc(op_since="now"), _doc(op_op=""), _doc(op_group=None), _doc(op_group_ranks=[0, None]),
    GOOD.replace('"since":1764000000.123456', '"since":NaN'),
    GOOD.replace('"op":"recv"', '"op":7'),
], ids=lambda t: t[:40])
def test_parse_garbled_is_none_never_raises(text):
    assert parse_op_record(text) is None


def test_parse_op_of_unknown_group_without_ranks_is_none():
    doc = json.loads(GOOD)
    del doc["op"]["group_ranks"]
    doc["op"]["group"] = "9"
    assert parse_op_record(json.dumps(doc)) is None


# -- the writer and the reader, without torch --------------------------------------------------

def _write(path: Path, pid: int, ops: list[tuple[bytes, bytes]], groups: str = '"WORLD":[0,1]') -> _RecordFile:
    f = _RecordFile(path)
    f.write_header(b'{"gen":%20d,"version":1,"pid":%d,"rank":0,"world_size":2,"groups":{%s},"op":'
                   % (0, pid, groups.encode()), 400)
    for head, state in ops:
        f.write_op(head, _suffix(state))
    return f


def test_writer_round_trip_and_in_place_rewrites(tmp_path):
    path = tmp_path / "42.json"
    frag = b'"group":"WORLD","group_ranks":[0,1]'
    long = _head(b"all_gather_into_tensor", frag, None, 12345, True)
    short = _head(b"send", frag, 1, 3, False)
    f = _write(path, 42, [(long, b"issued"), (short, b"running")])
    try:
        text = path.read_text()
        assert len(text) == 4096 == os.path.getsize(path)
        rec = parse_op_record(text)
        assert rec is not None and rec.op is not None
        assert (rec.pid, rec.rank, rec.groups) == (42, 0, (("WORLD", (0, 1)),))
        assert (rec.op.op, rec.op.peer, rec.op.seq, rec.op.state, rec.op.async_) == ("send", 1, 3, "running", False)
        assert abs(rec.op.since - time.time()) < 60
        f.write_state(_suffix(b"done"))
        rec2 = parse_op_record(path.read_text())
        assert rec2 is not None and rec2.op is not None and rec2.op.state == "done" and rec2.op.seq == 3
        # the header grows (a new, huge group) and keeps the op; the file grows by pages
        big = ",".join(map(str, range(3000)))
        f.write_header(b'{"gen":%20d,"version":1,"pid":42,"rank":0,"world_size":3000,"groups":{"WORLD":[%s]},"op":'
                       % (0, big.encode()), 400 + len(big))
        rec3 = parse_op_record(path.read_text())
        assert os.path.getsize(path) % 4096 == 0 and os.path.getsize(path) > 4096
        assert rec3 is not None and rec3.world_size == 3000 and rec3.op == rec2.op
        f.write_state(_suffix(b"failed"))
        rec4 = parse_op_record(path.read_text())
        assert rec4 is not None and rec4.op is not None and rec4.op.state == "failed"
    finally:
        f.close(remove=True)
    assert not path.exists()


def test_reader_live_stale_missing_unreadable_foreign(tmp_path):
    me = os.getpid()
    f = _write(tmp_path / f"{me}.json", me, [(_head(b"barrier", b'"group":"WORLD","group_ranks":[0,1]', None, 1,
                                                     False), b"running")])
    try:
        got = read_op_records([me, 999999999], str(tmp_path))
        op = got[me].op
        assert list(got) == [me] and op is not None and op.op == "barrier"
    finally:
        f.close(remove=False)
    assert read_op_records([me], str(tmp_path)) == {}  # nobody holds the lock: stale
    # a live lock holder, but the record inside names another pid
    other = _write(tmp_path / "1.json", 2, [])
    try:
        assert read_op_records([1], str(tmp_path)) == {}
    finally:
        other.close(remove=True)
    (tmp_path / "3.json").mkdir()  # unreadable as a file
    assert read_op_records([3], str(tmp_path)) == {}


def test_reader_retries_a_torn_record(tmp_path, monkeypatch):
    me = os.getpid()
    path = tmp_path / f"{me}.json"
    f = _write(path, me, [(_head(b"barrier", b'"group":"WORLD","group_ranks":[0,1]', None, 1, False), b"running")])
    try:
        import hangdbg.collect.op_records as reader

        texts = iter([GOOD.replace('"gen":                   7', '"gen":                   6')])
        real = reader.parse_op_record
        monkeypatch.setattr(reader, "parse_op_record", lambda t: real(next(texts, t)))
        assert me in read_op_records([me], str(tmp_path))
    finally:
        f.close(remove=True)


HAMMER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from hangdbg.hooks.recorder import _head, _RecordFile, _suffix
    f = _RecordFile(Path(sys.argv[1]))
    f.write_header(b'{"gen":%20d,"version":1,"pid":1,"rank":0,"world_size":2,"groups":{"WORLD":[0,1]},"op":' % 0, 400)
    world = b'"group":"WORLD","group_ranks":[0,1]'
    long = b'"group":"a-long-group-name-' + b"x" * 200 + b'","group_ranks":[0,1]'
    print("ready", flush=True)
    deadline, seq = time.monotonic() + float(sys.argv[2]), 0
    while time.monotonic() < deadline:
        seq += 1  # even: a short all_reduce on WORLD; odd: a long broadcast with peer 1
        if seq % 2:
            f.write_op(_head(b"broadcast", long, 1, seq, False), _suffix(b"running"))
        else:
            f.write_op(_head(b"all_reduce", world, None, seq, True), _suffix(b"issued"))
        f.write_state(_suffix(b"done"))
    print(seq, flush=True)
""")


def test_torn_writes_are_never_read_as_a_record(tmp_path):
    """A writer rewrites the op as fast as it can, alternating two ops of different lengths; every
    record a reader parses is one of them whole (a mix of the two is a torn read not caught)."""
    path = tmp_path / "1.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", HAMMER, str(path), "3"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        fd = os.open(path, os.O_RDONLY)
        whole = torn = 0
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            rec = parse_op_record(os.pread(fd, 8192, 0).decode())
            if rec is None:
                torn += 1
                continue
            op = rec.op
            if op is None:  # before the writer's first op
                assert whole == 0
                continue
            whole += 1
            if op.seq % 2:
                assert (op.op, op.group[:6], op.peer, op.async_) == ("broadcast", "a-long", 1, False), op
                assert op.state in ("running", "done")
            else:
                assert (op.op, op.group, op.peer, op.async_) == ("all_reduce", "WORLD", None, True), op
                assert op.state in ("issued", "done")
        os.close(fd)
        assert whole > 100, (whole, torn)
        print(f"whole {whole}, torn (read again) {torn}")
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == 0 and proc.stdout is not None and int(proc.stdout.read()) > 1000


def test_default_directory_rule(tmp_path):
    assert record_dir({"HANGDBG_RECORD_DIR": str(tmp_path)}) == tmp_path
    assert record_dir({}, 1234).name == "hangdbg-rec-1234"
    assert record_path(5, str(tmp_path)) == tmp_path / "5.json"
    assert record_path(os.getpid()).name == f"{os.getpid()}.json"


def test_writer_refuses_a_file_held_by_another_live_process(tmp_path):
    path = tmp_path / "7.json"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(BlockingIOError):
            _RecordFile(path)
    finally:
        os.close(fd)


# -- real gloo jobs ----------------------------------------------------------------------------

ONE_RANK = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    from hangdbg.hooks import record_collectives
    from hangdbg.hooks.recorder import stop_recording
    from hangdbg.collect.op_records import read_op_records

    out = {}
    def now():
        rec = read_op_records([os.getpid()]).get(os.getpid())
        op = None if rec is None else rec.op
        return None if op is None else [op.op, op.state, op.seq, op.peer, op.async_]

    path = record_collectives()                         # before init: fine
    out["before_init"] = read_op_records([os.getpid()])[os.getpid()].rank
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
    t = torch.ones(16)
    dist.all_reduce(t)
    out["sync"] = now()
    w = dist.all_reduce(t, async_op=True)
    out["issued"] = now()
    dist.barrier()
    out["other"] = now()
    w.wait()
    out["waited"] = now()
    ops = [dist.P2POp(dist.isend, t, 0), dist.P2POp(dist.irecv, torch.zeros(16), 0)]  # the patched isend
    out["p2pop"] = ops[0].op is dist.distributed_c10d.isend
    try:
        dist.batch_isend_irecv(ops)  # gloo cannot send to itself: the batch raises
    except RuntimeError:
        pass
    out["batch"] = now()
    out["rank"] = read_op_records([os.getpid()])[os.getpid()].rank
    out["file"] = os.path.exists(path)
    stop_recording()
    out["stopped"] = [os.path.exists(path), getattr(dist.all_reduce, "__hangdbg_recorded__", None) is None]
    print("RESULT " + json.dumps(out))
""")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.real
def test_one_rank_async_ops_and_p2pop(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "one.py"
    script.write_text(ONE_RANK)
    env = dict(os.environ, OMP_NUM_THREADS="1", HANGDBG_RECORD_DIR=str(tmp_path / "rec"),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, str(script), str(_free_port())], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.split("RESULT ", 1)[1])
    assert out["before_init"] is None  # no RANK in the environment, not initialised yet
    assert out["sync"] == ["all_reduce", "done", 1, None, False]
    assert out["issued"] == ["all_reduce", "issued", 2, None, True]
    assert out["other"] == ["barrier", "done", 3, None, False]
    assert out["waited"] == ["all_reduce", "done", 2, None, True]
    assert out["p2pop"] is True
    assert out["batch"] == ["batch_isend_irecv", "failed", 2, 0, True]  # two ops with peer 0
    assert out["rank"] == 0 and out["file"] is True
    assert out["stopped"] == [False, True]
    assert not list((tmp_path / "rec").iterdir())


HUNG = textwrap.dedent("""
    import json, os, sys
    from datetime import timedelta
    import torch, torch.distributed as dist
    from hangdbg.hooks import record_collectives
    from hangdbg.collect.op_records import read_op_records

    def op_now():
        op = read_op_records([os.getpid()])[os.getpid()].op
        return [op.op, op.state, op.seq, op.peer, op.async_]

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    record_collectives()
    rank = dist.get_rank()
    g = dist.new_group([1, 2, 3])                # WORLD seq 1 on every rank
    t = torch.ones(16)
    for _ in range(3):
        dist.all_reduce(t)                       # WORLD seq 2..4
    if rank in (1, 2, 3):
        for _ in range(2):
            dist.all_reduce(t, group=g)          # g seq 1..2
    dist.barrier()                               # WORLD seq 5
    if rank == 0:
        dist.send(t, dst=1)                      # 0 -> 1, first
    elif rank == 1:
        dist.recv(t, src=0)
    else:                                        # 2 and 3: a batch, then an isend/irecv pair
        peer = 5 - rank
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, torch.zeros(16), peer)])
        seen = [op_now()]
        for w in works:
            w.wait()
        seen.append(op_now())
        w = dist.isend(t, dst=3) if rank == 2 else dist.irecv(t, src=2)
        seen.append(op_now())
        w.wait()
        seen.append(op_now())
        with open(os.path.join(sys.argv[1], f"seen-{rank}.json"), "w") as f:
            json.dump(seen, f)
    if rank == 1:
        dist.recv(t, src=0)                      # the hang: 0 never sends a second time
    elif rank == 0:
        dist.all_reduce(t)                       # WORLD seq 6: waits for rank 1
    else:
        dist.all_reduce(t, group=g)              # g seq 3: waits for rank 1
""")


def _rank_pids(launcher: int, script: Path) -> list[int]:
    import psutil

    try:
        kids = psutil.Process(launcher).children(recursive=True)
    except psutil.Error:
        return []
    pids = []
    for p in kids:
        try:
            if any(arg.endswith(str(script)) for arg in p.cmdline()):
                pids.append(p.pid)
        except psutil.Error:
            pass
    return pids


def _stop(proc: subprocess.Popen, ranks: list[int]) -> None:
    """Stop the job: SIGTERM to the launcher's group (torchrun stops its ranks, each in a session of
    its own), then SIGKILL to the group and to every rank still there."""
    ranks = ranks + [p for p in _rank_pids(proc.pid, Path("hung.py")) if p not in ranks]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.real
def test_real_torchrun_job_hung_in_recv(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "hung.py"
    script.write_text(HUNG)
    rec_dir = tmp_path / "rec"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", HANGDBG_RECORD_DIR=str(rec_dir),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    log = tmp_path / "job.log"
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
                "--monitor_interval", "1", str(script), str(tmp_path)]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        by_rank: dict[int, OpRecord] = {}
        pids: list[int] = []
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"the job exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            pids = _rank_pids(proc.pid, script)
            records = read_op_records(pids)  # each rank's own HANGDBG_RECORD_DIR, from /proc/PID/environ
            by_rank = {r.rank: r for r in records.values() if r.rank is not None}
            now = {k: (r.op.op, r.op.state) for k, r in by_rank.items() if r.op is not None}
            if len(pids) == 4 and now == {0: ("all_reduce", "running"), 1: ("recv", "running"),
                                          2: ("all_reduce", "running"), 3: ("all_reduce", "running")}:
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"the ranks did not reach their hang: {by_rank}\n{log.read_text()[-3000:]}")
        assert read_op_records(pids, str(rec_dir)).keys() == set(pids)  # the same, with the directory given
        world, sub = (0, 1, 2, 3), (1, 2, 3)
        name = by_rank[2].op.group  # type: ignore[union-attr]
        assert name != "WORLD" and by_rank[3].op.group == name  # type: ignore[union-attr]
        expect = {
            0: ("all_reduce", "WORLD", world, None, 6),
            1: ("recv", "WORLD", world, 0, 2),
            2: ("all_reduce", name, sub, None, 3),
            3: ("all_reduce", name, sub, None, 3),
        }
        for rank, (op, group, ranks, peer, seq) in expect.items():
            r = by_rank[rank]
            assert r.op is not None and r.world_size == 4 and r.pid in pids
            assert (r.op.op, r.op.group, r.op.group_ranks, r.op.peer, r.op.seq, r.op.state, r.op.async_) == \
                (op, group, ranks, peer, seq, "running", False), (rank, r.op)
            assert time.time() - 120 < r.op.since <= time.time()
            assert dict(r.groups) == ({"WORLD": world} if rank == 0 else {"WORLD": world, name: sub})
        assert sorted(p.name for p in rec_dir.iterdir()) == sorted(f"{p}.json" for p in pids)
        for rank in (2, 3):  # async p2p: issued, waited; a batch of two ops with one peer counts 2
            peer = 5 - rank
            op = "isend" if rank == 2 else "irecv"
            assert json.loads((tmp_path / f"seen-{rank}.json").read_text()) == [
                ["batch_isend_irecv", "issued", 2, peer, True], ["batch_isend_irecv", "done", 2, peer, True],
                [op, "issued", 3, peer, True], [op, "done", 3, peer, True]]
    finally:
        for pid in pids:  # SIGKILL the ranks first: a rank that outlived a peer could end normally
            try:          # (its collective fails, atexit removes its file) before torchrun's SIGTERM came
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _stop(proc, pids)
    for _ in range(40):  # killed ranks leave their files (no atexit), but nobody holds them: stale
        if read_op_records(pids, str(rec_dir)) == {}:
            break
        time.sleep(0.25)
    assert read_op_records(pids, str(rec_dir)) == {}
    assert len(list(rec_dir.iterdir())) == 4
