"""Bad input (issue 7): each case is one line on stderr naming the file or field and the fix,
exit code 2, and nothing written (no run directory, no ``runs/``, data folder unchanged).

Every case runs the CLI's ``main`` with cwd = ``tmp_path`` (one case, and the run-directory
case, as a real subprocess: its exit status is 2); the whole of ``tmp_path`` (data folder,
config files, the would-be run directory) is snapshotted (paths, sizes, mtimes) before and
compared after. Bad input must fail before the Prefect flow starts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from swarm_evo.competition import prepare_competition
from swarm_evo.config import RunConfig

FIXTURES = Path(__file__).resolve().parent / "fixtures"
COMP = "sklearn-diabetes"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A data folder with sklearn-diabetes prepared (no raw data needed)."""
    root = tmp_path_factory.mktemp("prepared")
    prepare_competition(COMP, None, root)
    return root


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("prefect-home")


@pytest.fixture
def data(prepared, tmp_path) -> Path:
    """A private copy of the prepared data folder, to break one thing in."""
    target = tmp_path / "data"
    shutil.copytree(prepared, target)
    return target


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` (files and folders) with (size, mtime_ns)."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        out[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns)
    return out


def run_cli(cwd: Path, prefect_home: Path, *args: str, in_process: bool = True) -> subprocess.CompletedProcess:
    """The CLI on ``args`` in ``cwd``: ``main()`` in this process, or a subprocess."""
    if in_process:
        from swarm_evo.cli.commands import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
        return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    env = dict(os.environ)
    env.update(
        PREFECT_HOME=str(prefect_home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    env.pop("PREFECT_API_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "swarm_evo.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
    )


def assert_bad_input(cwd: Path, prefect_home: Path, args: list[str], *needles: str, in_process: bool = True) -> str:
    """Run the CLI; assert exit 2, one stderr line naming ``needles``, nothing written."""
    before = snapshot(cwd)
    proc = run_cli(cwd, prefect_home, *args, in_process=in_process)
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {err}"
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"not one line: {err!r}"
    line = lines[0]
    assert line.startswith("swarm-evo: error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert proc.stdout == "", f"nothing printed before the error: {proc.stdout!r}"
    assert snapshot(cwd) == before, "bad input wrote or touched files"
    assert not (cwd / "runs").exists() and not (cwd / "R").exists()
    print(line)  # shown by pytest -rP
    return line


def run_args(data: Path, *extra: str, competition: str = COMP) -> list[str]:
    return ["run", "--competition-id", competition, "--data-dir", str(data), "--run-dir", "R",
            "--max-steps", "1", *extra]


# ----------------------------------------------------------------------------- competition files
def test_missing_public_file(data, tmp_path, prefect_home):
    missing = data / COMP / "prepared" / "public" / "train.csv"
    missing.unlink()
    assert_bad_input(tmp_path, prefect_home, run_args(data), str(missing),
                     f"swarm-evo prepare {COMP} --data-dir {data}")


@pytest.mark.slow  # a `swarm-evo` process
def test_an_unprepared_competition_is_reported_before_litellm_and_prefect_load(tmp_path, prefect_home):
    """The commonest mistake, a ``--data-dir`` without the prepared competition, ends a real
    process with exit 2 and the fix before the model client and Prefect are imported (they are
    most of a run's start: ~4 s of CPU). The process reports which of them it loaded."""
    empty = tmp_path / "empty"
    empty.mkdir()
    script = ("import sys\nfrom swarm_evo.cli import main\ncode = main(sys.argv[1:])\n"
              "print(sorted(m for m in ('litellm', 'prefect') if m in sys.modules))\nsys.exit(code)")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(prefect_home), LITELLM_LOCAL_MODEL_COST_MAP="True")
    before = snapshot(tmp_path)
    proc = subprocess.run([sys.executable, "-c", script, *run_args(empty)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"swarm-evo prepare {COMP} --data-dir {empty}" in proc.stderr, proc.stderr
    assert proc.stdout == "[]\n", f"imported before the error: {proc.stdout}"
    assert snapshot(tmp_path) == before


def test_missing_private_answers(data, tmp_path, prefect_home):
    missing = data / COMP / "prepared" / "private" / "test.csv"
    missing.unlink()
    assert_bad_input(tmp_path, prefect_home, run_args(data), str(missing), "private answers",
                     f"swarm-evo prepare {COMP} --data-dir {data}")


def test_sample_submission_without_id_column(data, tmp_path, prefect_home):
    sample = data / COMP / "prepared" / "public" / "sample_submission.csv"
    pd.read_csv(sample).rename(columns={"id": "row"}).to_csv(sample, index=False)
    line = assert_bad_input(tmp_path, prefect_home, run_args(data), str(sample), "'id'",
                            "['row', 'target']", "swarm-evo prepare")
    assert "columns found" in line


def test_answers_with_other_ids(data, tmp_path, prefect_home):
    answers = data / COMP / "prepared" / "private" / "test.csv"
    frame = pd.read_csv(answers)
    frame.loc[:3, "id"] = [9001, 9002, 9003, 9004]  # 4 ids replaced: 4 missing, 4 extra
    frame.to_csv(answers, index=False)
    line = assert_bad_input(tmp_path, prefect_home, run_args(data), str(answers),
                            "4 id(s) of the sample submission missing", "4 id(s) not in the sample submission",
                            "'9001', '9002', '9003', ...", "re-prepare", "swarm-evo prepare")
    assert "9004" not in line, "3 examples each"


# ---------------------------------------------------------------------------- config.yaml / names
def test_unknown_grader_name(data, tmp_path, prefect_home):
    config = data / COMP / "config.yaml"
    generic = data / "my-diabetes"
    shutil.copytree(data / COMP, generic)  # same files under an id that is not built in
    cfg = yaml.safe_load(config.read_text())
    cfg.update(id="my-diabetes", grader={"name": "kappa-42"})
    cfg["dataset"] = {"answers": "my-diabetes/prepared/private/test.csv",
                      "sample_submission": "my-diabetes/prepared/public/sample_submission.csv"}
    (generic / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert_bad_input(tmp_path, prefect_home, run_args(data, competition="my-diabetes"),
                     str(generic / "config.yaml"), "'grader.name'", "'kappa-42'", "accuracy")


def test_unknown_competition(data, tmp_path, prefect_home):
    assert_bad_input(tmp_path, prefect_home, run_args(data, competition="no-such-comp"),
                     "'no-such-comp'", "not built-in", "config.yaml")


def test_run_config_unknown_key(data, tmp_path, prefect_home):
    (tmp_path / "bad.yaml").write_text("search:\n  max_stepz: 3\n")
    assert_bad_input(tmp_path, prefect_home, run_args(data, "--config", "bad.yaml"),
                     "bad.yaml", "search.max_stepz", "remove it")


def test_run_config_wrong_type(data, tmp_path, prefect_home):
    (tmp_path / "bad.yaml").write_text("search:\n  max_steps: many\n")
    assert_bad_input(tmp_path, prefect_home, run_args(data, "--config", "bad.yaml"),
                     "bad.yaml", "search.max_steps", "'many'")


def test_unknown_model(data, tmp_path, prefect_home):
    assert_bad_input(tmp_path, prefect_home, run_args(data, "--model", "nosuch/model-x"),
                     "'nosuch/model-x'", "offline")


# ------------------------------------------------------------------------ run directory, problems
@pytest.mark.slow  # a `swarm-evo` process
def test_run_dir_of_another_competition(data, tmp_path, prefect_home):
    run_dir = tmp_path / "R"
    run_dir.mkdir()
    journal = run_dir / "journal.json"
    journal.write_text(json.dumps({"info": {"competition_id": "sklearn-wine"}, "nodes": []}))
    content = journal.read_bytes()
    before = snapshot(tmp_path)
    proc = run_cli(tmp_path, prefect_home, *run_args(data), in_process=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("swarm-evo: error: "), proc.stderr
    assert "R/journal.json" in lines[0] and "choose another --run-dir" in lines[0]
    assert "sklearn-wine" in lines[0]
    print(lines[0])
    assert journal.read_bytes() == content and snapshot(tmp_path) == before
    assert not (tmp_path / "runs").exists()


def test_problem_folder_missing_file(tmp_path, prefect_home):
    problem = tmp_path / "sum-squares"
    shutil.copytree(FIXTURES / "problems" / "sum-squares", problem)
    (problem / "initial.py").unlink()
    assert_bad_input(tmp_path, prefect_home,
                     ["run", "--problem", str(problem), "--run-dir", "R", "--max-steps", "1"],
                     "initial.py", str(problem))


def test_run_dir_of_another_search_policy(data, tmp_path, prefect_home):
    run_dir = tmp_path / "R"
    run_dir.mkdir()
    node = {"id": "n1", "operation": "draft", "phase": 1, "step": 1}
    (run_dir / "journal.json").write_text(json.dumps(
        {"info": {"competition_id": COMP, "policy": "greedy"}, "nodes": [node]}))
    content = (run_dir / "journal.json").read_bytes()
    before = snapshot(tmp_path)
    proc = run_cli(tmp_path, prefect_home, *run_args(data, "--policy", "two_phase"))
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "holds a greedy run" in line and "--run-dir" in line, line
    assert (run_dir / "journal.json").read_bytes() == content and snapshot(tmp_path) == before


# ----------------------------------------------------------------------------- URLs for paths
@pytest.mark.parametrize("args, needles", [
    (["resume", "sftp://host/runs/a"], ("resume sftp://host/runs/a", "paramiko")),  # a store scheme not installed
    (["resume", "s3x://bucket/runs/a"], ("resume s3x://bucket/runs/a", "unknown scheme 's3x'")),
    (["resume", "s3://bucket/prefix/a"], ("resume s3://bucket/prefix/a", "STORE/runs/<run name>")),
])
def test_resume_of_a_run_url_that_cannot_work_names_it(tmp_path, prefect_home, args, needles):
    """``swarm-evo resume`` takes a run in a store (``STORE/runs/<name>``, issue 34); a URL whose
    scheme fsspec cannot open, or that is not a run's place, is bad input that writes nothing."""
    assert_bad_input(tmp_path, prefect_home, args, *needles)


@pytest.mark.parametrize("args, option, url", [  # --data-dir of prepare, run and grade takes a store URL
    (["prepare", "spaceship-titanic", "--raw-dir", "s3://bucket/raw", "--data-dir", "data"], "--raw-dir",
     "s3://bucket/raw"),
    (["prepare", "spaceship-titanic", "--data-dir", "s3:/bucket/data"], "--data-dir", "s3://bucket/data"),
    (["run", "--competition-id", COMP, "--data-dir", "data", "--config", "gs://bucket/c.yaml"], "--config",
     "gs://bucket/c.yaml"),
    (["grade", "--competition-id", COMP, "--data-dir", "data", "--mlebench-repo", "s3://bucket/mle-bench",
      "sub.csv"], "--mlebench-repo", "s3://bucket/mle-bench"),
    (["run", "--competition-id", COMP, "--data-dir", "data", "--run-dir", "s3://bucket/runs/a"], "--run-dir",
     "s3://bucket/runs/a"),
    (["grade", "--competition-id", COMP, "--data-dir", "data", "https://host/sub.csv"], "SUBMISSION",
     "https://host/sub.csv"),
    (["sweep", "--competitions", COMP, "--data-dir", "data", "--out", "s3://bucket/sweep"], "--out",
     "s3://bucket/sweep"),
])
def test_a_url_where_a_path_goes_is_refused_and_writes_nothing(tmp_path, prefect_home, args, option, url):
    """``Path("s3://bucket/data")`` is the relative path ``s3:/bucket/data``: a URL must never
    become a folder named ``s3:`` in the working directory (issue 34's bad input)."""
    line = assert_bad_input(tmp_path, prefect_home, args, f"{option} {url}: a URL", "local or mounted path")
    assert not list(tmp_path.glob("*:")), "a folder named after the URL's scheme"
    assert line.count("\n") == 0


# ------------------------------------------------------------------------- store URLs (issue 40, item 8)
@pytest.mark.parametrize("store", ["s3:/bucket/x", "s3:bucket/x", "s3//bucket/x"])
@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_mistyped_store_url_is_bad_input_not_a_local_folder(data, tmp_path, prefect_home, store, command):
    """A scheme without its ``://`` would be a local folder: every worker would mirror to its own
    disk and every row of a sweep would fail."""
    args = (run_args(data, "--store", store) if command == "run" else
            ["sweep", "--competitions", COMP, "--data-dir", str(data), "--store", store])
    line = assert_bad_input(tmp_path, prefect_home, args, f"--store {store}: not a URL", "write s3://bucket/x")
    assert not (tmp_path / "s3:").exists() and not (tmp_path / "s3").exists(), line


@pytest.mark.parametrize("command", ["run", "sweep", "resume"])
def test_a_password_in_a_store_url_is_refused_and_never_echoed(data, tmp_path, prefect_home, command):
    secret = "sftp://alice:hunter2@host/team"
    args = {"run": run_args(data, "--store", secret),
            "sweep": ["sweep", "--competitions", COMP, "--data-dir", str(data), "--store", secret],
            "resume": ["resume", f"{secret}/runs/r"]}[command]
    before = snapshot(tmp_path)
    proc = run_cli(tmp_path, prefect_home, *args)
    assert proc.returncode == 2, proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout
    assert "sftp://alice:***@host/team" in proc.stderr and "credentials" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and snapshot(tmp_path) == before


def _stored_run(store: Path, name: str, run_id: str, nodes: list[dict]) -> bytes:
    """A run as the mirror leaves it in a directory store: its journal and lease."""
    location = store / "runs" / name
    location.mkdir(parents=True)
    journal = json.dumps({"info": {"competition_id": COMP, "run_id": run_id}, "nodes": nodes}).encode()
    (location / "journal.json").write_bytes(journal)
    (location / "lease.json").write_text(json.dumps({"run_id": run_id, "generation": 3, "owner": {"host": "h"}}))
    return journal


def test_a_run_never_starts_in_a_store_location_that_holds_another_run(data, tmp_path, prefect_home):
    """Last week's run of the same name is in the store: the new run stops before anything, the
    store untouched (issue 40, item 6)."""
    store = tmp_path.with_name(f"{tmp_path.name}-store")  # outside the snapshot: the store check writes a probe
    journal = _stored_run(store, "R", "last-week", [{"id": "n1", "operation": "draft", "phase": 1, "step": 1}])
    line = assert_bad_input(tmp_path, prefect_home, run_args(data, "--store", str(store)),
                            f"{store}/runs/R holds another run (run id last-week", "--run-dir")
    assert (store / "runs" / "R" / "journal.json").read_bytes() == journal, line


def test_resuming_a_copy_the_store_has_moved_past_names_the_command_that_resumes_the_store(data, tmp_path,
                                                                                            prefect_home):
    """``swarm-evo resume mine`` of a local copy older than the store's (issue 40, item 3)."""
    store = tmp_path.with_name(f"{tmp_path.name}-store")
    node = {"id": "n1", "operation": "draft", "phase": 1, "step": 1}
    _stored_run(store, "mine", "run-1", [node, dict(node, id="n2", step=2)])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "journal.json").write_text(json.dumps(
        {"info": {"competition_id": COMP, "run_id": "run-1", "data_dir": str(data),
                  "config": RunConfig().model_dump(mode="json")}, "nodes": [node]}))
    line = assert_bad_input(tmp_path, prefect_home, ["resume", "mine", "--store", str(store)],
                            "behind the store's (1 nodes here, 2 in", f"swarm-evo resume {store}/runs/mine")
    assert json.loads((store / "runs" / "mine" / "journal.json").read_text())["nodes"][-1]["id"] == "n2", line


_HOLD = """
import sys, time
from pathlib import Path
from swarm_evo.store.run_lock import lock_run_dir
lock_run_dir(Path(sys.argv[1]))
print("ready", flush=True)
time.sleep(600)
"""


def test_resuming_a_run_directory_open_in_another_process_names_that_process(data, tmp_path, prefect_home):
    """One process per run directory (issue 53, item 2): a real process has ``mine`` open."""
    run_dir = tmp_path / "mine"
    run_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        assert_bad_input(tmp_path, prefect_home, ["resume", "mine"], f"{run_dir} is open in another process",
                         f"pid {holder.pid} on host ", " since 20", f"kill {holder.pid}")
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_resuming_a_run_whose_writer_lives_names_it_and_take_over(data, tmp_path, prefect_home):
    """A resume never silently supersedes a live writer (issue 53, item 3): here a run in a
    directory store, resumed in place, whose lease holder on another host wrote the store just now."""
    store = tmp_path.with_name(f"{tmp_path.name}-store")  # outside the snapshot: the store check writes a probe
    node = {"id": "n1", "operation": "draft", "phase": 1, "step": 1}
    _stored_run(store, "mine", "run-1", [node])
    config = RunConfig().model_dump(mode="json")
    config["store"]["url"] = str(store)
    (store / "runs" / "mine" / "journal.json").write_text(json.dumps(
        {"info": {"competition_id": COMP, "run_id": "run-1", "data_dir": str(data), "config": config}, "nodes": [node]}))
    lease = (store / "runs" / "mine" / "lease.json").read_bytes()
    assert_bad_input(tmp_path, prefect_home, ["resume", str(store / "runs" / "mine")],
                     f"{store}/runs/mine is being written by a process on host h (pid ?)",
                     "it last wrote the store ", " s ago", "--take-over")
    assert (store / "runs" / "mine" / "lease.json").read_bytes() == lease, "not taken over"
    assert_bad_input(tmp_path, prefect_home, ["resume", f"file://{store}/runs/mine"],  # from the store: nothing fetched
                     f"resume file://{store}/runs/mine is being written by a process on host h", "--take-over")
