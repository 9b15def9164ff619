"""Data from the store (issue 34, item 2): ``swarm-evo prepare … --data-dir URL`` writes the
prepared competition to the store; ``run`` and ``grade`` with ``--data-dir URL`` read it through
a local cache, one download per machine and file version; the private answers are fetched only
to grade, into a folder no program sees. Bad URLs are bad input (exit 2, one line naming
``--data-dir``).

Each case runs against a plain directory URL (``file://``) and, marked slow, a real SeaweedFS
reached by s3fs through the standard ``AWS_*`` variables (tests/object_store.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from object_store import free_port, seaweedfs_with_env, store_files
from swarm_evo.competition import grade_submission, load_competition, prepare_competition
from swarm_evo.store import open_store
from swarm_evo.store.data import DATA_CACHE_ENV, data_cache_root, part_root, sync_competition

BUCKET = "swarm-evo"
COMP = "sklearn-wine"
KINDS = ["directory", pytest.param("s3", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    """A SeaweedFS for the module; its ``AWS_*`` variables are set for the module's tests."""
    with seaweedfs_with_env(tmp_path_factory.mktemp("seaweedfs"), buckets=(BUCKET,)) as server:
        yield server


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """This test's data cache ($SWARM_EVO_DATA_CACHE): a machine that never read the store."""
    root = tmp_path / "cache"
    monkeypatch.setenv(DATA_CACHE_ENV, str(root))
    return root


@pytest.fixture(scope="module")
def local_copy(tmp_path_factory) -> Path:
    """sklearn-wine prepared in a local data directory: what the store's copy must equal."""
    root = tmp_path_factory.mktemp("local-data")
    prepare_competition(COMP, None, root)
    return root


def _url(kind: str, request, tmp_path: Path) -> str:
    if kind == "s3":
        request.getfixturevalue("seaweed")
        return f"s3://{BUCKET}/data-{time.time_ns()}"
    return f"file://{tmp_path / 'store' / 'data'}"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``swarm-evo ARGS`` in this process with cwd ``cwd``: exit code, stdout, stderr."""
    from swarm_evo.cli.commands import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def _prepare(tmp_path: Path, url: str) -> None:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    result = cli(work, "prepare", COMP, "--data-dir", url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"prepared {COMP} in {url}/{COMP}"
    assert list(work.iterdir()) == [], "prepared in a temporary folder, nothing left here"


# ------------------------------------------------------------------------------------ the cache
@pytest.mark.parametrize("kind", KINDS)
def test_prepare_writes_the_store_and_the_cache_downloads_each_version_once(kind, request, tmp_path, cache,
                                                                          local_copy):
    url = _url(kind, request, tmp_path)
    _prepare(tmp_path, url)
    assert store_files(url) == _tree(local_copy), "the store holds what a local prepare writes"

    first = sync_competition(url, COMP, "public")
    public = first.data_dir / COMP
    assert first.data_dir.is_relative_to(cache) and (first.downloaded, first.kept) == (5, 0)
    expected = {rel: data for rel, data in _tree(local_copy / COMP).items() if not rel.startswith("prepared/private")}
    assert _tree(public) == expected, "the public part and config.yaml, no answer"
    assert not part_root(url, "private").exists(), "the answers are not fetched with the public part"

    before = _mtimes(public)
    second = sync_competition(url, COMP, "public")
    assert (second.downloaded, second.kept, second.removed) == (0, 5, 0), "a second load downloads nothing"
    assert _mtimes(public) == before

    store = open_store(url).child(COMP)
    store.fs.pipe_file(store.path("prepared/public/description.md"), b"# a new description\n")
    store.fs.rm(store.path("prepared/public/test.csv"))
    third = sync_competition(url, COMP, "public")
    assert (third.downloaded, third.kept, third.removed) == (1, 3, 1), "only the changed file again"
    assert (public / "prepared/public/description.md").read_bytes() == b"# a new description\n"
    assert not (public / "prepared/public/test.csv").exists()
    assert {p: t for p, t in _mtimes(public).items() if "description" not in p} == {
        p: t for p, t in before.items() if "description" not in p and "public/test.csv" not in p}

    answers = sync_competition(url, COMP, "private")
    assert _tree(answers.data_dir) == {f"{COMP}/prepared/private/test.csv":
                                       (local_copy / COMP / "prepared/private/test.csv").read_bytes()}
    assert not answers.data_dir.is_relative_to(first.data_dir) and oct(answers.data_dir.stat().st_mode)[-3:] == "700"


def test_the_cache_folder_defaults_under_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert data_cache_root() == tmp_path / "xdg" / "swarm-evo" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert data_cache_root() == Path.home() / ".cache" / "swarm-evo" / "data"


def test_the_answers_reach_the_machine_only_when_a_submission_is_graded(tmp_path, local_copy):
    from swarm_evo.objective.load import load_objective

    url = f"file://{tmp_path / 'store'}"
    _prepare(tmp_path, url)
    objective = load_objective(COMP, None, url)
    assert objective.public_dir == part_root(url, "public") / COMP / "prepared" / "public"
    assert not part_root(url, "private").exists()
    assert objective.competition.answers_path == part_root(url, "private") / COMP / "prepared/private/test.csv"
    run_dir = tmp_path / "run"
    objective.finalize(run_dir, None)  # no submission: nothing to grade, nothing fetched
    assert not part_root(url, "private").exists()
    (run_dir / "submission").mkdir(parents=True)
    sample = local_copy / COMP / "prepared/public/sample_submission.csv"
    (run_dir / "submission/submission.csv").write_bytes(sample.read_bytes())
    report = objective.finalize(run_dir, None)
    assert objective.competition.answers_path.is_file()
    local = grade_submission(sample, load_competition(COMP, local_copy))
    assert report.valid_submission and report.score == local.score


# ------------------------------------------------------------------------------------ whole runs
@pytest.mark.parametrize("kind", KINDS)
def test_a_run_reads_the_competition_from_the_store(prefect_server, kind, request, tmp_path, cache, local_copy):
    """A run with ``data_dir=URL``: its programs see the cached public part as ``input/`` (no
    answer in it), its grade equals grading the same submission on a local copy, and its journal
    records the URL, and a resume on a machine with no data cached reads the store again."""
    from flows.two_phase_evo import two_phase_evo

    url = _url(kind, request, tmp_path)
    _prepare(tmp_path, url)
    run_dir = tmp_path / "run"
    summary = two_phase_evo(competition_id=COMP, data_dir=url, run_dir=str(run_dir), max_steps=2, seed=0,
                            parallel_workers=1, time_limit=120)
    grade = summary["grade_report"]
    assert grade["valid_submission"], grade
    local = grade_submission(run_dir / "submission" / "submission.csv", load_competition(COMP, local_copy))
    assert grade["score"] == local.score

    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["data_dir"] == url
    from swarm_evo.run.resume import read_run_info

    assert read_run_info(run_dir).data_dir == url

    public = part_root(url, "public") / COMP / "prepared" / "public"
    answers = (local_copy / COMP / "prepared/private/test.csv").read_bytes()
    # programs see the run's view of the cached public part (the hidden split's, issue 41)
    view = run_dir / "hidden_split" / "input"
    assert (view / "description.md").read_bytes() == (public / "description.md").read_bytes()
    inputs = [node / "input" for node in (run_dir / "nodes").iterdir() if (node / "input").is_symlink()]
    assert inputs, "the local backend links each node's input/"
    for link in inputs:
        assert Path(os.path.realpath(link)) == view.resolve()
        seen = [p for p in Path(os.path.realpath(link)).rglob("*") if p.is_file()]
        assert seen and all("private" not in p.relative_to(view.resolve()).parts for p in seen)
        assert all(p.read_bytes() != answers for p in seen), "no answer file where a program looks"
    assert not Path(os.path.realpath(part_root(url, "private"))).is_relative_to(public.resolve())
    assert (part_root(url, "private") / COMP / "prepared/private/test.csv").read_bytes() == answers

    shutil.rmtree(cache)  # another machine: no data cached; the resume reads the store again
    two_phase_evo(resume=str(run_dir), max_steps=3)
    assert len(json.loads((run_dir / "journal.json").read_text())["nodes"]) == 3
    assert sorted(p.name for p in public.iterdir()) == sorted(p.name for p in (local_copy / COMP / "prepared/public").iterdir())


@pytest.mark.parametrize("kind", KINDS)
def test_grade_reads_the_store(kind, request, tmp_path, local_copy):
    url = _url(kind, request, tmp_path)
    _prepare(tmp_path, url)
    sample = local_copy / COMP / "prepared/public/sample_submission.csv"
    result = cli(tmp_path, "grade", "--competition-id", COMP, "--data-dir", url, str(sample), "--jsonl")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["score"] == grade_submission(sample, load_competition(COMP, local_copy)).score


# ------------------------------------------------------------------------------------ bad input
def _bad(cwd: Path, *args: str) -> str:
    cwd.mkdir(exist_ok=True)
    before = sorted(cwd.rglob("*"))
    result = cli(cwd, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("swarm-evo: error: "), result.stderr
    assert sorted(cwd.rglob("*")) == before, "bad input wrote nothing here"
    return lines[0]


def test_a_store_that_cannot_be_written_stops_prepare(tmp_path):
    line = _bad(tmp_path / "cwd", "prepare", COMP, "--data-dir", "file:///proc/no-such/data")
    assert "--data-dir file:///proc/no-such/data: cannot write" in line


def test_a_competition_not_prepared_in_the_store_names_the_prepare_command(tmp_path):
    url = f"file://{tmp_path / 'empty-store'}"
    (tmp_path / "empty-store").mkdir()
    for args in (["run", "--competition-id", COMP, "--data-dir", url, "--max-steps", "1", "--run-dir", "R"],
                 ["grade", "--competition-id", COMP, "--data-dir", url, "sub.csv"]):
        line = _bad(tmp_path / "cwd", *args)
        assert f"{url}/{COMP}/prepared/public not found: prepare" in line, line
        assert f"swarm-evo prepare {COMP} --data-dir {url}" in line, line


def test_data_urls_that_cannot_work_are_named(tmp_path):
    line = _bad(tmp_path / "cwd", "run", "--competition-id", COMP, "--data-dir", "gs://bucket/data")
    assert "--data-dir gs://bucket/data" in line and "gcsfs" in line
    line = _bad(tmp_path / "cwd", "run", "--problem", "tsp", "--data-dir", f"file://{tmp_path}")
    assert "a problem's data files are read from a local folder" in line


@pytest.mark.slow  # a `swarm-evo` process
def test_an_unreachable_s3_store_exits_2_naming_data_dir(tmp_path):
    env = dict(os.environ, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}", AWS_ACCESS_KEY_ID="k",
               AWS_SECRET_ACCESS_KEY="k", AWS_DEFAULT_REGION="us-east-1", AWS_MAX_ATTEMPTS="2")
    env.pop("PREFECT_API_URL", None)
    started = time.monotonic()
    for args in (["run", "--competition-id", COMP, "--data-dir", "s3://bucket/data", "--run-dir", "R"],
                 ["prepare", COMP, "--data-dir", "s3://bucket/data"]):
        result = subprocess.run([sys.executable, "-m", "swarm_evo.cli", *args], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=150)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith("swarm-evo: error: --data-dir s3://bucket/data: cannot"), lines
        assert "AWS_ENDPOINT_URL" in lines[0] or "EndpointConnectionError" in lines[0], lines
    assert list(tmp_path.iterdir()) == []
    assert time.monotonic() - started < 120
