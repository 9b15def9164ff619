"""The evaluate-program flow and the job API (SPEC §11) on the session's Prefect test server.

In-process flow runs of the test problems (tests/fixtures/problems): the returned dict and the
files; a failing evaluator, an unknown problem or a missing program end the flow run Failed
with the error in the state message; the job functions read status and result of those runs
through the API; ``swarm-evo eval run`` writes metrics.json / correct.json.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from prefect.client.schemas.objects import StateType

from flows.evaluate_program import evaluate_program
from flows.evaluation_jobs import (
    JobFailedError,
    JobNotFinishedError,
    JobNotFoundError,
    JobServiceError,
    _api_error,
    _status_of,
    evaluation_result,
    evaluation_status,
    wait_for_evaluation,
)
from swarm_evo.cli.commands import main as cli_main
from swarm_evo.evaluation import read_results

PROBLEMS = Path(__file__).parent / "fixtures" / "problems"
SUM_SQUARES = PROBLEMS / "sum-squares"
BROKEN = PROBLEMS / "broken-evaluator"
CRASHING = "def f(x):\n    raise ValueError('no squares today')\n"
AUX_DYNAMIC = (
    "def evaluate_auxiliary_metrics(program_output):\n"
    "    return {'double_value': 2 * float(program_output['value'])}\n"
    "METRIC_DEFINITIONS = {'double_value': {'description': 'twice f(x)', 'interpretation': 'neutral'}}\n"
)


@pytest.fixture
def free_port_url() -> str:
    """An API URL on a local port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/api"


def _job_id(state) -> str:
    return str(state.state_details.flow_run_id)


def test_flow_returns_the_result_and_writes_the_files(prefect_server, tmp_path):
    out = tmp_path / "res"
    state = evaluate_program(problem=str(SUM_SQUARES), program_path=str(SUM_SQUARES / "initial.py"),
                             results_dir=str(out), auxiliary_metrics_code=AUX_DYNAMIC, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert json.loads(json.dumps(result)) == result, "the return value is plain JSON"
    assert result["correct"] is True and result["error"] is None
    assert result["combined_score"] == pytest.approx(1.0)
    assert result["public_metrics"]["closeness"] == pytest.approx(1.0)
    assert result["num_runs"] == 1 and result["num_valid_runs"] == 1
    assert result["auxiliary_metrics"]["input_length"] == 3.0  # static (problem folder)
    assert result["auxiliary_metrics"]["double_value"] == pytest.approx(28.0)  # dynamic (submitted code)
    assert result["auxiliary_definitions"]["double_value"]["source"] == "auxiliary_dynamic"
    assert "program_output" not in result
    # the files: the evaluated program, ShinkaEvolve-compatible metrics.json, correct.json
    assert (out / "program.py").read_text() == (SUM_SQUARES / "initial.py").read_text()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["combined_score"] == result["combined_score"] and metrics["public"]["aux_double_value"] == 28.0
    assert json.loads((out / "correct.json").read_text()) == {"correct": True, "error": None}
    assert read_results(out).combined_score == result["combined_score"]

    # the job API reads the same run through the server
    job = _job_id(state)
    assert evaluation_status(job) == {"job_id": job, "status": "completed", "state": "Completed", "message": None}
    assert evaluation_result(job) == result
    assert wait_for_evaluation(job, timeout=5, poll=0.1)["status"] == "completed"


def test_docker_executor(prefect_server, docker_client, tmp_path):
    """executor=docker: the program (and the static auxiliary file) run in sandbox containers."""
    from swarm_evo.sandbox import DEFAULT_IMAGE

    result = evaluate_program(problem=str(SUM_SQUARES), program_path=str(SUM_SQUARES / "initial.py"),
                              results_dir=str(tmp_path / "d"), executor="docker", image=DEFAULT_IMAGE)
    assert result["correct"] is True and result["auxiliary_metrics"]["input_length"] == 3.0
    state = evaluate_program(problem=str(SUM_SQUARES), program_code=CRASHING, results_dir=str(tmp_path / "e"),
                             executor="podman", return_state=True)
    assert state.type == StateType.FAILED and "executor must be 'local' or 'docker'" in state.message


def test_markdown_artifact_holds_the_result(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    state = evaluate_program(problem=str(SUM_SQUARES), program_code=CRASHING, results_dir=str(tmp_path / "r"),
                             return_state=True)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]))
        )
    markdown = [a for a in artifacts if a.type == "markdown"]  # (the persisted result is one too)
    assert [a.key for a in markdown] == ["evaluation-sum-squares"]
    assert "correct: **False**" in markdown[0].data and "no squares today" in markdown[0].data


def test_crashing_program_is_a_completed_job_with_an_incorrect_result(prefect_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default results dir: runs/eval/<problem>-<stamp>-<job> under the cwd
    state = evaluate_program(problem=str(SUM_SQUARES), program_code=CRASHING, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert result["correct"] is False and result["combined_score"] == 0.0
    assert "no squares today" in result["error"]
    (out,) = (tmp_path / "runs" / "eval").iterdir()
    assert out.name.startswith("sum-squares-") and out.name.endswith(_job_id(state)[:8])
    assert (out / "program.py").read_text() == CRASHING
    assert json.loads((out / "correct.json").read_text())["correct"] is False


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (dict(problem=str(BROKEN), program_path=str(BROKEN / "initial.py")),
         ["EvaluatorError", "evaluator bug: this evaluator always fails"]),
        (dict(problem="no-such-problem", program_code="x = 1\n"), ["ProblemError", "no-such-problem"]),
        (dict(problem=str(SUM_SQUARES), program_path="/nonexistent/prog.py"), ["/nonexistent/prog.py", "not found"]),
        (dict(problem=str(SUM_SQUARES)), ["exactly one of program_path and program_code"]),
    ],
    ids=["failing-evaluator", "unknown-problem", "missing-program", "no-program"],
)
def test_errors_fail_the_flow_run_with_the_message(prefect_server, tmp_path, kwargs, expected):
    state = evaluate_program(results_dir=str(tmp_path / "r"), return_state=True, **kwargs)
    assert state.type == StateType.FAILED
    for text in expected:
        assert text in state.message
    job = _job_id(state)
    status = evaluation_status(job)
    assert status["status"] == "failed" and status["state"] == "Failed" and expected[-1] in status["message"]
    with pytest.raises(JobFailedError, match=re.escape(expected[-1])):
        evaluation_result(job)


def test_unfinished_and_unknown_jobs(prefect_server):
    from prefect.client.orchestration import get_client
    from prefect.states import Scheduled

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(evaluate_program, parameters={"problem": "tsp"}, state=Scheduled())
    job = str(run.id)
    assert evaluation_status(job)["status"] == "pending"
    with pytest.raises(JobNotFinishedError, match="pending"):
        evaluation_result(job)
    with pytest.raises(TimeoutError, match="still pending"):
        wait_for_evaluation(job, timeout=0.3, poll=0.1)
    with pytest.raises(JobNotFoundError, match="not found"):
        evaluation_status(str(uuid.uuid4()))
    with pytest.raises(JobNotFoundError, match="not a flow run id"):
        evaluation_status("not-a-uuid")


def test_api_errors_name_the_cause(prefect_server, free_port_url):
    import httpx
    from prefect.settings import PREFECT_API_URL, temporary_settings

    request = httpx.Request("POST", "http://x/api/deployments/1/create_flow_run")
    refused = httpx.HTTPStatusError("409", request=request, response=httpx.Response(
        409, json={"detail": "Validation failed for field 'problem'"}, request=request))
    assert "refused the request (409: Validation failed for field 'problem')" in str(_api_error(refused))
    with temporary_settings({PREFECT_API_URL: free_port_url}):
        with pytest.raises(JobServiceError, match="does not answer .*prefect server start"):
            evaluation_status(str(uuid.uuid4()))


@pytest.mark.parametrize(
    ("state_type", "name", "status"),
    [("SCHEDULED", "Scheduled", "pending"), ("SCHEDULED", "Late", "pending"),
     ("SCHEDULED", "AwaitingRetry", "pending"), ("PENDING", "Pending", "pending"), ("PAUSED", "Paused", "pending"),
     ("RUNNING", "Running", "running"), ("RUNNING", "Retrying", "running"), ("CANCELLING", "Cancelling", "running"),
     ("COMPLETED", "Completed", "completed"), ("FAILED", "Failed", "failed"), ("CRASHED", "Crashed", "failed"),
     ("CANCELLED", "Cancelled", "failed")],
)
def test_state_to_job_status(state_type, name, status):
    run = SimpleNamespace(id="j", state=SimpleNamespace(type=StateType[state_type], name=name, message="m"))
    assert _status_of(run) == {"job_id": "j", "status": status, "state": name, "message": "m"}


def test_cli_eval_run_writes_metrics_and_correct(prefect_server, tmp_path, capsys):
    out = tmp_path / "cli"
    code = cli_main(["eval", "run", "--problem", str(SUM_SQUARES), str(SUM_SQUARES / "initial.py"),
                      "--results-dir", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert code == 0 and printed["correct"] is True
    assert json.loads((out / "metrics.json").read_text())["combined_score"] == printed["combined_score"]
    assert json.loads((out / "correct.json").read_text()) == {"correct": True, "error": None}

    bad = tmp_path / "bad.py"
    bad.write_text(CRASHING)
    assert cli_main(["eval", "run", "--problem", str(SUM_SQUARES), str(bad), "--results-dir", str(tmp_path / "b")]) == 1
    assert json.loads(capsys.readouterr().out)["correct"] is False
    assert json.loads((tmp_path / "b" / "correct.json").read_text())["correct"] is False


def test_cli_eval_run_errors(prefect_server, tmp_path, capsys):
    prog = SUM_SQUARES / "initial.py"
    # a failing evaluator: exit 1 with its error
    assert cli_main(["eval", "run", "--problem", str(BROKEN), str(prog), "--results-dir", str(tmp_path / "x")]) == 1
    assert "evaluator bug" in capsys.readouterr().err
    # bad input: exit 2, one line naming the problem / file and the fix, before any flow run
    assert cli_main(["eval", "run", "--problem", "no-such-problem", str(prog), "--results-dir", str(tmp_path)]) == 2
    assert "no-such-problem" in capsys.readouterr().err
    assert cli_main(["eval", "run", "--problem", str(SUM_SQUARES), str(tmp_path / "missing.py"),
                      "--results-dir", str(tmp_path)]) == 2
    assert "missing.py not found" in capsys.readouterr().err
    assert cli_main(["eval", "run", "--problem", str(SUM_SQUARES), str(prog), "--results-dir", str(tmp_path),
                      "--num-runs", "0"]) == 2
    assert "--num-runs must be > 0" in capsys.readouterr().err


def test_cli_eval_run_on_a_deployment_writes_the_files_here(prefect_server, tmp_path, capsys, monkeypatch):
    """`eval run --deployment`: submit the code, wait, fetch the result; when the job ran on
    another machine (no metrics.json here) the files are written from the fetched result."""
    import flows.evaluation_jobs as service

    sent = {}
    result = {"combined_score": 0.5, "correct": True, "error": None, "public_metrics": {"closeness": 0.5},
              "num_runs": 1, "num_valid_runs": 1}

    def submit(parameters, deployment):
        sent.update(parameters, deployment=deployment)
        return "job-1"

    monkeypatch.setattr(service, "submit_evaluation", submit)
    monkeypatch.setattr(service, "wait_for_evaluation", lambda job, timeout=None, poll=1.0: {"status": "completed"})
    monkeypatch.setattr(service, "evaluation_result", lambda job: result)
    out = tmp_path / "remote"
    code = cli_main(["eval", "run", "--problem", "sum-squares-remote", str(SUM_SQUARES / "initial.py"),
                      "--results-dir", str(out), "--deployment", "evaluate-program/elsewhere"])
    assert code == 0 and json.loads(capsys.readouterr().out) == result
    assert sent["deployment"] == "evaluate-program/elsewhere" and sent["problem"] == "sum-squares-remote"
    assert sent["program_code"] == (SUM_SQUARES / "initial.py").read_text() and "program_path" not in sent
    assert sent["results_dir"] == str(out.resolve())
    assert json.loads((out / "metrics.json").read_text())["public"] == {"closeness": 0.5}
    assert json.loads((out / "correct.json").read_text()) == {"correct": True, "error": None}

    monkeypatch.setattr(service, "evaluation_result", lambda job: (_ for _ in ()).throw(JobFailedError("boom")))
    assert cli_main(["eval", "run", "--problem", "p", str(SUM_SQUARES / "initial.py"), "--results-dir",
                      str(tmp_path / "f"), "--deployment", "evaluate-program/elsewhere"]) == 1
    assert "evaluation failed: boom" in capsys.readouterr().err
