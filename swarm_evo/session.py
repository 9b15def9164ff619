"""RunSession: everything one run shares across its steps, and the per-process registry.

A session is opened once per run (by the main flow or the CLI) and looked up by run
directory in the step subflows, so flow parameters stay small JSON values (run_dir, slot,
epoch) while the journal, budget, sandbox and model endpoint are shared objects. Nothing here
talks to Prefect.

Run directory layout (SPEC §5)::

    RUN_DIR/journal.json                 all nodes + run info (atomic rewrite per append)
    RUN_DIR/nodes/<node_id>/             solution.py, stdout.txt, stderr.txt,
                                         submission/submission.csv, prompt-*.md
    RUN_DIR/best_solution.py             best valid node's program
    RUN_DIR/submission/submission.csv    best valid node's submission
    RUN_DIR/grade_report.json            that submission graded on the private answers
    RUN_DIR/agents/<agent_id>/*.md       each agent's role and strategy texts (SPEC §9)
    RUN_DIR/agents/dispatcher.json       the dispatcher's EMA scores
    RUN_DIR/experience.jsonl             the experience pool, one record per node
    RUN_DIR/agent_evolutions/            one record (+ prompts) per agent evolution
    RUN_DIR/run_report.json              operations, agents, evolutions (at the end)
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from swarm_evo.agents import AgentPool
from swarm_evo.budget import Budget
from swarm_evo.competition import Competition, CompetitionError, load_competition
from swarm_evo.config import RunConfig
from swarm_evo.data_preview import preview_data
from swarm_evo.dispatcher import STATE_FILE, Dispatcher
from swarm_evo.experience import EXPERIENCE_FILE, ExperiencePool
from swarm_evo.genes import LOCI
from swarm_evo.journal import JOURNAL_FILE, Journal
from swarm_evo.llm.client import ModelEndpoint, check_model_access
from swarm_evo.sandbox import (
    DockerSandbox,
    LocalSandbox,
    RuntimeInfo,
    Sandbox,
    describe_runtime,
)
from swarm_evo.selection import previous_plan_keys


def threads_per_execution(parallel_workers: int) -> int:
    """OpenMP/BLAS threads per program: the cores shared by the parallel executions.

    Measured here (2 cores): two HistGradientBoosting programs with 2 OpenMP threads each ran
    for over 10 minutes without finishing; with 1 thread each they took 5.6 s.
    """
    return max(1, (os.cpu_count() or 1) // max(1, parallel_workers))


_SESSIONS: dict[str, RunSession] = {}
_RUNTIMES: dict[str, RuntimeInfo] = {}
_REGISTRY_LOCK = threading.Lock()


def make_sandbox(config: RunConfig) -> Sandbox:
    """The execution backend named by ``config.sandbox.backend`` (SPEC §10).

    Raises:
        SandboxUnavailableError: docker backend with no daemon or no image (names the fix).
    """
    cfg = config.sandbox
    threads = threads_per_execution(config.search.parallel_workers)
    if cfg.backend == "docker":
        return DockerSandbox(
            image=cfg.image,
            memory_limit_mb=cfg.memory_limit_mb,
            cpus=cfg.cpus,
            pids_limit=cfg.pids_limit,
            shm_size_mb=cfg.shm_size_mb,
            gpus=tuple(cfg.gpus) if isinstance(cfg.gpus, list) else cfg.gpus,
            parallel_workers=config.search.parallel_workers,
            num_threads=threads,
            max_output_bytes=cfg.max_output_bytes,
        )
    return LocalSandbox(
        max_output_bytes=cfg.max_output_bytes,
        memory_limit_mb=cfg.memory_limit_mb,
        num_threads=threads,
    )


def open_sandbox(config: RunConfig) -> tuple[Sandbox, RuntimeInfo]:
    """Build the sandbox and probe it (the preflight check): ``(sandbox, runtime)``.

    The probe runs one tiny program through the sandbox with the run's limits and GPU
    request (once per process and sandbox configuration: the CLI's preflight and the flow's
    session share it), so a missing image, a dead daemon or a host without the NVIDIA runtime stops the
    run here, before any step.

    Raises:
        SandboxUnavailableError: the backend cannot run programs (the message names the fix).
        RuntimeProbeError: the probe ran but failed (e.g. no Python in the image).
    """
    sandbox = make_sandbox(config)
    key = f"{config.search.parallel_workers}:{config.sandbox.model_dump_json()}"
    with _REGISTRY_LOCK:
        runtime = _RUNTIMES.get(key)
    if runtime is None:
        runtime = describe_runtime(sandbox)
        with _REGISTRY_LOCK:
            _RUNTIMES[key] = runtime
    return sandbox, runtime


@dataclass
class RunSession:
    """Shared state of one run. Build it with :func:`open_session`."""

    run_dir: Path
    config: RunConfig
    competition: Competition
    endpoint: ModelEndpoint
    journal: Journal
    budget: Budget
    sandbox: Sandbox
    data_preview: str
    runtime: RuntimeInfo
    agents: AgentPool
    dispatcher: Dispatcher
    experience: ExperiencePool
    loci: tuple[str, ...] = LOCI
    plans_in_flight: set[tuple] = field(default_factory=set)
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def device(self) -> str:
        """The execution device as prompts show it (from the sandbox's runtime probe)."""
        return self.runtime.device

    @property
    def packages(self) -> str:
        """Packages the sandbox's Python can import, ``name==version, ...`` (for prompts)."""
        return self.runtime.package_list

    def node_dir(self, node_id: str) -> Path:
        """``RUN_DIR/nodes/<node_id>``, created on first use."""
        path = self.run_dir / "nodes" / node_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def merged_plan_keys(self) -> set[tuple]:
        """Gene-plan keys already merged (journal) or being merged now (novelty guard input)."""
        return previous_plan_keys(self.journal, self.loci) | set(self.plans_in_flight)


class RunDirectoryError(ValueError):
    """A run directory that belongs to another competition or cannot be used."""




def open_session(
    *,
    competition_id: str,
    data_dir: Path,
    run_dir: Path,
    config: RunConfig,
    endpoint: ModelEndpoint,
) -> RunSession:
    """Validate the inputs, create the run directory and journal, register the session.

    An existing ``RUN_DIR/journal.json`` is continued (budget counts its nodes). All checks
    run before anything is written.

    Raises:
        CompetitionError: the competition cannot be loaded (names the file and the fix).
        ModelAccessError: the model is unknown or its API key is missing.
        RunDirectoryError: the run directory's journal belongs to another competition, or its
            saved agents do not match ``agents.num_agents``.
        SandboxUnavailableError: the sandbox cannot run programs (see :func:`open_sandbox`).
    """
    competition = load_competition(competition_id, Path(data_dir))
    if not competition.public_dir.is_dir():
        raise CompetitionError(f"{competition.public_dir} not found: prepare the competition first")
    check_model_access(endpoint)
    run_dir = Path(run_dir).resolve()
    journal_path = run_dir / JOURNAL_FILE
    kwargs = dict(loci=LOCI, stub_threshold=config.search.stub_threshold)
    if journal_path.exists():
        journal = Journal.load(journal_path, **kwargs)
        if journal.info.get("competition_id") not in (None, competition.id):
            raise RunDirectoryError(
                f"{journal_path} belongs to competition '{journal.info['competition_id']}', "
                f"not '{competition.id}': choose another --run-dir"
            )
    else:
        journal = Journal(journal_path, **kwargs)
    journal.info.update(
        competition_id=competition.id,
        data_dir=str(Path(data_dir).resolve()),
        model=endpoint.name,
        seed=config.seed,
        config=config.model_dump(mode="json"),
    )
    sandbox, runtime = open_sandbox(config)
    journal.info["runtime"] = runtime.model_dump()
    run_dir.mkdir(parents=True, exist_ok=True)
    journal.save()
    try:
        agents = AgentPool.open(run_dir, config.agents.num_agents)
    except ValueError as exc:
        raise RunDirectoryError(str(exc)) from None
    dispatcher = Dispatcher.open(
        agents.ids, config.agents.epsilon, config.agents.ema_alpha, run_dir / "agents" / STATE_FILE
    )
    session = RunSession(
        run_dir=run_dir,
        config=config,
        competition=competition,
        endpoint=endpoint,
        journal=journal,
        budget=Budget(
            max_steps=config.search.max_steps,
            used=len(journal),
            time_limit=config.search.time_limit,
        ),
        sandbox=sandbox,
        data_preview=preview_data(competition.public_dir),
        runtime=runtime,
        agents=agents,
        dispatcher=dispatcher,
        experience=ExperiencePool(run_dir / EXPERIENCE_FILE),
    )
    with _REGISTRY_LOCK:
        _SESSIONS[str(run_dir)] = session
    return session


def get_session(run_dir: str | Path) -> RunSession:
    """The session registered for ``run_dir`` in this process.

    Raises:
        KeyError: no session is open for it here (open it with :func:`open_session`).
    """
    key = str(Path(run_dir).resolve())
    with _REGISTRY_LOCK:
        if key not in _SESSIONS:
            raise KeyError(f"no run session open for {key} in this process")
        return _SESSIONS[key]


def close_session(run_dir: str | Path) -> None:
    """Forget the session of ``run_dir`` (no-op when none is registered)."""
    with _REGISTRY_LOCK:
        _SESSIONS.pop(str(Path(run_dir).resolve()), None)


def default_run_dir(competition_id: str, seed: int, root: Path = Path("runs")) -> Path:
    """``runs/<competition>-<UTC timestamp>-s<seed>``: a fresh directory name per run."""
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return root / f"{competition_id}-{stamp}-s{seed}"
