"""One writer per store location, a journal that only grows, and what the mirror refuses to read
or write (issue 40, items 2-4, 6-8; issue 42, item 1), on a directory store (the rules are the
store's, not one file system's; the S3 cases are in tests/test_run_store.py and the end-to-end
test on a pool, tests/test_many_machines.py).

A "run directory" here is a fake one (a journal naming nodes, their files) unless the test says
otherwise; the link-swapping program is a real program in the local sandbox.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest

import swarm_evo.store.mirror as mirror_module
from object_store import store_files
from swarm_evo.store import RunMirror, StoreError, fetch_run, mirror_run, open_store, resolve_run
from swarm_evo.store.lease import LEASE_FILE, LocationClashError, StaleCopyError, SupersededError, new_owner, take_over
from swarm_evo.store.walk import walk_files


class FakeRun:
    """What :func:`fake_run` made: the run directory, its run id and node ids."""

    def __init__(self, run_dir: Path, run_id: str, nodes: list[str]):
        self.dir, self.run_id, self.nodes = run_dir, run_id, nodes

    def mirror(self, store, owner=None, **kwargs):
        return mirror_run(self.dir, store, self.run_id, self.nodes, owner or new_owner(), **kwargs)


def fake_run(run_dir: Path, nodes: int, run_id: str = "run-a") -> FakeRun:
    """A run directory with ``nodes`` nodes (files written once) and a journal naming them."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for i in range(nodes):
        node = run_dir / "nodes" / f"n{i}"
        if not node.exists():
            (node / "submission").mkdir(parents=True)
            (node / "solution.py").write_text(f"print({i})\n")
            (node / "submission" / "submission.csv").write_text("id,y\n1,0\n")
    data = {"info": {"run_id": run_id}, "nodes": [{"id": f"n{i}"} for i in range(nodes)]}
    (run_dir / "journal.json").write_text(json.dumps(data))
    return FakeRun(run_dir, run_id, [n["id"] for n in data["nodes"]])


def stored_ids(location) -> list[str]:
    location.fs.invalidate_cache()
    return [n["id"] for n in json.loads(location.fs.cat_file(location.path("journal.json")))["nodes"]]


# ------------------------------------------------------------------------------- one writer (item 2)
def test_a_copy_taken_over_elsewhere_uploads_nothing_more_and_says_who_took_it(tmp_path):
    store = open_store(tmp_path / "store")
    location = store.run("wine-s0")
    first = fake_run(tmp_path / "machine-1" / "wine-s0", 2)
    old = RunMirror(first.dir, location,
                    lease=take_over(location, "run-a", ["n0", "n1"], new_owner("flow-run-1", "wine-s0")))
    assert old.sync_once() == 5 and stored_ids(location) == ["n0", "n1"]

    # declared dead; the run is resumed on machine 2 from the store and goes on
    second_dir = tmp_path / "machine-2" / "wine-s0"
    fetch_run(location, second_dir)
    second = fake_run(second_dir, 3)
    new_lease = take_over(location, "run-a", ["n0", "n1", "n2"], new_owner("flow-run-2", "wine-s0-resume1"))
    assert new_lease.generation == 2
    RunMirror(second_dir, location, lease=new_lease).sync_once()
    before = store_files(location.url)

    fake_run(first.dir, 4)  # the old copy thaws and goes on: a different third node, a fourth
    (first.dir / "nodes" / "n2" / "solution.py").write_text("print('the old copy')\n")
    with pytest.raises(SupersededError) as caught:
        old.sync_once()
    message = str(caught.value)
    assert "superseded by flow run flow-run-2 (wine-s0-resume1) on host" in message and "uploads nothing more" in message
    assert store_files(location.url) == before, "the superseded copy uploaded nothing"
    assert stored_ids(location) == ["n0", "n1", "n2"]


def test_a_copy_frozen_in_the_middle_of_a_sync_stops_before_its_next_upload(tmp_path, monkeypatch):
    """SIGSTOP between two uploads of one sync (simulated: the lease is taken over while the walk is
    paused and the monotonic clock has moved on): the next upload checks the lease first."""
    store = open_store(tmp_path / "store")
    location = store.run("r")
    journal = fake_run(tmp_path / "r", 3)
    mirror = RunMirror(journal.dir, location, lease=take_over(location, "run-a", ["n0", "n1", "n2"],
                                                                       new_owner("old")))
    real_walk = mirror_module.walk_files
    clock = [time.monotonic()]
    monkeypatch.setattr(mirror_module.time, "monotonic", lambda: clock[0])

    def frozen_after_one_file(root, **kwargs):
        given = 0
        for entry in real_walk(root, **kwargs):  # lazily: an entry opens relative to its folder's open descriptor
            if given == 1:  # the first file went up; frozen for minutes, and taken over meanwhile
                take_over(location, "run-a", ["n0", "n1", "n2"], new_owner("new"))
                clock[0] += 120.0
            given += entry.rel != "journal.json"
            yield entry

    monkeypatch.setattr(mirror_module, "walk_files", frozen_after_one_file)
    with pytest.raises(SupersededError):
        mirror.sync_once()
    uploaded = [p for p in store_files(location.url) if p != LEASE_FILE]
    assert len(uploaded) == 1 and "journal.json" not in uploaded, uploaded


def test_a_copy_frozen_in_the_middle_of_a_lease_check_checks_again_when_it_thaws(tmp_path, monkeypatch):
    """Frozen after the store answered "the lease is yours" and before the writer noted it: what it
    read is minutes old when it thaws, so the next upload checks again (seen on a pool: several
    files of the old copy's step went up right after the thaw)."""
    store = open_store(tmp_path / "store")
    location = store.run("r")
    journal = fake_run(tmp_path / "r", 3)
    mirror = RunMirror(journal.dir, location, lease=take_over(location, "run-a", journal.nodes, new_owner("old")))
    clock = [time.monotonic()]
    monkeypatch.setattr(mirror_module.time, "monotonic", lambda: clock[0])
    real_check = mirror_module.check_lease

    def answered_then_frozen(target, lease):
        real_check(target, lease)  # "yours", as read before the freeze
        take_over(location, "run-a", journal.nodes, new_owner("new"))
        clock[0] += 120.0

    monkeypatch.setattr(mirror_module, "check_lease", answered_then_frozen)
    with pytest.raises(SupersededError):
        mirror.sync_once()
    assert [p for p in store_files(location.url) if p != LEASE_FILE] == [], "nothing went up after the thaw"


def test_the_mirror_thread_stops_the_run_when_superseded(tmp_path, caplog):
    store = open_store(tmp_path / "store")
    journal = fake_run(tmp_path / "r", 1)
    seen = []
    mirror = journal.mirror(store, new_owner("mine"), on_superseded=seen.append)
    assert mirror.flush(timeout=30)
    take_over(store.run("r"), "run-a", ["n0"], new_owner("theirs", "r-resume1"))
    with caplog.at_level(logging.ERROR, logger="swarm_evo.store.mirror"):
        fake_run(journal.dir, 2)
        assert not mirror.flush(timeout=30), "a superseded mirror never reports a completed sync"
    assert len(seen) == 1 and "superseded by flow run theirs (r-resume1)" in str(seen[0])
    assert "superseded by flow run theirs" in caplog.text
    assert not mirror.close(timeout=5)
    assert stored_ids(store.run("r")) == ["n0"]


# ------------------------------------------------------------- the journal only grows (item 3)
def test_a_stale_local_copy_is_refused_and_names_the_command(tmp_path):
    store = open_store(tmp_path / "store")
    location = store.run("r")
    ahead = fake_run(tmp_path / "now" / "r", 3)
    ahead.mirror(store).close(timeout=30)
    stale = fake_run(tmp_path / "old" / "r", 2)
    with pytest.raises(StaleCopyError) as caught:
        stale.mirror(store)
    assert f"swarm-evo resume {location.url}" in str(caught.value) and "2 nodes here, 3 in" in str(caught.value)
    assert stored_ids(location) == ["n0", "n1", "n2"]


def test_resume_of_a_url_takes_the_stores_copy_over_a_stale_local_one(tmp_path, caplog):
    store = open_store(f"file://{tmp_path / 'store'}")
    ahead = fake_run(tmp_path / "elsewhere" / "r", 3)
    ahead.mirror(store).close(timeout=30)
    scratch = tmp_path / "runs"
    fake_run(scratch / "r", 2)  # this machine's copy from before the run moved on
    (scratch / "r" / "notes.txt").write_text("mine")
    with caplog.at_level(logging.WARNING, logger="swarm_evo.store.fetch"):
        run_dir, _ = resolve_run(store.run("r").url, scratch)
    assert run_dir == scratch / "r"
    assert [n["id"] for n in json.loads((run_dir / "journal.json").read_text())["nodes"]] == ["n0", "n1", "n2"]
    (aside,) = scratch.glob("r.stale-*")  # kept, not deleted
    assert (aside / "notes.txt").read_text() == "mine" and "moved it to" in caplog.text


def test_two_empty_journals_of_different_runs_are_not_the_same_run(tmp_path):
    store = open_store(f"file://{tmp_path / 'store'}")
    theirs = fake_run(tmp_path / "a" / "r", 0, run_id="run-b")
    theirs.mirror(store).close(timeout=30)
    scratch = tmp_path / "runs"
    fake_run(scratch / "r", 0, run_id="run-a")
    run_dir, _ = resolve_run(store.run("r").url, scratch)
    assert run_dir != scratch / "r" and run_dir.name == "r"  # a place of its own, the local run untouched
    assert json.loads((scratch / "r" / "journal.json").read_text())["info"]["run_id"] == "run-a"
    assert json.loads((run_dir / "journal.json").read_text())["info"]["run_id"] == "run-b"


# ------------------------------------------------------------ a location has one owner (item 6)
def test_a_new_run_never_mirrors_over_another_run_of_the_same_name(tmp_path):
    store = open_store(tmp_path / "store")
    last_week = fake_run(tmp_path / "last-week" / "nightly", 3, run_id="run-old")
    (last_week.dir / "grade_report.json").write_text('{"score": 0.8}')
    last_week.mirror(store).close(timeout=30)
    before = store_files(store.run("nightly").url)
    today = fake_run(tmp_path / "today" / "nightly", 0, run_id="run-new")
    with pytest.raises(LocationClashError) as caught:
        today.mirror(store)
    assert "holds another run (run id run-old" in str(caught.value) and "--run-dir" in str(caught.value)
    assert store_files(store.run("nightly").url) == before


# --------------------------------------------------------- files the store cannot take (item 4, 7)
def test_a_file_the_store_cannot_take_is_skipped_recorded_and_the_journal_keeps_moving(tmp_path, caplog):
    store = open_store(tmp_path / "store")
    journal = fake_run(tmp_path / "r", 1)
    node = journal.dir / "nodes" / "n0"
    (node / ("x" * 230 + ".csv")).write_text("a long but legal name")  # the old temporary name was 268 bytes
    (node / "big.bin").write_bytes(b"\0" * (2 * 1024 * 1024 + 1))
    not_utf8 = os.fsencode(node) + b"/caf\xe9.txt"
    with open(not_utf8, "wb") as fh:
        fh.write(b"latin-1 name")
    mirror = RunMirror(journal.dir, store.run("r"), max_file_mb=2)
    with caplog.at_level(logging.WARNING, logger="swarm_evo.store.mirror"):
        mirror.sync_once()
        fake_run(journal.dir, 3)
        mirror.sync_once()
    files = store_files(store.run("r").url)
    assert f"nodes/n0/{'x' * 230}.csv" in files
    assert stored_ids(store.run("r")) == ["n0", "n1", "n2"], "the journal moved on"
    assert set(mirror.skipped) == {"nodes/n0/big.bin", "nodes/n0/caf\\xe9.txt"}  # printable in logs and reports
    assert "over store.max_file_mb = 2" in mirror.skipped["nodes/n0/big.bin"]
    assert "not UTF-8" in mirror.skipped["nodes/n0/caf\\xe9.txt"]
    assert "caf\\xe9.txt" in caplog.text and "\udce9" not in caplog.text
    assert caplog.text.count("big.bin") == 1, "warned once"


def test_scratch_is_never_uploaded_wherever_it_moved(tmp_path):
    store = open_store(tmp_path / "store")
    journal = fake_run(tmp_path / "r", 1)
    run_dir = journal.dir
    for tree in ("nodes/n0", "attempts/n0", "interrupted/n9", "interrupted/n9-2"):
        (run_dir / tree / "working").mkdir(parents=True, exist_ok=True)
        (run_dir / tree / "working" / "model.bin").write_bytes(b"m" * 1000)
        (run_dir / tree / "solution.py").write_text("print(1)\n")
    (run_dir / "hidden_split" / "input").mkdir(parents=True)  # derived: rebuilt by every session (issue 41)
    (run_dir / "hidden_split" / "answers.csv").write_text("id,y\n1,0\n")
    RunMirror(run_dir, store.run("r"), derived=("hidden_split",)).sync_once()
    files = store_files(store.run("r").url)
    assert not [p for p in files if "/working/" in p or p.startswith("hidden_split/")], sorted(files)
    assert {"attempts/n0/solution.py", "interrupted/n9/solution.py", "interrupted/n9-2/solution.py"} <= set(files)


def test_fetch_refuses_files_over_the_cap(tmp_path, caplog):
    store = open_store(tmp_path / "store")
    journal = fake_run(tmp_path / "r", 1)
    journal.mirror(store).close(timeout=30)
    huge = Path(store.run("r").root) / "nodes" / "n0" / "planted.bin"  # put there by something else
    with open(huge, "wb") as fh:
        fh.truncate(3 * 1024 * 1024)
    with caplog.at_level(logging.WARNING, logger="swarm_evo.store.fetch"):
        fetched = fetch_run(store.run("r"), tmp_path / "copy", max_file_mb=2)
    assert fetched.skipped == {"nodes/n0/planted.bin": "3 MiB, over store.max_file_mb = 2"}
    assert not (tmp_path / "copy" / "nodes" / "n0" / "planted.bin").exists()
    assert (tmp_path / "copy" / "journal.json").exists() and not (tmp_path / "copy" / LEASE_FILE).exists()


# -------------------------------------------------------------- links a program swaps (42, item 1)
def test_the_walk_follows_no_link_at_any_depth(tmp_path):
    run_dir = tmp_path / "r"
    (run_dir / "nodes" / "n0" / "y").mkdir(parents=True)
    (run_dir / "nodes" / "n0" / "y" / "config").write_text("inside")
    host = tmp_path / "host"
    host.mkdir()
    (host / "config").write_text("HOST")
    (run_dir / "nodes" / "n1").mkdir()
    (run_dir / "nodes" / "n1" / "y").symlink_to(host)  # a folder that is a link
    seen = {}
    for entry in walk_files(run_dir):
        with entry.open() as fh:
            seen[entry.rel] = fh.read()
    assert seen == {"nodes/n0/y/config": b"inside"}


def test_a_program_swapping_links_all_run_long_gets_nothing_of_the_host_into_the_store(tmp_path, monkeypatch):
    """A real program in the local sandbox swaps its folder ``y`` for a link to a host folder in a
    tight loop while the mirror syncs every few milliseconds: the store holds nothing of the host."""
    from swarm_evo.sandbox import LocalSandbox

    marker = f"HOST-SECRET-{os.getpid()}"
    host = tmp_path / "host-home" / ".aws"
    host.mkdir(parents=True)
    (host / "config").write_text(marker)
    host.chmod(0o700)
    run_dir = tmp_path / "run"
    workdir = run_dir / "nodes" / "hostile"
    workdir.mkdir(parents=True)
    (run_dir / "journal.json").write_text('{"info": {}, "nodes": []}')
    public = tmp_path / "public"
    public.mkdir()
    code = f'''
import os, time
os.makedirs("y", exist_ok=True)
with open("y/config", "w") as fh:
    fh.write("harmless")
os.mkfifo("pipe")
end = time.time() + 6
swaps = 0
while time.time() < end:
    with open("y/config", "w") as fh:  # a new size and time: the mirror reads it again
        fh.write("harmless" * (1 + swaps % 7))
    os.rename("y", "y.real")
    os.symlink({str(host)!r}, "y")
    os.symlink({str(host / "config")!r}, "z")
    os.unlink("y")
    os.unlink("z")
    os.rename("y.real", "y")
    swaps += 1
print("swaps", swaps)
'''
    store = open_store(tmp_path / "store")
    sent: list[bytes] = []  # every upload, not only the store's last version of each file
    real_put = mirror_module.put_object

    def recording_put(target, rel, source, made_dirs=None, limit=None):
        data = source if isinstance(source, bytes) else source.read(limit if limit is not None else -1)
        sent.append(data)
        real_put(target, rel, data, made_dirs)

    monkeypatch.setattr(mirror_module, "put_object", recording_put)
    mirror = RunMirror(run_dir, store.run("run"), period=0.002).start()
    stop = threading.Event()

    def keep_syncing():
        while not stop.is_set():
            mirror.request()
            time.sleep(0.001)

    pusher = threading.Thread(target=keep_syncing, daemon=True)
    pusher.start()
    try:
        sandbox = LocalSandbox(python=sys.executable, num_threads=1, memory_limit_mb=512, max_output_bytes=100_000)
        result = sandbox.execute(code, workdir, public, timeout=30)
    finally:
        stop.set()
        pusher.join()
        assert mirror.close(timeout=60)
    assert result.exc_type is None, result.stderr
    swaps = int(result.stdout.split()[-1])
    assert swaps > 1000, result.stdout
    assert mirror.stats.syncs > 100, mirror.stats
    files = store_files(store.run("run").url)
    assert set(files.get("nodes/hostile/y/config", b"harmless").split(b"harmless")) == {b""}
    leaked = [p for p, data in files.items() if marker.encode() in data] + [d for d in sent if marker.encode() in d]
    assert len(sent) > 100 and not leaked, f"host bytes in the store: {leaked} after {mirror.stats.syncs} syncs, {swaps} swaps"


# ------------------------------------------------------------------------------ store URLs (item 8)
@pytest.mark.parametrize("url", ["s3:/bucket/x", "s3:bucket/x", "s3//bucket/x"])
def test_a_mistyped_scheme_is_not_a_local_folder(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert "write s3://bucket/x" in str(caught.value)
    assert not list(tmp_path.iterdir())


def test_a_password_in_a_url_is_refused_and_never_echoed():
    with pytest.raises(StoreError) as caught:
        open_store("sftp://alice:hunter2@host/runs")
    assert "hunter2" not in str(caught.value) and "sftp://alice:***@host/runs" in str(caught.value)
    assert "ssh key" in str(caught.value)


# ------------------------------------------- every store kind is fenced, one process per run (issue 53)
HOLDER = """
import sys, time
from pathlib import Path
what, target = sys.argv[1], sys.argv[2]
if what == "lock":  # a live session's hold on its run directory
    from swarm_evo.store.run_lock import lock_run_dir
    lock_run_dir(Path(target))
elif what == "lease":  # a live writer of a directory store's location
    from swarm_evo.store import open_store
    from swarm_evo.store.lease import new_owner, take_over
    take_over(open_store(target).run(sys.argv[3]), "run-a", sys.argv[4].split(","), new_owner("flow-run-live", "r"))
else:  # a taker killed in the middle of writing the lease
    import os, signal
    from swarm_evo.store import open_store
    from swarm_evo.store.location import put_object
    class Dying:
        calls = 0
        def read(self, n=-1):
            Dying.calls += 1
            if Dying.calls > 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return b'{"run_id": "run-a", "generation": 9, "owner": {"host": "dying", '
    put_object(open_store(target).run(sys.argv[3]), "lease.json", Dying())
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture
def holders():
    """Start real processes that hold something (``holders.start(kind, *args)``); killed at the end."""
    import subprocess

    started: list[subprocess.Popen] = []

    class Holders:
        @staticmethod
        def start(*args: str) -> subprocess.Popen:
            proc = subprocess.Popen([sys.executable, "-c", HOLDER, *args], stdout=subprocess.PIPE, text=True)
            started.append(proc)
            line = proc.stdout.readline()
            assert line == "ready\n" or proc.wait(timeout=30) is not None
            return proc

    yield Holders
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def test_a_writer_and_an_in_place_resume_of_a_directory_store_never_both_write(tmp_path):
    """Issue 53, item 1 (seen: A's next sync replaced the in-place resume's 3-node journal with its
    2-node one). The in-place copy takes the lease: A uploads nothing more; a later resume elsewhere
    takes it again: the in-place copy's next journal write is refused before it is written."""
    from swarm_evo.population.journal import Journal
    from swarm_evo.store.lease import read_lease

    store = open_store(tmp_path / "store")
    location = store.run("r")
    a = fake_run(tmp_path / "machine-1" / "r", 2)
    a_mirror = a.mirror(store, new_owner("flow-run-a", "r"))
    assert a_mirror.flush(timeout=30) and stored_ids(location) == ["n0", "n1"]

    in_place = Path(location.root)  # `swarm-evo resume STORE/runs/r` with a plain path: the store's own folder
    b_mirror = FakeRun(in_place, "run-a", ["n0", "n1"]).mirror(store, new_owner("flow-run-b", "r-resume1"))
    assert b_mirror.in_place and read_lease(location).generation == 2
    fake_run(in_place, 3)  # B's third node, written in place
    fake_run(a.dir, 3)  # A goes on with another third node
    (a.dir / "nodes" / "n2" / "solution.py").write_text("print('A')\n")
    assert not a_mirror.flush(timeout=30) and "flow run flow-run-b (r-resume1)" in str(a_mirror.superseded)
    assert stored_ids(location) == ["n0", "n1", "n2"]
    assert (in_place / "nodes" / "n2" / "solution.py").read_text() == "print(2)\n", "A wrote nothing"
    assert not (in_place / "lease.json.tmp").exists() and not list(in_place.glob(".lease.json.*.tmp"))

    journal = Journal(in_place / "journal.json")
    journal.before_save = b_mirror.check_writer  # what open_session sets for a run in place
    journal.save()  # B still holds the lease
    c_dir = tmp_path / "machine-3" / "r"
    fetch_run(location, c_dir)
    take_over(location, "run-a", ["n0", "n1", "n2"], new_owner("flow-run-c", "r-resume2"))
    journal.info["mine"] = True
    with pytest.raises(SupersededError, match="flow run flow-run-c"):
        journal.save()
    assert "mine" not in json.loads((in_place / "journal.json").read_text())["info"], "nothing written"
    assert b_mirror.superseded is not None and not b_mirror.close(timeout=5)
    a_mirror.close(timeout=5)


def test_a_taker_killed_while_writing_the_lease_leaves_the_old_one_whole(tmp_path, holders):
    """The lease is replaced whole (temp + rename): a real process SIGKILLed in the middle of its
    write leaves the holder's lease, never half a lease that reads as nobody's."""
    store = open_store(tmp_path / "store")
    run = fake_run(tmp_path / "r", 1)
    mirror = RunMirror(run.dir, store.run("r"), lease=take_over(store.run("r"), "run-a", ["n0"], new_owner("live")))
    dying = holders.start("die", str(tmp_path / "store"), "r")
    assert dying.wait(timeout=30) == -9
    assert list((tmp_path / "store" / "runs" / "r").glob(".lease.json.*.tmp")), "killed in the middle of its write"
    assert mirror.sync_once() >= 0, "the healthy writer is still the writer"
    assert json.loads((tmp_path / "store" / "runs" / "r" / "lease.json").read_text())["owner"]["flow_run_id"] == "live"


def test_one_process_per_run_directory(tmp_path, holders):
    """Issue 53, item 2: a real process holds the run directory; a second opener here is refused,
    naming it, and a resume from the store neither moves the directory aside nor fetches into it
    (it goes to a place of its own); once that process is killed the directory opens."""
    from swarm_evo.store.run_lock import LOCK_FILE, RunDirectoryBusyError, check_free, lock_run_dir

    store = open_store(f"file://{tmp_path / 'store'}")
    fake_run(tmp_path / "elsewhere" / "r", 3).mirror(store, new_owner("gone")).close(timeout=30)
    run = fake_run(tmp_path / "runs" / "r", 2)  # behind the store: a resume would move it aside
    holder = holders.start("lock", str(run.dir))
    for attempt in (lambda: lock_run_dir(run.dir), lambda: check_free(run.dir)):
        with pytest.raises(RunDirectoryBusyError) as caught:
            attempt()
        message = str(caught.value)
        assert f"pid {holder.pid} on host " in message and " since 20" in message and str(run.dir) in message
    elsewhere, _ = resolve_run(store.run("r").url, tmp_path / "runs")  # a resume from the store: another place
    assert elsewhere != run.dir and elsewhere.name == "r" and json.loads((elsewhere / "journal.json").read_text())[
        "nodes"] == [{"id": f"n{i}"} for i in range(3)]
    assert json.loads((run.dir / "journal.json").read_text())["nodes"] == [{"id": "n0"}, {"id": "n1"}], "untouched"
    assert stored_ids(store.run("r")) == ["n0", "n1", "n2"] and not list(run.dir.parent.glob("r.stale-*"))
    assert LOCK_FILE not in store_files(store.run("r").url)
    holder.kill()
    holder.wait(timeout=30)
    mine = lock_run_dir(run.dir)  # the kernel released the dead process's lock
    again = lock_run_dir(run.dir)  # a session opened again in this process takes the hold on
    mine.release()  # the earlier session's release lets nothing go
    other = holders.start("lock", str(run.dir))
    assert other.poll() is not None, "still held by this process"
    again.release()
    holders.start("lock", str(run.dir))
    with pytest.raises(RunDirectoryBusyError):
        check_free(run.dir)


def test_a_live_writer_is_not_superseded_without_take_over(tmp_path, holders):
    """Issue 53, item 3, on a directory store: a resume asks whether the lease holder lives (its
    process on this host, its flow run's state, its last write to the store) before taking over."""
    from swarm_evo.store.lease import Lease, write_lease
    from swarm_evo.store.liveness import WriterAliveError, check_writer

    store = open_store(tmp_path / "store")
    location = store.run("r")
    fake_run(Path(location.root), 2)
    live = holders.start("lease", str(tmp_path / "store"), "r", "n0,n1")
    mine = new_owner("flow-run-me", "r-resume1")
    with pytest.raises(WriterAliveError) as caught:
        FakeRun(tmp_path / "runs" / "r", "run-a", ["n0", "n1"]).mirror(store, mine)
    message = str(caught.value)
    assert f"flow run flow-run-live (r) on host" in message and f"(pid {live.pid}) since 20" in message
    assert f"its process (pid {live.pid}) runs on this host" in message and "--take-over" in message
    assert check_writer(location, mine, writer_state=lambda _: "CRASHED") is not None  # the API: it ended
    assert check_writer(location, mine, take_over=True).owner["pid"] == live.pid
    live.kill()
    live.wait(timeout=30)
    assert check_writer(location, mine).owner["pid"] == live.pid  # dead: may be taken over

    elsewhere = Lease("run-a", 5, {"host": "worker-7", "pid": 1, "flow_run_id": "f7", "since": "2026-11-27T18:40:02+00:00"})
    write_lease(location, elsewhere)
    with pytest.raises(WriterAliveError, match=r"on host worker-7 \(pid 1\).*last wrote the store \d+ s ago"):
        check_writer(location, mine)
    with pytest.raises(WriterAliveError, match="its flow run is Running"):
        check_writer(location, mine, writer_state=lambda _: "RUNNING")
    old = time.time() - 600
    for name in ("lease.json", "journal.json"):
        os.utime(Path(location.root) / name, (old, old))
    assert check_writer(location, mine).generation == 5  # silent for 10 minutes, no API: dead


def test_a_file_grown_after_the_walk_goes_up_cut_at_the_size_checked(tmp_path, monkeypatch):
    """Issue 53, item 9 (seen: a file grown after the stat went up at 3 MiB under a 1 MiB cap)."""
    run = fake_run(tmp_path / "r", 1)
    big = run.dir / "nodes" / "n0" / "model.bin"
    big.write_bytes(b"x" * (900 * 1024))
    real_walk = mirror_module.walk_files

    def growing_walk(root, **kwargs):
        for entry in real_walk(root, **kwargs):
            if entry.rel.endswith("model.bin"):
                with open(big, "ab") as fh:
                    fh.write(b"y" * (3 * 1024 * 1024))  # the program writes on after the walk's stat
            yield entry

    monkeypatch.setattr(mirror_module, "walk_files", growing_walk)
    store = open_store(tmp_path / "store")
    mirror = RunMirror(run.dir, store.run("r"), max_file_mb=1)
    mirror.sync_once()
    stored = Path(store.run("r").root) / "nodes" / "n0" / "model.bin"
    assert stored.stat().st_size == 900 * 1024, "never more than the size checked against the cap"
    monkeypatch.setattr(mirror_module, "walk_files", real_walk)
    mirror.sync_once()  # the next sync sees the new size: over the cap, skipped and recorded
    assert "over store.max_file_mb = 1" in mirror.skipped["nodes/n0/model.bin"]


def test_a_final_fits_scratch_is_not_mirrored(tmp_path):
    run = fake_run(tmp_path / "r", 1)
    (run.dir / "final_fit" / "working").mkdir(parents=True)
    (run.dir / "final_fit" / "working" / "model.pkl").write_bytes(b"big")
    (run.dir / "final_fit" / "submission").mkdir()
    (run.dir / "final_fit" / "submission" / "submission.csv").write_text("id,y\n")
    rels = {entry.rel for entry in walk_files(run.dir)}
    assert "final_fit/submission/submission.csv" in rels and "final_fit/working/model.pkl" not in rels


def test_file_colon_slash_is_fixed_to_the_absolute_url():
    """Issue 53, item 9: ``file:/a/b`` is the absolute folder /a/b, never ``file://a/b`` (relative)."""
    with pytest.raises(StoreError, match=r"write file:///a/b \(or the path itself, /a/b\)"):
        open_store("file:/a/b")


def test_a_pid_of_another_pid_namespace_is_not_asked_of_this_one(tmp_path):
    """A container may share the host's name while its pids are its own: the holder's pid is then
    not looked up here (this test's own pid would read as alive), the store's clock decides."""
    import socket
    from datetime import datetime, timezone

    from swarm_evo.store.lease import Lease, pid_namespace, write_lease
    from swarm_evo.store.liveness import holder_alive

    location = open_store(tmp_path / "store").run("r")
    fake_run(Path(location.root), 1)
    owner = {"host": socket.gethostname(), "pid": os.getppid(), "pidns": "pid:[1]", "since": "2026-11-27T18:40:02+00:00"}
    lease = Lease("run-a", 1, owner)
    write_lease(location, lease)
    assert "last wrote the store" in holder_alive(location, lease)
    old = time.time() - 600
    for name in ("lease.json", "journal.json"):
        os.utime(Path(location.root) / name, (old, old))
    assert holder_alive(location, lease) is None
    here = dict(owner, pidns=pid_namespace(), since=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    assert holder_alive(location, Lease("run-a", 1, here)) == f"its process (pid {os.getppid()}) runs on this host"
