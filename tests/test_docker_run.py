"""Runs with the Docker sandbox: the command line against a real engine, bad setups stopped
before any step, and the global concurrency limit that serialises shared GPUs (issue 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from swarm_evo.cli.commands import main


def _prepare_diabetes(tmp_path: Path) -> Path:
    assert main(["prepare", "sklearn-diabetes", "--data-dir", str(tmp_path)]) == 0
    return tmp_path


def test_gpus_on_host_without_nvidia_runtime_stop_before_any_step(docker_client, tmp_path, capsys):
    data = _prepare_diabetes(tmp_path)
    capsys.readouterr()
    code = main(["run", "--competition-id", "sklearn-diabetes", "--data-dir", str(data), "--executor", "docker",
                 "--gpus", "all", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot give containers GPUs" in err and "nvidia-container-toolkit" in err and "--gpus none" in err
    assert not (tmp_path / "run").exists(), "nothing ran and nothing was written"


def test_missing_image_and_gpus_without_docker_are_exit_2(docker_client, tmp_path, capsys):
    data = _prepare_diabetes(tmp_path)
    capsys.readouterr()
    args = ["run", "--competition-id", "sklearn-diabetes", "--data-dir", str(data), "--run-dir", str(tmp_path / "r")]
    assert main(args + ["--executor", "docker", "--image", "swarm-evo-missing:0"]) == 2
    assert "bash deployments/build-sandbox-image-offline.sh swarm-evo-missing:0" in capsys.readouterr().err
    assert main(args + ["--gpus", "all"]) == 2  # the local backend takes GPUs too (issue 52); this host has none
    assert "sandbox.gpus='all': no NVIDIA GPU found" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_docker_run_end_to_end(prefect_server, docker_client, data_dir, tmp_path, capsys):
    """swarm-evo run --executor docker on spaceship-titanic: every program ran in a container.
    Three steps (two containers at a time, then one): the fourth draft of this seed is a CatBoost
    optuna study, 50 s on the container's one CPU, which checks nothing more."""
    run_dir = tmp_path / "docker-run"
    code = main(["run", "--competition-id", "spaceship-titanic", "--data-dir", str(data_dir), "--executor", "docker",
                 "--max-steps", "3", "--parallel-workers", "2", "--seed", "3", "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sandbox: docker (CPU only" in out
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["config"]["sandbox"]["backend"] == "docker"
    assert journal["info"]["runtime"]["packages"]["scikit-learn"] == "1.7.2"
    assert journal["info"]["runtime"]["cpu_limit"] == 1.0
    submission = pd.read_csv(run_dir / "submission" / "submission.csv")
    assert list(submission.columns) == ["PassengerId", "Transported"] and len(submission) > 0
    grade = json.loads((run_dir / "grade_report.json").read_text())
    assert grade["valid_submission"] is True
    # the node directories are the containers' /workspace: outputs came back, input was a mount point
    node_dirs = [d for d in (run_dir / "nodes").iterdir() if (d / "stdout.txt").exists()]
    assert node_dirs and all((d / "input").is_dir() and not any((d / "input").iterdir()) for d in node_dirs)
    prompt = next((run_dir / "nodes").glob("*/prompt-draft.md")).read_text()
    assert "numpy==2.4.6" in prompt and "1 CPU" in prompt


def test_shared_gpu_limit_serialises_executions(prefect_server, tmp_path):
    """Executions of a sandbox with ``gpu_limit`` hold one slot of a global concurrency limit.

    The host has no GPU, so the limit is exercised with the local backend given a limit name;
    the two programs record when they ran, and their intervals must not overlap.
    """
    from prefect import flow
    from prefect.client.orchestration import get_client

    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session
    from tasks.execute import execute
    from tasks.gpu import ensure_gpu_limit

    data = _prepare_diabetes(tmp_path)
    config = RunConfig().with_overrides({"search.parallel_workers": 2})
    session = open_session(competition_id="sklearn-diabetes", data_dir=data, run_dir=tmp_path / "run",
                           config=config, endpoint=endpoint_for(config.model))
    limit = f"swarm-evo-gpus-test-{tmp_path.name}"[:60].lower().replace("_", "-")
    session.sandbox.gpu_limit = limit
    program = (
        "import time\nstart = time.time()\ntime.sleep(1.5)\n"
        "open('working/interval.txt', 'w').write(f'{start} {time.time()}')\n"
    )

    @flow
    def two_executions():
        assert ensure_gpu_limit(limit) == 1
        futures = [execute.submit(str(session.run_dir), f"node{i}", program) for i in range(2)]
        return [f.result(raise_on_failure=False) for f in futures]  # a failed program ends its task Failed (ProgramFailed)

    try:
        two_executions()
    finally:
        close_session(session.run_dir)
    (a0, a1), (b0, b1) = sorted(
        tuple(map(float, (session.run_dir / "nodes" / f"node{i}" / "working" / "interval.txt").read_text().split()))
        for i in range(2)
    )
    assert b0 >= a1, "the two executions overlapped although they share the GPU limit"
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(limit).limit == 1
