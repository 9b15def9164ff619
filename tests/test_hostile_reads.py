"""The host side of the sandbox (issue 18): what a program leaves behind is read safely.

After an execution the host reads files from the program's directory. A program can leave a
FIFO there (a plain ``open()`` blocks for ever), a directory (``IsADirectoryError`` in the
host's code), a link, a socket or a huge file. Every case here must end as a *classified
program failure* naming the file, within the execution timeout + 10 s, on both backends:

- the Eval Service (``swarm-evo eval run``): ``outputs.json`` of the harness and
  ``aux_result.json`` of an auxiliary metrics file (hostile programs in ``tests/hostile/``);
  an auxiliary failure never fails the primary evaluation;
- a competition search (``swarm-evo run`` against the stand-in model server): drafts that leave
  a FIFO or a directory as ``submission/submission.csv`` are debugged, and the run ends with
  a valid submission;
- bad input of ``swarm-evo eval run``: exit 2, one line, nothing written.

The Docker cases use the session's ``docker_client`` fixture: they fail, never skip, when no
engine answers or the sandbox image is missing.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_server import run_swarm
from swarm_evo.cli.commands import main as cli_main
from swarm_evo.competition import load_competition, validate_submission
from swarm_evo.sandbox.output import read_bounded
from swarm_evo.sandbox.safe_read import ProgramFileError, open_program_file, read_program_bytes

HOSTILE = Path(__file__).with_name("hostile")
SUM_SQUARES = Path(__file__).parent / "fixtures" / "problems" / "sum-squares"
TIMEOUT = 10.0  # sum-squares' per-run timeout (problem.yaml)
SLACK = 10.0  # issue 18: "within the execution timeout + 10 s"
REPO = Path(__file__).resolve().parents[1]

RESULTS: list[tuple[str, str, str, float]] = []
"""(backend, case, outcome, seconds) of every case, printed with ``-s``."""


# ------------------------------------------------------------------------ the safe reader


def test_safe_reader_refuses_everything_but_a_regular_file_without_blocking(tmp_path):
    regular = tmp_path / "regular.json"
    regular.write_bytes(b'{"a": 1}')
    assert read_program_bytes(regular, 100) == b'{"a": 1}'

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    directory = tmp_path / "dir.json"
    directory.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(regular)
    sock_path = tmp_path / "sock.json"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(10 * 1024 * 1024)  # sparse: no disk used
    cases = {
        fifo: "FIFO",
        directory: "directory",
        link: "symbolic link",
        sock_path: "socket",
        Path("/dev/zero"): "character device",
        huge: "over the limit",
    }
    try:
        for path, words in cases.items():
            started = time.monotonic()
            with pytest.raises(ProgramFileError) as err:
                read_program_bytes(path, 1024 * 1024)
            assert time.monotonic() - started < 1.0, f"{path} blocked"
            assert str(path) in str(err.value) and words in str(err.value), str(err.value)
    finally:
        sock.close()
    with pytest.raises(FileNotFoundError):
        read_program_bytes(tmp_path / "missing.json", 10)
    with open_program_file(regular) as fh:  # blocking mode restored: a normal file object
        assert fh.read() == b'{"a": 1}'
    # the log reader shows what stands there instead of hanging on it
    text, cut = read_bounded(fifo, 2000)
    assert "FIFO" in text and str(fifo) in text and cut is False


def test_a_fifo_or_directory_as_submission_is_a_named_format_error(data_dir, tmp_path):
    competition = load_competition("spaceship-titanic", data_dir)
    fifo = tmp_path / "fifo" / "submission.csv"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    directory = tmp_path / "dir" / "submission.csv"
    directory.mkdir(parents=True)
    for path, words in ((fifo, "is a FIFO (named pipe), not a regular file"), (directory, "is a directory")):
        started = time.monotonic()
        errors = validate_submission(path, competition)
        assert time.monotonic() - started < 1.0
        assert len(errors) == 1 and str(path) in errors[0] and words in errors[0], errors


# ---------------------------------------------------------------- the Eval Service cases

EVAL_CASES: dict[str, tuple[str, str]] = {
    # case: (what the program leaves, words the error must hold)
    "outputs_fifo": ("outputs.json as a FIFO, then os._exit(0)", "outputs.json is a FIFO (named pipe)"),
    "outputs_dir": ("outputs.json as a directory", "outputs.json is a directory"),
    "outputs_link": ("outputs.json as a link to calls.json", "outputs.json is a symbolic link"),
    "outputs_huge": ("a 300 MB sparse outputs.json", "outputs.json is 314,572,800 bytes, over the limit"),
}
AUX_CASES: dict[str, str] = {
    "aux_result_fifo": "aux_result.json is a FIFO (named pipe)",
    "aux_result_dir": "aux_result.json is a directory",
}


def _eval_args(program: Path, results: Path, backend: str, *extra: str) -> list[str]:
    args = ["eval", "run", "--problem", str(SUM_SQUARES), str(program), "--results-dir", str(results), *extra]
    return args + (["--executor", "docker"] if backend == "docker" else [])


@pytest.fixture(params=["local", "docker"])
def backend(request) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_client")
    return request.param


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(EVAL_CASES))
def test_eval_run_reports_a_hostile_outputs_file_as_the_programs_error(prefect_server, backend, case, tmp_path,
                                                                      capsys):
    results = tmp_path / "results"
    started = time.monotonic()
    code = cli_main(_eval_args(HOSTILE / f"eval_{case}.py", results, backend))
    elapsed = time.monotonic() - started
    printed = json.loads(capsys.readouterr().out)
    correct = json.loads((results / "correct.json").read_text())
    RESULTS.append((backend, case, correct["error"] or "", round(elapsed, 2)))
    print(f"{backend:6} {case:16} {elapsed:5.2f} s  {correct['error']}")
    assert code == 1 and printed["correct"] is False
    assert correct["correct"] is False and correct["error"].startswith("ProgramFileError: "), correct
    assert EVAL_CASES[case][1] in correct["error"], correct
    assert json.loads((results / "metrics.json").read_text())["combined_score"] == 0.0
    assert elapsed < TIMEOUT + SLACK, f"took {elapsed:.1f} s"

    # the same results directory again, with a good program: whatever was left is replaced
    assert cli_main(_eval_args(SUM_SQUARES / "initial.py", results, backend)) == 0
    assert json.loads((results / "correct.json").read_text()) == {"correct": True, "error": None}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(AUX_CASES))
def test_a_hostile_auxiliary_file_never_fails_the_primary_evaluation(prefect_server, backend, case, tmp_path,
                                                                     capsys):
    results = tmp_path / "results"
    started = time.monotonic()
    code = cli_main(_eval_args(SUM_SQUARES / "initial.py", results, backend,
                               "--auxiliary-metrics", str(HOSTILE / f"eval_{case}.py"), "--auxiliary-timeout", "10"))
    elapsed = time.monotonic() - started
    capsys.readouterr()
    metrics = json.loads((results / "metrics.json").read_text())
    error = metrics["auxiliary_errors"].get("auxiliary_dynamic", "")
    RESULTS.append((backend, case, error, round(elapsed, 2)))
    print(f"{backend:6} {case:16} {elapsed:5.2f} s  {error}")
    assert code == 0, "an auxiliary failure failed the evaluation"
    assert json.loads((results / "correct.json").read_text()) == {"correct": True, "error": None}
    assert error.startswith("ProgramFileError: ") and AUX_CASES[case] in error, metrics["auxiliary_errors"]
    assert elapsed < TIMEOUT + 10 + SLACK  # primary run + auxiliary timeout


@pytest.mark.slow  # a `swarm-evo eval` process
def test_the_swarm_evo_eval_process_ends_on_a_fifo(tmp_path):
    """The issue's reproduction, as a user runs it: a real ``swarm-evo eval run`` process
    (Prefect's temporary API), ``os.mkfifo("outputs.json"); os._exit(0)``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    results = tmp_path / "results"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "swarm_evo.cli", *_eval_args(HOSTILE / "eval_outputs_fifo.py", results, "local")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    elapsed = time.monotonic() - started
    RESULTS.append(("local", "process: outputs_fifo", str(proc.returncode), round(elapsed, 2)))
    assert proc.returncode == 1, proc.stderr[-3000:]
    correct = json.loads((results / "correct.json").read_text())
    assert "outputs.json is a FIFO" in correct["error"]
    assert stat.S_ISFIFO(os.lstat(results / "runs" / "run-0" / "outputs.json").st_mode)  # left, never opened


# --------------------------------------------------------------------------- bad input


def test_eval_run_bad_paths_exit_2_with_one_line_and_write_nothing(tmp_path, capsys):
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a directory\n")
    cases = [
        (_eval_args(SUM_SQUARES / "initial.py", a_file, "local"), "--results-dir", "is a file, not a directory"),
        (_eval_args(SUM_SQUARES / "initial.py", a_file / "sub" / "dir", "local"), "--results-dir",
         f"is under {a_file}, which is a file"),
        (_eval_args(tmp_path, tmp_path / "out", "local"), "program", "is a directory, not a file"),
        (_eval_args(SUM_SQUARES / "initial.py", tmp_path / "out", "local", "--auxiliary-metrics", str(tmp_path)),
         "--auxiliary-metrics", "is a directory, not a file"),
    ]
    for args, names, words in cases:
        before = sorted(p.name for p in tmp_path.iterdir())
        assert cli_main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and names in err and words in err, err
        assert sorted(p.name for p in tmp_path.iterdir()) == before, "bad input wrote something"
    assert a_file.read_text() == "not a directory\n"


# ----------------------------------------------------------------- inside a competition run


@pytest.mark.timeout(400)
@pytest.mark.parametrize("executor", ["local", "docker"])
def test_a_search_debugs_a_fifo_or_directory_submission(stand_in, data_dir, tmp_path, executor, request,
                                                       prefect_api_url):
    """``swarm-evo run`` over HTTP: the first draft leaves a FIFO as submission.csv, the second
    a directory, the third writes 10 GB (``sandbox.disk_limit_mb: 64``). Each is a classified
    failure of its node naming the file or the limit (never a hang or an aborted step), the
    debug repairs it, and the run hands in a valid submission."""
    if executor == "docker":
        request.getfixturevalue("docker_client")
    stand_in.use("hostile_submission")
    started = time.monotonic()
    result = run_swarm(tmp_path / "work", data_dir, api_base=stand_in.openai_base, max_steps=3,
                       sandbox_config={"backend": executor, "exec_timeout": 60, "disk_limit_mb": 64}, timeout=300,
                       prefect_api_url=prefect_api_url)
    elapsed = time.monotonic() - started
    assert result.returncode == 0 and not result.timed_out, result.describe()
    found = {}
    for node in result.nodes:
        for entry in node["metadata"].get("debug_history") or []:
            text = json.dumps(entry["problems"])
            for words in ("submission.csv is a FIFO (named pipe), not a regular file",
                          "submission.csv is a directory, not a regular file",
                          "DiskLimitError: "):
                if words in text:
                    found[words] = node
    RESULTS.append((executor, "search: FIFO/dir submission, 10 GB", f"{len(found)} of 3 classified",
                    round(elapsed, 2)))
    assert len(found) == 3, [n["metadata"].get("debug_history") for n in result.nodes]
    disk = found["DiskLimitError: "]
    assert (result.run_dir / "nodes" / disk["id"] / "working" / "cache.bin").stat().st_size <= 80 * 2**20
    for node in found.values():
        assert not node["dead"] and not node["is_buggy"], node["analysis"]
    assert (result.run_dir / "submission" / "submission.csv").is_file()
    assert (result.grade_report or {}).get("valid_submission") is True, result.describe()


def test_zz_print_the_table():  # runs last in this module: the table for the issue note (-s)
    for row in RESULTS:
        print(" | ".join(str(x) for x in row))
