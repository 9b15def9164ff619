"""Run a real ``swarm-evo run`` process against the stand-in server and read what it left.

Shared by ``tests/test_real_model_http.py`` and ``benchmarks/real_model_scenarios.py``. The run
goes through litellm over HTTP exactly as a user's would: ``--model openai/stand-in`` (or
``hosted_vllm/…``, ``ollama_chat/…``), a ``--config`` YAML with ``model.api_base``, a small
``model.timeout`` and ``model.num_retries``, the key in ``OPENAI_API_KEY`` (``HOSTED_VLLM_API_KEY``
for hosted_vllm; Ollama needs none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-stand-in-test-key"


@dataclass
class RunResult:
    """What one ``swarm-evo run`` process did: exit code, wall seconds, its output and run dir."""

    cmd: list[str]
    returncode: int
    seconds: float
    stdout: str
    stderr: str
    run_dir: Path
    timed_out: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def output(self) -> str:
        """stdout and stderr together."""
        return self.stdout + "\n" + self.stderr

    def _json(self, name: str) -> dict | None:
        path = self.run_dir / name
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def journal(self) -> dict | None:
        """``journal.json`` (None when the run wrote none)."""
        return self._json("journal.json")

    @property
    def nodes(self) -> list[dict]:
        """The journal's nodes ([] without a journal)."""
        return (self.journal or {}).get("nodes", [])

    @property
    def run_report(self) -> dict | None:
        """``run_report.json``."""
        return self._json("run_report.json")

    @property
    def grade_report(self) -> dict | None:
        """``grade_report.json``."""
        return self._json("grade_report.json")

    @property
    def valid_submission(self) -> bool:
        """True when ``RUN_DIR/submission/submission.csv`` exists and the grade report says it
        is a valid submission."""
        grade = self.grade_report or {}
        return (self.run_dir / "submission" / "submission.csv").exists() and bool(grade.get("valid_submission"))

    def alive_dead(self) -> tuple[int, int]:
        """``(alive, dead)`` node counts (alive: not dead and not buggy)."""
        nodes = self.nodes
        dead = sum(1 for n in nodes if n.get("dead"))
        alive = sum(1 for n in nodes if not n.get("dead") and not n.get("is_buggy"))
        return alive, dead

    def llm(self) -> dict | None:
        """``run_report.json``'s ``llm`` section (None when missing)."""
        return (self.run_report or {}).get("llm")

    def describe(self) -> str:
        """A few lines for assertion messages: command, exit code, seconds, output tails."""
        return (f"$ {' '.join(self.cmd)}\nexit {self.returncode} after {self.seconds:.1f} s"
                f"{' (killed: timeout)' if self.timed_out else ''}\n--- stdout (tail)\n{self.stdout[-3000:]}"
                f"\n--- stderr (tail)\n{self.stderr[-3000:]}")


def run_env(workdir: Path, *, model: str, api_base: str, api_key: str | None = API_KEY,
            prefect_api_url: str | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a run: no inherited Prefect settings or provider keys; a Prefect home
    in ``workdir`` (or ``prefect_api_url``: a shared Prefect server); the API key where the
    provider looks for it; Ollama's base URL for litellm's ``/api/show`` lookups."""
    drop = ("PREFECT_", "OPENAI_", "HOSTED_VLLM_", "OLLAMA_", "ANTHROPIC_", "LITELLM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(PREFECT_HOME=str(workdir / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PREFECT_LOGGING_LEVEL="WARNING", LITELLM_LOCAL_MODEL_COST_MAP="True",
               PYTHONUNBUFFERED="1")
    if prefect_api_url:
        env["PREFECT_API_URL"] = prefect_api_url
    if api_key is not None:
        if model.startswith("openai/"):
            env["OPENAI_API_KEY"] = api_key
        elif model.startswith("hosted_vllm/"):
            env["HOSTED_VLLM_API_KEY"] = api_key
    if model.startswith(("ollama/", "ollama_chat/")):
        env["OLLAMA_API_BASE"] = api_base
    env.update(extra or {})
    return env


def run_swarm(
    workdir: Path,
    data_dir: Path,
    *,
    api_base: str,
    model: str = "openai/stand-in",
    max_steps: int = 6,
    parallel_workers: int = 2,
    time_limit: float | None = None,
    model_config: dict | None = None,
    search_config: dict | None = None,
    sandbox_config: dict | None = None,
    api_key: str | None = API_KEY,
    seed: int = 0,
    timeout: float = 300,
    prefect_api_url: str | None = None,
    env_extra: dict[str, str] | None = None,
    competition_id: str = "spaceship-titanic",
) -> RunResult:
    """Run ``swarm-evo run`` on ``competition_id`` against ``api_base`` and wait for it.

    ``model_config`` adds to the config's ``model`` section (defaults: ``api_base``,
    ``timeout: 20``, ``num_retries: 1``); ``search_config`` / ``sandbox_config`` likewise
    (defaults ``sandbox.exec_timeout: 19``, which the prompts state, so the stand-in's offline brain
    writes quick-tier programs (swarm_evo/llm/offline/effort.py: what these runs test is the
    conversation, not the programs' size), and ``sandbox.python``: this interpreter, the
    project's own, as the suite's in-process runs — ``tests/conftest.py``). The process is killed after ``timeout`` seconds
    (``timed_out`` is then set). The run directory is ``workdir/run``.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "model": {"api_base": api_base, "timeout": 20, "num_retries": 1, **(model_config or {})},
        "search": {**(search_config or {})},
        "sandbox": {"exec_timeout": 19, "python": sys.executable, **(sandbox_config or {})},
    }
    config = {k: v for k, v in config.items() if v}
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    run_dir = workdir / "run"
    cmd = [sys.executable, "-m", "swarm_evo.cli", "run", "--competition-id", competition_id,
           "--data-dir", str(data_dir), "--model", model, "--max-steps", str(max_steps),
           "--parallel-workers", str(parallel_workers), "--seed", str(seed),
           "--config", str(workdir / "config.yaml"), "--run-dir", str(run_dir)]
    if time_limit is not None:
        cmd += ["--time-limit", str(time_limit)]
    env = run_env(workdir, model=model, api_base=api_base, api_key=api_key,
                  prefect_api_url=prefect_api_url, extra=env_extra)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        import signal

        os.killpg(proc.pid, signal.SIGKILL)  # the run's own process group: it and its programs
        stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - started
    (workdir / "stdout.txt").write_text(stdout or "")
    (workdir / "stderr.txt").write_text(stderr or "")
    return RunResult(cmd=cmd, returncode=proc.returncode, seconds=seconds, stdout=stdout or "",
                     stderr=stderr or "", run_dir=run_dir, timed_out=timed_out)
