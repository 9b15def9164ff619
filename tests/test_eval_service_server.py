"""The Eval Service as a job service on a real Prefect server (SPEC §11).

``prefect server start`` on a free port (own PREFECT_HOME), ``swarm-evo eval serve`` against
it (Prefect's runner: each job runs in a subprocess of the serving process), then the client
side as separate processes with their own PREFECT_HOME: ``submit`` returns a job id at once,
``status`` goes pending/running -> completed, ``result`` gives the metrics; a failing
evaluator makes the job failed and ``result`` shows its error; an unfinished job is exit 3.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a `prefect server start` and `swarm-evo eval` processes

PROBLEMS = Path(__file__).parent / "fixtures" / "problems"
SUM_SQUARES = PROBLEMS / "sum-squares"
BROKEN = PROBLEMS / "broken-evaluator"
EVAL = [sys.executable, "-m", "swarm_evo.cli", "eval"]  # = `swarm-evo eval`


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(home: Path, api_url: str) -> dict[str, str]:
    """This process's environment without Prefect settings (the session's test harness),
    plus a PREFECT_HOME of its own and the server's API URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_API_URL=api_url,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


def _wait_for(url: str, deadline: float, what: str, proc: subprocess.Popen, log: Path) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(f"{what} not ready at {url}:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the process group started for ``proc`` (it runs in a session of its own)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group (flow run subprocesses)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def eval_service(tmp_path_factory):
    """A Prefect server and `swarm-evo eval serve` on it; yields the client environment."""
    tmp_path = tmp_path_factory.mktemp("eval-service")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    server_env = _env(tmp_path / "server-home", api)
    server_env["PREFECT_UI_ENABLED"] = "false"
    procs: list[subprocess.Popen] = []
    try:
        server_log = tmp_path / "server.log"
        with server_log.open("w") as fh:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                env=server_env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            ))
        _wait_for(f"{api}/health", time.monotonic() + 60, "prefect server", procs[0], server_log)

        serve_log = tmp_path / "serve.log"
        with serve_log.open("w") as fh:
            procs.append(subprocess.Popen(
                [*EVAL, "serve", "--poll", "1"], env=_env(tmp_path / "serve-home", api), cwd=tmp_path,
                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            ))
        _wait_for(f"{api}/deployments/name/evaluate-program/default", time.monotonic() + 60,
                  "swarm-evo eval serve", procs[1], serve_log)
        yield {"env": _env(tmp_path / "client-home", api), "api": api, "serve_log": serve_log}
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*EVAL, *args], env=env, capture_output=True, text=True, timeout=60)


def _wait_finished(api: str, job: str, timeout: float) -> list[str]:
    """Poll the job's status (the job API in this process: a CLI call per poll would cost a
    Prefect import each) until it is completed or failed; the statuses seen."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.evaluation_jobs import evaluation_status

    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with temporary_settings({PREFECT_API_URL: api}):
        while time.monotonic() < deadline:
            status = evaluation_status(job)
            seen.append(status["status"])
            if status["status"] in ("completed", "failed"):
                return seen
            time.sleep(0.25)
    pytest.fail(f"job {job} not finished after {timeout} s; statuses {seen}")


def test_submit_status_result_against_a_prefect_server(eval_service, tmp_path):
    env = eval_service["env"]
    results = tmp_path / "results"

    started = time.perf_counter()
    submitted = _cli(env, "submit", "--problem", str(SUM_SQUARES), str(SUM_SQUARES / "initial.py"),
                     "--results-dir", str(results))
    latency = time.perf_counter() - started
    print(f"`swarm-evo eval submit` returned a job id in {latency:.2f} s (process start included)")
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert len(job) == 36, submitted.stdout  # a flow run id (UUID)
    assert latency < 10, "submit only creates a flow run; it never waits for the evaluation"

    broken = _cli(env, "submit", "--problem", str(BROKEN), str(BROKEN / "initial.py"),
                  "--results-dir", str(tmp_path / "broken"))
    assert broken.returncode == 0, broken.stderr
    broken_job = broken.stdout.strip()
    # `eval run --deployment` = submit + wait + result, in the background meanwhile
    run_dir = tmp_path / "run"
    run = subprocess.Popen(
        [*EVAL, "run", "--problem", str(SUM_SQUARES), str(SUM_SQUARES / "initial.py"), "--results-dir",
         str(run_dir), "--deployment", "evaluate-program/default", "--wait-timeout", "80"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )

    seen = _wait_finished(eval_service["api"], job, timeout=60)
    assert seen[-1] == "completed", (seen, eval_service["serve_log"].read_text()[-3000:])
    assert set(seen) <= {"pending", "running", "completed"}
    status = _cli(env, "status", job)
    assert status.returncode == 0 and json.loads(status.stdout) == {
        "job_id": job, "status": "completed", "state": "Completed", "message": None}
    result = _cli(env, "result", job)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert metrics["correct"] is True and metrics["combined_score"] == pytest.approx(1.0)
    assert metrics["public_metrics"]["closeness"] == pytest.approx(1.0)
    assert metrics["auxiliary_metrics"]["input_length"] == 3.0
    # the serving side wrote the files in the requested directory (from the submitted code)
    assert json.loads((results / "metrics.json").read_text())["combined_score"] == metrics["combined_score"]
    assert (results / "program.py").read_text() == (SUM_SQUARES / "initial.py").read_text()

    assert _wait_finished(eval_service["api"], broken_job, timeout=60)[-1] == "failed"
    status = json.loads(_cli(env, "status", broken_job).stdout)
    assert status["state"] == "Failed" and "evaluator bug" in status["message"]
    failed = _cli(env, "result", broken_job)
    assert failed.returncode == 1
    assert "EvaluatorError" in failed.stderr and "evaluator bug: this evaluator always fails" in failed.stderr

    out, err = run.communicate(timeout=90)
    assert run.returncode == 0, err
    assert json.loads(out)["correct"] is True and "submitted to evaluate-program/default" in err
    assert json.loads((run_dir / "correct.json").read_text()) == {"correct": True, "error": None}


def test_unfinished_job_and_bad_requests(eval_service, tmp_path):
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    env = eval_service["env"]
    # a job scheduled an hour ahead stays pending: `result` is exit 3
    with temporary_settings({PREFECT_API_URL: eval_service["api"]}):
        later = run_deployment(
            "evaluate-program/default", parameters={"problem": "tsp", "program_code": "x = 1\n"},
            scheduled_time=datetime.now(timezone.utc) + timedelta(hours=1), timeout=0, as_subflow=False,
        )
    pending = _cli(env, "result", str(later.id))
    assert pending.returncode == 3 and "pending" in pending.stderr
    assert json.loads(pending.stdout)["status"] == "pending"

    missing = _cli(env, "submit", "--problem", "tsp", str(SUM_SQUARES / "initial.py"), "--deployment",
                   "evaluate-program/nowhere")
    assert missing.returncode == 2 and "evaluate-program/nowhere" in missing.stderr and "eval serve" in missing.stderr
    unknown = _cli(env, "status", "00000000-0000-0000-0000-000000000000")
    assert unknown.returncode == 2 and "not found" in unknown.stderr
    no_server = _cli({k: v for k, v in env.items() if k != "PREFECT_API_URL"}, "status", "x")
    assert no_server.returncode == 2 and "PREFECT_API_URL" in no_server.stderr
