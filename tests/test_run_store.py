"""The run store (issue 34): a run mirrored to an fsspec URL as it goes, resumed on "another
machine" from there, a store that goes away and comes back, and bad store URLs.

The S3 store is a real SeaweedFS (tests/object_store.py) reached by s3fs through the standard
``AWS_*`` variables; the same runs go to a plain directory too.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from object_store import free_port, seaweedfs_with_env, store_files
from swarm_evo.store import RunMirror, StoreError, check_store, fetch_run, open_store, split_run_url

BUCKET = "swarm-evo"


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    """A SeaweedFS for the module; its ``AWS_*`` variables are set for the module's tests (and the
    ``swarm-evo`` processes they start)."""
    with seaweedfs_with_env(tmp_path_factory.mktemp("seaweedfs"), buckets=(BUCKET,)) as server:
        yield server


def _local_files(run_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(run_dir)): p.read_bytes()
        for p in run_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and "working" not in p.relative_to(run_dir).parts
        and not (p.name.startswith(".") and p.name.endswith(".tmp"))
        and p.relative_to(run_dir).parts[0] != "hidden_split"  # derived: rebuilt by every session, never mirrored
    }


def _fake_run(run_dir: Path, nodes: int) -> None:
    """A run directory with ``nodes`` nodes' files (new ones written, others left) and a journal
    naming them."""
    for i in range(nodes):
        node = run_dir / "nodes" / f"n{i}"
        if node.exists():
            continue
        (node / "submission").mkdir(parents=True)
        (node / "solution.py").write_text(f"print({i})\n")
        (node / "submission" / "submission.csv").write_text("id,y\n1,0\n")
    (run_dir / "journal.json").write_text(json.dumps({"info": {}, "nodes": [{"id": f"n{i}"} for i in range(nodes)]}))


# ------------------------------------------------------------------------------------ the mirror
def test_mirror_copies_the_run_directory_but_no_scratch_link_or_temporary_file(tmp_path):
    run_dir = tmp_path / "run"
    _fake_run(run_dir, 2)
    node = run_dir / "nodes" / "n0"
    (node / "working").mkdir()
    (node / "working" / "model.bin").write_bytes(b"\0" * 10_000)  # the program's scratch
    (node / "leak.txt").symlink_to("/etc/passwd")  # a program's link to a host file
    os.mkfifo(node / "pipe")  # never blocks the mirror
    (run_dir / ".journal.json.abc.tmp").write_text("half")  # an atomic write in flight
    store = open_store(tmp_path / "store")

    mirror = RunMirror(run_dir, store.run("run"))
    assert mirror.sync_once() == 5
    files = store_files(store.run("run").url)
    assert files == _local_files(run_dir) and set(files) == {
        "journal.json", "nodes/n0/solution.py", "nodes/n0/submission/submission.csv",
        "nodes/n1/solution.py", "nodes/n1/submission/submission.csv",
    }
    assert mirror.sync_once() == 0, "nothing changed, nothing uploaded"
    _fake_run(run_dir, 3)  # a third node and a journal naming it
    assert mirror.sync_once() == 3  # n2's two files, the journal (n0/n1 unchanged: same size and mtime)
    assert json.loads(store_files(store.run("run").url)["journal.json"])["nodes"][-1]["id"] == "n2"


def test_the_stores_journal_never_names_a_node_whose_files_are_missing(tmp_path, monkeypatch):
    """A sync uploads the journal as it was when the sync began, after the files: a node appended
    during a sync waits for the next one (the store is at most the node in flight behind)."""
    import swarm_evo.store.mirror as mirror_module

    run_dir = tmp_path / "run"
    _fake_run(run_dir, 1)
    store = open_store(tmp_path / "store")
    mirror = RunMirror(run_dir, store.run("run"))
    real_walk = mirror_module.walk_files

    def walk_then_append(root, **kwargs):  # the journal is read first; a node lands while the files are listed
        _fake_run(run_dir, 2)
        yield from real_walk(root, **kwargs)

    monkeypatch.setattr(mirror_module, "walk_files", walk_then_append)
    mirror.sync_once()
    files = store_files(store.run("run").url)
    named = [n["id"] for n in json.loads(files["journal.json"])["nodes"]]
    assert named == ["n0"], "the journal uploaded is the one read before the files"
    assert all(f"nodes/{i}/solution.py" in files for i in named)
    monkeypatch.setattr(mirror_module, "walk_files", real_walk)
    mirror.sync_once()
    assert [n["id"] for n in json.loads(store_files(store.run("run").url)["journal.json"])["nodes"]] == ["n0", "n1"]


@pytest.mark.slow  # SeaweedFS
def test_a_store_that_goes_away_leaves_the_run_going_and_catches_up(tmp_path, seaweed, caplog, monkeypatch):
    # One attempt per botocore call: the mirror's own back-off is under test, not botocore's retries
    # (5 attempts, ~6 s per failed sync alone, 40-60 s for this test on a busy machine).
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    run_dir = tmp_path / "run"
    _fake_run(run_dir, 1)
    url = f"s3://{BUCKET}/away-{time.time_ns()}"
    mirror = RunMirror(run_dir, open_store(url).run("run"), retry_initial=0.2, retry_max=1.0).start()
    try:
        assert mirror.flush(timeout=60)
        seaweed.stop_gateway()
        with caplog.at_level(logging.WARNING, logger="swarm_evo.store.mirror"):
            for n in range(2, 5):  # the run goes on: nodes land locally while the store is away
                _fake_run(run_dir, n)
                mirror.request()
                time.sleep(0.3)
            deadline = time.monotonic() + 60
            while mirror.stats.failures < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert mirror.stats.failures >= 2, "the sync fails and is retried while the endpoint is away"
            assert not mirror.flush(timeout=1)
            seaweed.start_gateway()
            assert mirror.flush(timeout=90), mirror.stats.last_error
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert sum("cannot write to the store" in w for w in warnings) == 1, warnings  # warned once
        assert any("answers again" in w for w in warnings), warnings
    finally:
        if seaweed.gateway is None:
            seaweed.start_gateway()
        assert mirror.close(timeout=60)
    assert store_files(open_store(url).run("run").url) == _local_files(run_dir)


# ------------------------------------------------------------------- conditional journal writes
FROZEN_WRITER = r"""
import json, sys
from pathlib import Path
from swarm_evo.store import RunMirror, open_store
from swarm_evo.store.conditional import HistoryWrites
from swarm_evo.store.lease import SupersededError, new_owner, take_over

run_dir, url, pad = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
location = open_store(url).run("run")
for i in range(2):
    (run_dir / "nodes" / f"n{i}").mkdir(parents=True)
    (run_dir / "nodes" / f"n{i}" / "solution.py").write_text(f"print({i})")
nodes = [{"id": "n0"}, {"id": "n1"}]
(run_dir / "journal.json").write_text(json.dumps({"info": {"run_id": "run-a"}, "nodes": nodes[:1]}))
mirror = RunMirror(run_dir, location, lease=take_over(location, "run-a", ["n0"], new_owner("old-flow-run", "old")))
mirror.sync_once()
(run_dir / "journal.json").write_text(json.dumps({"info": {"run_id": "run-a", "pad": "x" * pad}, "nodes": nodes}))
real_put = HistoryWrites.put
def announced(self, rel, data):
    print("PUT", flush=True)  # the lease was checked; the parent freezes this process in the upload
    return real_put(self, rel, data)
HistoryWrites.put = announced
try:
    mirror.sync_once()
    print("LANDED", flush=True)
except SupersededError as exc:
    print("SUPERSEDED", exc, flush=True)
"""


@pytest.mark.slow  # SeaweedFS, a frozen process
def test_a_writer_frozen_in_its_journal_upload_cannot_take_the_store_back(tmp_path, seaweed):
    """Seen in CI: an upload under way when its machine froze landed as it thawed, minutes after
    the run was resumed elsewhere. A real process is frozen (SIGSTOP) in the middle of a 150 MB
    journal upload, after its lease check; the run is taken over and its new writer uploads its
    journal; the frozen one thaws, and S3 itself refuses its upload (If-Match): the store keeps the
    new journal, and the old writer stops as superseded."""
    import signal

    url = f"s3://{BUCKET}/frozen-{time.time_ns()}"
    location = open_store(url).run("run")
    old = subprocess.Popen([sys.executable, "-c", FROZEN_WRITER, str(tmp_path / "old"), url, str(150 * 2**20)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert old.stdout.readline().strip() == "PUT"
        time.sleep(0.05)
        os.kill(old.pid, signal.SIGSTOP)
        from swarm_evo.store.lease import new_owner, take_over

        new_dir = tmp_path / "new"
        fetch_run(location, new_dir)
        _fake_run(new_dir, 3)
        new_journal = json.loads((new_dir / "journal.json").read_text())
        new_journal["info"] = {"run_id": "run-a"}
        (new_dir / "journal.json").write_text(json.dumps(new_journal))
        lease = take_over(location, "run-a", ["n0", "n1", "n2"], new_owner("new-flow-run", "run-resume1"))
        RunMirror(new_dir, location, lease=lease).sync_once()
    finally:
        os.kill(old.pid, signal.SIGCONT)
    out = old.communicate(timeout=120)[0]
    assert "SUPERSEDED" in out and "new-flow-run" in out, out[-3000:]
    stored = json.loads(store_files(location.url)["journal.json"])
    assert [n["id"] for n in stored["nodes"]] == ["n0", "n1", "n2"] and "pad" not in stored["info"]


@pytest.mark.slow  # SeaweedFS
def test_a_late_journal_that_landed_first_is_written_over_by_the_lease_holder(tmp_path, seaweed):
    """A superseded writer's journal that landed before the lease holder's next write (an upload
    without conditions, as from an older copy) makes the holder's conditional write fail once: it
    reads the lease, finds it its own, and writes over the late journal."""
    from swarm_evo.store.location import put_object

    run_dir = tmp_path / "run"
    _fake_run(run_dir, 2)
    location = open_store(f"s3://{BUCKET}/late-{time.time_ns()}").run("run")
    mirror = RunMirror(run_dir, location)
    mirror.sync_once()
    put_object(location, "journal.json", json.dumps({"info": {}, "nodes": [{"id": "n0"}]}).encode())  # the late one
    _fake_run(run_dir, 3)
    mirror.sync_once()
    assert [n["id"] for n in json.loads(store_files(location.url)["journal.json"])["nodes"]] == ["n0", "n1", "n2"]


@pytest.mark.slow  # SeaweedFS
def test_a_resume_on_s3_refuses_a_writer_that_wrote_just_now_unless_told_to_take_over(tmp_path, seaweed):
    """Issue 53, item 3, on S3: the holder is on another host (no pid to ask, no API that knows
    it), so its last write to the store decides; the store's own clock (LastModified) is read."""
    from swarm_evo.store.lease import Lease, new_owner, write_lease
    from swarm_evo.store.liveness import WriterAliveError, check_writer, last_change

    location = open_store(f"s3://{BUCKET}/alive-{time.time_ns()}").run("run")
    holder = {"host": "worker-7", "pid": 4242, "flow_run_id": "b1e", "flow_run_name": "run-resume1",
              "since": "2026-11-27T18:40:02+00:00"}
    write_lease(location, Lease("run-a", 2, holder))
    assert abs(time.time() - last_change(location)) < 30
    mine = new_owner("flow-run-me")
    with pytest.raises(WriterAliveError) as caught:
        check_writer(location, mine)
    assert ("being written by flow run b1e (run-resume1) on host worker-7 (pid 4242) since 2026-11-27T18:40:02+00:00 "
            "(it last wrote the store") in str(caught.value)
    assert check_writer(location, mine, take_over=True).generation == 2
    assert check_writer(location, mine, writer_state=lambda run_id: "CRASHED").generation == 2


def test_the_api_tells_a_live_writers_flow_run_from_an_ended_one(prefect_server):
    """What the liveness check asks Prefect (flows/_writer_state.py): a flow run's own state while
    it runs; None for a run the server does not know or an id that is not a flow run's."""
    import uuid

    from prefect import flow
    from prefect.runtime import flow_run

    from flows._writer_state import flow_run_state

    @flow
    def writer() -> str | None:
        return flow_run_state(flow_run.get_id())

    assert writer() == "RUNNING"
    assert flow_run_state(str(uuid.uuid4())) is None and flow_run_state("b1e") is None


# ------------------------------------------------------------------------------------ bad URLs
@pytest.mark.slow  # SeaweedFS
def test_an_s3_key_over_1024_bytes_is_skipped_and_the_journal_keeps_moving(tmp_path, seaweed, caplog):
    """S3 takes keys of at most 1,024 bytes: a program's deep folder of long (legal) names is
    skipped and recorded, the rest of the run goes on being mirrored (issue 40, item 4)."""
    run_dir = tmp_path / "run"
    _fake_run(run_dir, 1)
    deep = run_dir / "nodes" / "n0" / "/".join(["d" * 200] * 5)
    deep.mkdir(parents=True)
    (deep / "model.txt").write_text("deep")
    mirror = RunMirror(run_dir, open_store(f"s3://{BUCKET}/keys-{time.time_ns()}").run("run"))
    with caplog.at_level(logging.WARNING, logger="swarm_evo.store.mirror"):
        mirror.sync_once()
        _fake_run(run_dir, 2)
        mirror.sync_once()
    rel = str((deep / "model.txt").relative_to(run_dir))
    assert "over the store's 1024" in mirror.skipped[rel] and caplog.text.count("model.txt") == 1
    files = store_files(mirror.target.url)
    assert rel not in files and [n["id"] for n in json.loads(files["journal.json"])["nodes"]] == ["n0", "n1"]


def test_store_urls_that_cannot_work_are_named_with_the_fix(tmp_path):
    with pytest.raises(StoreError, match="unknown scheme 's3x'"):
        open_store("s3x://bucket/prefix")
    with pytest.raises(StoreError, match="install gcsfs"):
        open_store("gs://bucket/prefix")
    with pytest.raises(StoreError, match="not a run in a store"):
        split_run_url("s3://bucket/prefix/spaceship")
    assert split_run_url("s3://bucket/prefix/runs/spaceship-s0") == ("s3://bucket/prefix", "spaceship-s0")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot write"):
        check_store(open_store(blocker / "store"))  # a path under a file: not a directory
    with pytest.raises(StoreError, match="no journal.json there"):
        fetch_run(open_store(tmp_path).run("missing"), tmp_path / "local")


@pytest.mark.slow  # a `swarm-evo` process per case
@pytest.mark.parametrize("store, fix", [
    ("s3://bucket/prefix", "AWS_ENDPOINT_URL"),  # an S3 endpoint on a closed port
    ("s3x://bucket/prefix", "unknown scheme"),
    ("gs://bucket/prefix", "install gcsfs"),
])
def test_run_with_a_store_that_cannot_work_exits_2_naming_store(tmp_path, store, fix):
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}", AWS_ACCESS_KEY_ID="k",
               AWS_SECRET_ACCESS_KEY="k", AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="2")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "swarm_evo.cli", "run", "--competition-id", "sklearn-wine", "--data-dir",
         str(tmp_path / "data"), "--run-dir", str(tmp_path / "run"), "--store", store],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"swarm-evo: error: --store {store}") and fix in lines[0], lines
    assert not (tmp_path / "run").exists(), "nothing written before the check"
    assert time.monotonic() - started < 60


# ------------------------------------------------------------------------------------ whole runs
@pytest.fixture(scope="module")
def wine(tmp_path_factory) -> Path:
    from swarm_evo.competition import prepare_competition

    root = tmp_path_factory.mktemp("store-data")
    prepare_competition("sklearn-wine", None, root)
    return root


@pytest.mark.parametrize("kind", ["directory", "s3"])
def test_a_run_mirrored_to_the_store_resumes_on_another_machine(prefect_server, tmp_path, request, wine, kind,
                                                                monkeypatch):
    """The run's directory is in the store, whole, when the run ends; with the local directory gone
    (another machine), ``resume=STORE/runs/<name>`` rebuilds it from the store and the run goes on
    to its new budget, mirrored back to the same place."""
    from flows.two_phase_evo import two_phase_evo

    if kind == "s3":
        request.getfixturevalue("seaweed")
        store = f"s3://{BUCKET}/runs-{time.time_ns()}"
    else:
        store = f"file://{tmp_path / 'store'}"  # a plain path would be resumed in place
    first_machine = tmp_path / "machine-1"
    run_dir = first_machine / "wine-s0"
    summary = two_phase_evo(competition_id="sklearn-wine", data_dir=str(wine), run_dir=str(run_dir), max_steps=3,
                            seed=0, parallel_workers=1, store=store)
    run_url = open_store(store).run("wine-s0").url
    mirrored = store_files(run_url)
    lease = json.loads(mirrored.pop("lease.json"))  # the store's own: who writes the location (issue 40)
    assert lease["generation"] == 1 and lease["run_id"] == json.loads(mirrored["journal.json"])["info"]["run_id"]
    assert mirrored == _local_files(run_dir), "the store holds the run directory whole"
    assert {"journal.json", "grade_report.json", "result.json", "submission/submission.csv",
            "best_solution.py", "report.md", "run_report.json"} <= set(mirrored)
    assert json.loads(mirrored["result.json"])["grade_report"] == summary["grade_report"]
    first_ids = [n["id"] for n in json.loads(mirrored["journal.json"])["nodes"]]
    assert len(first_ids) == 3
    from flows._writer_state import flow_run_state

    assert flow_run_state(lease["owner"]["flow_run_id"]) == "COMPLETED", "the API tells that the writer ended"

    if kind == "directory":  # resumed in the store's own folder (a plain path): fenced all the same (issue 53)
        in_place = Path(open_store(store).run("wine-s0").root)
        two_phase_evo(resume=str(in_place), max_steps=5)
        ids = [n["id"] for n in json.loads((in_place / "journal.json").read_text())["nodes"]]
        assert ids[:3] == first_ids and len(ids) == len(set(ids)) == 5
        assert json.loads((in_place / "lease.json").read_text())["generation"] == 2, "took the lease in place"
        assert not (in_place / "run.lock").exists(), "the session let the run directory go"
        return
    second_machine = tmp_path / "machine-2"  # no copy of the run here
    second_machine.mkdir()
    monkeypatch.chdir(second_machine)
    fetch_run(open_store(store).run("wine-s0"), second_machine / "runs" / "wine-s0")
    index = second_machine / "runs" / "wine-s0" / "agents" / "agents.json"
    saved = index.read_text()
    index.write_text(json.dumps(dict(json.loads(saved), agents=json.loads(saved)["agents"][:1])))
    with pytest.raises(ValueError, match="agents.num_agents"):  # a check that fails after the fetch ...
        two_phase_evo(resume=run_url, max_steps=5)
    assert json.loads(store_files(run_url)["lease.json"])["generation"] == 1, "... takes nothing over (issue 53)"
    index.write_text(saved)
    two_phase_evo(resume=run_url, max_steps=5)
    local = second_machine / "runs" / "wine-s0"
    ids = [n["id"] for n in json.loads((local / "journal.json").read_text())["nodes"]]
    assert ids[:3] == first_ids and len(ids) == len(set(ids)) == 5
    again = store_files(run_url)
    assert json.loads(again.pop("lease.json"))["generation"] == 2, "the resumed copy took the location over"
    assert [n["id"] for n in json.loads(again["journal.json"])["nodes"]] == ids
    assert again == _local_files(local)
