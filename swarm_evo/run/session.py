"""RunSession: everything one run shares across its steps, and the per-process registry.

A session is opened once per run (by the main flow or the CLI) and looked up by run directory in
the step subflows, so flow parameters stay small JSON values (run_dir, slot, epoch) while the
journal, budget, lanes, sandbox and model endpoint are shared objects. Nothing here talks to Prefect.

Run directory layout (SPEC §5)::

    RUN_DIR/journal.json                 all nodes + run info (atomic rewrite per append)
    RUN_DIR/run_state.json               the run's elapsed seconds, rewritten every 30 s (budget.py)
    RUN_DIR/nodes/<node_id>/             solution.py, stdout.txt, stderr.txt,
                                         submission/submission.csv, prompt-*.md
    RUN_DIR/best_solution.py             best valid node's program
    RUN_DIR/submission/submission.csv    best valid node's submission
    RUN_DIR/grade_report.json            that submission graded on the private answers
    RUN_DIR/agents/<agent_id>/*.md       each agent's role and strategy texts (SPEC §9)
    RUN_DIR/agents/dispatcher.json       the dispatcher's EMA scores
    RUN_DIR/experience.jsonl             the experience pool, one record per node
    RUN_DIR/agent_evolutions/            one record (+ prompts) per agent evolution
    RUN_DIR/run_report.json              operations, agents, evolutions, LLM calls and cost
    RUN_DIR/llm_calls.jsonl              every model call, failed ones too (swarm_evo/llm/ledger.py)

A run optimises either a competition or a problem (SPEC §11); the :class:`~swarm_evo.objective.Objective`
hides the difference from the search. Problem runs add the files of :mod:`swarm_evo.objective.problem`.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from swarm_evo.config import RunConfig
from swarm_evo.learning.agents import AgentPool
from swarm_evo.learning.dispatcher import STATE_FILE, Dispatcher
from swarm_evo.learning.experience import EXPERIENCE_FILE, ExperiencePool
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm.ledger import LEDGER_FILE, CallLedger, ledger_for
from swarm_evo.llm.probe import check_model_access
from swarm_evo.objective import Objective, ProblemObjective
from swarm_evo.objective.fitness import DERIVED_DIRS, apply_fitness, choose_fitness
from swarm_evo.objective.load import load_objective, recorded_data_dir
from swarm_evo.population.journal import JOURNAL_FILE, Journal, JournalError
from swarm_evo.run.budget import RUN_STATE_FILE, Budget, ElapsedRecorder, recorded_elapsed
from swarm_evo.run.lanes import ExecutionLanes, model_call_limit
from swarm_evo.run.prompt_budget import check_prompt_window
from swarm_evo.run.resume import ResumeReport, RunDirectoryError, check_policy, reconcile
from swarm_evo.run.preflight import open_sandbox, probe_endpoints, record_probe
from swarm_evo.run.stops import RunDeclaredDeadError, RunStoppedError, RunSupersededError  # noqa: F401 - re-exported
from swarm_evo.sandbox import RuntimeInfo, Sandbox, backends
from swarm_evo.sandbox.gpu_slots import execution_workers
from swarm_evo.search.selection import genome_keys, previous_plan_keys
from swarm_evo.store import RunMirror, checked_store, mirror_run
from swarm_evo.store.lease import new_owner
from swarm_evo.store.liveness import WriterState
from swarm_evo.store.run_lock import RunDirLock, check_free, lock_run_dir

_SESSIONS: dict[str, RunSession] = {}
_REGISTRY_LOCK = threading.Lock()


@dataclass
class RunSession:
    """Shared state of one run. Build it with :func:`open_session`."""

    run_dir: Path
    config: RunConfig
    objective: Objective
    endpoint: ModelEndpoint
    journal: Journal
    budget: Budget
    sandbox: Sandbox
    runtime: RuntimeInfo
    agents: AgentPool
    dispatcher: Dispatcher
    experience: ExperiencePool
    plans_in_flight: set[tuple] = field(default_factory=set)
    debugs_in_flight: set[str] = field(default_factory=set)  # buggy leaves a greedy debug step is fixing
    lock: threading.RLock = field(default_factory=threading.RLock)
    resume_report: ResumeReport | None = None  # set when an existing run directory was continued
    probe_warnings: list[str] = field(default_factory=list)  # transient failures of the preflight calls
    stop_reason: str | None = None  # why no new step starts although budget and time are left
    stop_is_failure: bool = False  # the stop is a failure (the model keeps failing): exit 1
    declared_dead: bool = False  # the orchestrator declared the run dead while it lives (declare_dead)
    opened_at_nodes: int = 0  # journal nodes when this process opened the run (step.limits: failures since)
    published_best_id: str | None = None  # the node whose files are RUN_DIR's best (step.persistence.publish_best)
    unpublishable: set[str] = field(default_factory=set)  # candidates whose files could not be handed in (warned once)
    elapsed_recorder: ElapsedRecorder | None = None  # keeps RUN_DIR/run_state.json current while the session is open
    mirror: RunMirror | None = None  # mirrors RUN_DIR to STORE/runs/<name>/ (config ``store``)
    run_lock: RunDirLock | None = None  # this process's hold on RUN_DIR (one process per run directory)
    lanes: ExecutionLanes | None = None  # the execution slots, held only while a program runs (issue 52)

    @property
    def review_endpoint(self) -> ModelEndpoint:
        """The endpoint that reviews executed programs (``model.review_name``, default the code model)."""
        return self.endpoint.for_role("review", self.config.model.review_name)

    @property
    def evolution_endpoint(self) -> ModelEndpoint:
        """The endpoint that rewrites agents (``model.evolution_name``, default the code model)."""
        return self.endpoint.for_role("evolution", self.config.model.evolution_name)

    @property
    def ledger(self) -> CallLedger:
        """The run's ledger of model calls (``RUN_DIR/llm_calls.jsonl``)."""
        return ledger_for(self.run_dir / LEDGER_FILE)

    def stop(self, reason: str, failure: bool = False) -> None:
        """No new step starts from now on (steps in flight finish); the first reason stands."""
        with self.lock:
            if self.stop_reason is None:
                self.stop_reason, self.stop_is_failure = reason, failure

    def declare_dead(self, reason: str) -> None:
        """The orchestrator says this run is dead while it lives: a failing :meth:`stop` whose
        run grades nothing (:class:`RunDeclaredDeadError`)."""
        with self.lock:
            self.stop(reason, failure=True)
            self.declared_dead = True

    @property
    def superseded(self) -> str | None:
        """Why this copy of the run may no longer write its store location, or None."""
        if self.mirror is None or self.mirror.superseded is None:
            return None
        return str(self.mirror.superseded)

    @property
    def finished(self) -> bool:
        """True when no new step may start: budget, time limit, a stop (:meth:`stop`), or another
        process took the run's store location over (:attr:`superseded`)."""
        return self.stop_reason is not None or self.budget.done or self.superseded is not None

    @property
    def loci(self) -> tuple[str, ...]:
        """The section names of this run's programs (the objective's)."""
        return self.objective.loci

    @property
    def data_preview(self) -> str:
        """The public data preview for prompts ("" for problems)."""
        return self.objective.data_preview()

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
        """Gene-plan keys already tried (novelty guard input): plans merged (journal) or being
        merged now, and the genome of every existing node (a plan equal to one rebuilds it)."""
        return (previous_plan_keys(self.journal, self.loci) | genome_keys(self.journal, self.loci)
                | set(self.plans_in_flight))


def check_run_dir(run_dir: Path, objective: Objective, policy: str | None = None) -> None:
    """Preflight of a run directory, before anything is written: a directory with a journal
    must belong to ``objective`` and (when ``policy`` is given) to the same search policy.

    Raises:
        RunDirectoryError: one line naming ``RUN_DIR/journal.json`` and the fix.
        RunDirectoryBusyError: another process has ``run_dir`` open (issue 53, item 2).
    """
    check_free(run_dir)
    path = Path(run_dir) / JOURNAL_FILE
    if not path.exists():
        return
    try:
        journal = Journal.load(path, loci=objective.loci, required=objective.required_loci)
    except JournalError as exc:
        raise RunDirectoryError(f"{str(exc).splitlines()[0]}: choose another --run-dir") from None
    _check_owner(journal, objective)
    if policy is not None:
        check_policy(journal, policy)


def _check_owner(journal: Journal, objective: Objective) -> None:
    key = "competition_id" if objective.kind == "competition" else "problem"
    for other in ("competition_id", "problem"):
        owner = journal.info.get(other)
        if owner is not None and (other != key or owner != objective.id):
            what = "competition" if other == "competition_id" else "problem"
            raise RunDirectoryError(
                f"{journal.path} belongs to {what} '{owner}', not {objective.kind} '{objective.id}': "
                "choose another --run-dir"
            )
    owner_instance, instance = journal.info.get("instance"), getattr(objective, "instance", None)
    if owner_instance is not None and owner_instance != instance:  # journals before instances have none
        raise RunDirectoryError(
            f"{journal.path} belongs to instance '{owner_instance}' of {objective.id}, not '{instance}': "
            "choose another --run-dir"
        )


def open_session(
    *,
    competition_id: str | None = None,
    problem: str | None = None,
    data_dir: str | Path | None = None,
    run_dir: Path,
    config: RunConfig,
    endpoint: ModelEndpoint,
    owner: dict | None = None,
    take_over: bool = False,
    writer_state: WriterState | None = None,
) -> RunSession:
    """Validate the inputs, create the run directory and journal, register the session.

    The run optimises a competition (``competition_id``) or a problem (``problem``); give
    exactly one. An existing ``RUN_DIR/journal.json`` is continued (budget counts its nodes).
    All checks run before anything is written. With a run store (``config.store.url``) the run
    takes its location over (``owner``: :func:`~swarm_evo.store.lease.new_owner`, made here
    when not given; the flow gives its flow run), last, after every other check, and only from a
    dead writer unless ``take_over`` (``writer_state``: the Prefect state of a flow run by id,
    :mod:`swarm_evo.store.liveness`). The session holds the run directory's lock
    (:mod:`swarm_evo.store.run_lock`) until :func:`close_session`.

    Raises:
        CompetitionError, ProblemError: the objective cannot be loaded (names the file and the fix).
        ConfigError: ``model.context_window`` is too small for the prompts' fixed text, or a cost
            limit is set for a model without a price.
        ModelAccessError: the model is unknown or its API key is missing.
        RunDirectoryError: the run directory's journal belongs to another competition or
            problem, or its saved agents do not match ``agents.num_agents``.
        SandboxUnavailableError: the sandbox cannot run programs (see :func:`open_sandbox`).
        StoreError: the run store (``config.store.url``) cannot be reached or written, its
            location holds another run (``LocationClashError``), or holds this run further on
            than ``run_dir`` (``StaleCopyError``, naming the command that resumes the store's copy),
            or its writer is alive (``WriterAliveError``); ``run_dir`` is open in another process
            (``RunDirectoryBusyError``).
    """
    store = checked_store(config.store.url)
    objective = load_objective(competition_id, problem, data_dir, config.mlebench_repo, config.problem.instance)
    check_prompt_window(config, objective)  # also for runs started from a deployment, not the CLI
    choose_fitness(objective, config.search)  # search.fitness: hidden where no split is possible is bad input
    check_model_access(endpoint)
    probes = probe_endpoints(endpoint, config)  # fail fast: unreachable endpoint, refused key, unknown model
    run_dir = Path(run_dir).resolve()
    journal_path = run_dir / JOURNAL_FILE
    kwargs = dict(loci=objective.loci, required=objective.required_loci, stub_threshold=config.search.stub_threshold)
    continued = journal_path.exists()
    if continued:
        journal = Journal.load(journal_path, **kwargs)
        _check_owner(journal, objective)
    else:
        journal = Journal(journal_path, **kwargs)
    journal.info.update(
        **({"competition_id": objective.id} if objective.kind == "competition" else {"problem": objective.id}),
        **({"instance": objective.instance} if getattr(objective, "instance", None) else {}),
        run_id=journal.info.get("run_id") or uuid.uuid4().hex,  # the run's identity (its store location's owner)
        data_dir=recorded_data_dir(data_dir),  # a store URL as given: a resume elsewhere reads the store
        model=endpoint.name,
        seed=config.seed,
        config=config.model_dump(mode="json"),
    )
    sandbox, runtime = open_sandbox(config)
    journal.info["runtime"] = runtime.model_dump()
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    hold = None
    try:  # every check first, the store location taken over last (issue 53, item 3)
        hold = lock_run_dir(run_dir)  # one process per run directory (issue 53, item 2)
        apply_fitness(objective, config.search, config.seed, run_dir, journal.info, len(journal))  # the hidden split
        try:
            agents = AgentPool.open(run_dir, config.agents.num_agents, objective.agent_texts_dir)
        except ValueError as exc:
            raise RunDirectoryError(str(exc)) from None
        mirror = mirror_run(run_dir, store, journal.info["run_id"], [node.id for node in journal.nodes],
                            owner or new_owner(), max_file_mb=config.store.max_file_mb, force=take_over,
                            derived=DERIVED_DIRS, writer_state=writer_state)  # derived: rebuilt by every open
    except Exception:
        if hold is not None:
            hold.release()
            if created:  # refused before the run began: leave no run directory behind
                shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if mirror is not None:
        journal.after_save = mirror.request  # the store is at most the node in flight behind
        if mirror.in_place:  # the journal is the store's: written only while this run holds the lease
            journal.before_save = mirror.check_writer
    journal.save()
    if isinstance(objective, ProblemObjective):
        objective.auxiliary_path = run_dir / "auxiliary_metrics.py"
    dispatcher = Dispatcher.open(
        agents.ids, config.agents.epsilon, config.agents.ema_alpha, run_dir / "agents" / STATE_FILE
    )
    _stop_recording(run_dir)  # a session opened again here: the previous one's clock writes last
    budget = Budget.for_journal(  # a continued run goes on from its count and age (even killed mid-step)
        len(journal),
        config.search.max_steps,
        time_limit=config.search.time_limit,
        elapsed=recorded_elapsed(run_dir, journal.info) if continued else 0.0,
    )
    if isinstance(objective, ProblemObjective):
        objective.time_left = budget.time_left  # the deadline bounds each whole evaluation
    left = budget.time_left()
    endpoint = endpoint.model_copy(update={
        "deadline": None if left is None else time.time() + left,  # model calls end by the time limit
        "ledger_path": str(run_dir / LEDGER_FILE),
        "max_cost_usd": config.model.max_cost_usd,  # no call starts once the run's calls cost this
        "max_concurrent_calls": model_call_limit(config),  # model calls of the run at once (issue 52)
    })
    for probe in probes:
        record_probe(run_dir, probe)
    session = RunSession(
        run_dir=run_dir,
        config=config,
        objective=objective,
        endpoint=endpoint,
        journal=journal,
        budget=budget,
        sandbox=sandbox,
        runtime=runtime,
        agents=agents,
        dispatcher=dispatcher,
        experience=ExperiencePool(run_dir / EXPERIENCE_FILE),
        probe_warnings=[p.warning for p in probes if p.warning],
        opened_at_nodes=len(journal),
        mirror=mirror,
        run_lock=hold,
    )
    session.lanes = ExecutionLanes(execution_workers(config), budget.elapsed, lambda: len(journal))
    if continued:
        session.resume_report = reconcile(
            run_dir, journal, session.experience, dispatcher, containers_removed=_remove_stray_containers(config, run_dir)
        )
    # after reconcile (it removes leftover temporary files); ends by itself once no step can run
    session.elapsed_recorder = ElapsedRecorder(
        budget, run_dir / RUN_STATE_FILE, done=lambda: session.finished and budget.in_flight == 0
    ).start()
    with _REGISTRY_LOCK:
        _SESSIONS[str(run_dir)] = session
    return session


def _stop_recording(run_dir: Path) -> None:
    """Stop the elapsed-time recorder of the session registered for ``run_dir``, if any."""
    with _REGISTRY_LOCK:
        session = _SESSIONS.get(str(run_dir))
    if session is not None and session.elapsed_recorder is not None:
        session.elapsed_recorder.stop()


def _remove_stray_containers(config: RunConfig, run_dir: Path) -> list[str]:
    """What a killed run process left running of ``run_dir``'s sandbox (the Docker backend's
    containers: ``Backend.leftovers`` of :mod:`swarm_evo.sandbox.backends`), removed; their names."""
    leftovers = backends.get(config.sandbox.backend).leftovers
    return leftovers(run_dir) if leftovers is not None else []


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
    """Forget the session of ``run_dir``: stop its elapsed-time recorder after a last write of
    ``RUN_DIR/run_state.json``, then upload what the store still lacks, stop the mirror and let
    the run directory go (its lock; no-op when none is registered)."""
    key = str(Path(run_dir).resolve())
    _stop_recording(Path(key))
    with _REGISTRY_LOCK:
        session = _SESSIONS.pop(key, None)
    if session is not None and session.mirror is not None:
        session.mirror.close()
    if session is not None and session.run_lock is not None:
        session.run_lock.release()


def default_run_dir(competition_id: str, seed: int, root: Path = Path("runs")) -> Path:
    """``runs/<competition>-<UTC timestamp>-s<seed>``: a fresh directory name per run."""
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return root / f"{competition_id}-{stamp}-s{seed}"
