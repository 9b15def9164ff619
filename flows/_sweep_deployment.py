"""The runs of a benchmark sweep on a deployment (flows/benchmark_sweep.py): each run is a flow
run of a two-phase-evo deployment, created with ``prefect.deployments.run_deployment`` (linked
to the sweep as a subflow), run by whichever worker of its work pool takes it; the sweep polls
them until they finish, at most ``max_parallel_runs`` unfinished at a time.

**No run twice (issue 40, item 9).** Every flow run gets an idempotency key made of the sweep's
persistent id (``OUT/sweep.json``, swarm_evo/sweeps/sweep_identity.py): ``<sweep id>-<run name>``
for the run, ``<sweep id>-<run name>-resume<N>`` for its N-th resume. Prefect's server keeps one
flow run per flow and idempotency key and ``run_deployment`` returns the existing one
(``prefect.server.models.flow_runs.create_flow_run``: insert … on conflict do nothing; Prefect
3.8.8), so a driver started again finds the runs in flight and waits for them, finds crashed
runs and their resumes, and starts only what was never started.

**Crashed runs** (the worker or its process died; the zombie automation saw the heartbeats
stop) are resumed from their journal — in the run store, else in the run directory when the
sweep sees it (a shared disk) — as a new flow run of the deployment, at most ``max_resumes``
times; the row counts the resumes. So is a run marked Crashed while its process lived (issue 53,
item 11): it sets itself Running "Stopping" while it drains its steps in flight, which the sweep
waits for, and ends Failed by ``RunDeclaredDeadError`` (flows/_state_watch.py), its writer gone.

**A run still Running ``run_timeout`` seconds after it started** (the server's ``start_time``, so
a restarted driver keeps the count) is cancelled (state Cancelling with the message
:data:`TIMEOUT_MARK`; the worker kills its process and marks it Cancelled — a frozen process
took 43 s here, the worker's 30 s grace — or, after :data:`CANCEL_GRACE` s, the sweep marks it
Cancelled itself) and then resumed like a crashed run, counted as a resume.

**A run no worker picks up** (still Scheduled) within ``start_timeout`` seconds while none of
the sweep's runs is running or being started (so runs queued behind the sweep's own busy
workers wait as long as they must) is cancelled and reported with a row that says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from prefect import get_run_logger
from prefect.states import Cancelled, Cancelling

from flows._state_watch import declared_dead_failure
from flows._sweep_rows import Item, Rows, describe, failed_row, has_report, stored_row
from swarm_evo.config import read_config_file
from swarm_evo.population.journal import JOURNAL_FILE
from swarm_evo.sweeps import sweep

RUN_FLOW_NAME = "two-phase-evo"
SWEEP_TAGS = ["swarm-evo", "benchmark-sweep"]
DEFAULT_START_TIMEOUT = 1800.0
RUN_TIMEOUT_FACTOR = 1.5
RUN_TIMEOUT_MARGIN = 600.0
CANCEL_GRACE = 120.0
"""Seconds a run the sweep cancelled may stay Cancelling (its process frozen, its machine gone)
before the sweep marks it Cancelled itself and resumes it."""
TIMEOUT_MARK = "swarm-evo sweep: run_timeout"
"""How the Cancelling state the sweep sets begins: a Cancelled run with it is resumed, a run
cancelled by anyone else is reported."""
RESUME_PARAMETERS = ("data_dir", "max_steps", "time_limit", "parallel_workers", "executor", "llm_block",
                     "sandbox_block")
"""The parameters of a run that its resume keeps (the rest comes from the run's journal)."""


def default_run_timeout(time_limit: float) -> float:
    """The default ``run_timeout`` (issue 34): ``1.5 × time_limit + 600`` seconds once Running. A run
    stops itself at its time limit, then grades and reports: the factor covers a step in flight
    at the limit, the margin grading and a slow start. A dead worker's run is Crashed long before
    (``swarm-evo pool setup``); this bound keeps a sweep from waiting for ever without that automation.

    Raises:
        ValueError: ``time_limit`` not > 0.
    """
    if not time_limit > 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit}")
    return RUN_TIMEOUT_FACTOR * time_limit + RUN_TIMEOUT_MARGIN


def deployment_name(deployment: str) -> str:
    """``NAME`` or ``two-phase-evo/NAME`` -> ``two-phase-evo/NAME``.

    Raises:
        SweepError: the name belongs to another flow, or is empty.
    """
    name = deployment.strip()
    if "/" not in name:
        name = f"{RUN_FLOW_NAME}/{name}"
    flow_name, _, deployment_part = name.partition("/")
    if flow_name != RUN_FLOW_NAME or not deployment_part:
        raise sweep.SweepError(
            f"deployment {deployment!r}: give a deployment of {RUN_FLOW_NAME} "
            f"(e.g. {RUN_FLOW_NAME}/default, from prefect.yaml)"
        )
    return name


def prefect_api_url() -> str | None:
    """The Prefect API of this process (PREFECT_API_URL or the active profile's), or None
    (then flows run on a temporary local server)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def check_deployment(name: str) -> str | None:
    """Fail before any run when the Prefect server has no deployment ``name``; returns its
    work pool's name (None when it has none).

    Raises:
        SweepError: no such deployment (the message says how to create it).
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            return client.read_deployment_by_name(name).work_pool_name
        except ObjectNotFound:
            raise sweep.SweepError(
                f"deployment {name} not found on the Prefect server ({client.api_url}): "
                f"create it with `prefect deploy -n {name.split('/', 1)[1]}` from the repository root"
            ) from None


@dataclass(frozen=True)
class Limits:
    """How the sweep drives its deployment runs (see the module; seconds)."""

    max_parallel_runs: int
    poll_interval: float
    run_timeout: float
    start_timeout: float
    max_resumes: int


@dataclass(frozen=True)
class Where:
    """Where the rows' facts come from: the competitions' ``data_dir``, the ``problems`` by task,
    the problems' data folder."""

    data_dir: str
    problems: dict
    problem_data_dir: str | None


@dataclass
class _Run:
    item: Item
    name: str
    attempt: int  # 0: the run itself; N: its N-th resume
    flow_run_id: object


def _result_of(flow_run) -> dict | None:
    """The persisted result of a finished deployment run (None when not persisted/readable)."""
    try:
        value = flow_run.state.result(raise_on_failure=False)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def _now() -> datetime:
    return datetime.now(timezone.utc)


class DeploymentSweep:
    """Drive the runs ``parameters`` (by item) as flow runs of ``deployment`` (module docstring).

    Args:
        deployment: ``two-phase-evo/NAME``; ``work_pool``: its work pool (for messages).
        parameters: each item's flow run parameters (``run_dir`` names the run).
        rows: the sweep's rows (``rows.sweep_store``: the run store, or None).
        where, limits: see :class:`Where`, :class:`Limits`.
        sweep_id: the sweep's persistent id (the idempotency keys).
    """

    def __init__(self, deployment: str, work_pool: str | None, parameters: dict[Item, dict], rows: Rows,
                 where: Where, limits: Limits, sweep_id: str) -> None:
        self.deployment = deployment
        self.work_pool = work_pool
        self.parameters = parameters
        self.rows = rows
        self.where = where
        self.limits = limits
        self.sweep_id = sweep_id
        self.logger = get_run_logger()
        self._running: dict[object, _Run] = {}
        self._last_busy = _now()

    # ------------------------------------------------------------------ helpers
    def _name(self, item: Item) -> str:
        return Path(self.parameters[item]["run_dir"]).name

    def _row_dir(self, item: Item) -> Path:
        """Where the row's files are read: OUT/runs/<name> with a store, else the run directory."""
        if self.rows.sweep_store is not None:
            return self.rows.out_dir / sweep.RUNS_DIR / self._name(item)
        return Path(self.parameters[item]["run_dir"])

    def _resume_source(self, item: Item) -> str | None:
        """What the run's resume continues: its store URL, or its run directory when the sweep
        sees its journal there (a shared disk); None when neither holds a journal."""
        name, store = self._name(item), self.rows.sweep_store
        if store is not None:
            return store.run_url(name) if store.has_journal(name) else None
        run_dir = Path(self.parameters[item]["run_dir"])
        return str(run_dir) if (run_dir / JOURNAL_FILE).is_file() else None

    def _start(self, item: Item, attempt: int, source: str | None = None) -> None:
        from prefect.deployments import run_deployment

        name = self._name(item)
        flow_run_name = name if attempt == 0 else f"{name}-resume{attempt}"
        params = self.parameters[item]
        if attempt:
            params = {**{k: v for k, v in params.items() if k in RESUME_PARAMETERS}, "resume": source}
        flow_run = run_deployment(self.deployment, parameters=params, flow_run_name=flow_run_name, timeout=0,
                                  idempotency_key=f"{self.sweep_id}-{flow_run_name}", tags=SWEEP_TAGS)
        state = flow_run.state.name if flow_run.state else None
        self.logger.info("run %s: flow run %s of %s (%s)", flow_run_name, flow_run.id, self.deployment, state)
        self._running[flow_run.id] = _Run(item, name, attempt, flow_run.id)

    @staticmethod
    def _timed_out(client, flow_run) -> bool:
        """Whether the sweep itself cancelled the run for its run timeout (its state history)."""
        return any((s.message or "").startswith(TIMEOUT_MARK) for s in client.read_flow_run_states(flow_run.id))

    # ------------------------------------------------------------------ the loop
    def run(self, items: list[Item]) -> None:
        """Start, poll, resume and report every item (returns when each has its row)."""
        from prefect.client.orchestration import get_client

        waiting = list(items)
        with get_client(sync_client=True) as client:
            while waiting or self._running:
                while waiting and len(self._running) < self.limits.max_parallel_runs:
                    self._start(waiting.pop(0), 0)
                time.sleep(self.limits.poll_interval)
                busy = False
                for flow_run_id, run in list(self._running.items()):
                    busy = self._poll(client, run, client.read_flow_run(flow_run_id)) or busy
                if busy:
                    self._last_busy = _now()

    def _poll(self, client, run: _Run, flow_run) -> bool:
        """One look at one flow run; returns whether it is being run (Pending, Running, Cancelling)."""
        state = flow_run.state
        if state is None:
            return False
        now = _now()
        if state.is_final():
            timed_out = state.is_cancelled() and self._timed_out(client, flow_run)
            error = None
            declared_dead = declared_dead_failure(state)  # stopped cleanly while alive (flows/_state_watch.py)
            if state.is_crashed() or timed_out or declared_dead:
                why = ("crashed" if state.is_crashed() else "was declared dead while alive and stopped" if declared_dead
                       else f"was cancelled after its run timeout ({state.message})")
                source = self._resume_source(run.item)
                if run.attempt < self.limits.max_resumes and source is not None:
                    del self._running[flow_run.id]
                    self.logger.warning("run %s: flow run %s %s (%s); resuming it from %s (resume %s of at most %s)",
                                        run.name, flow_run.id, why, state.message, source, run.attempt + 1,
                                        self.limits.max_resumes)
                    self._start(run.item, run.attempt + 1, source)
                    return False
                if timed_out:
                    left = "no resume left" if source is not None else "no journal to resume from"
                    error = (f"flow run {flow_run.id} was still Running {self.limits.run_timeout:.0f} s after it "
                             f"started: cancelled, {left}")
            self._report(run, flow_run, error)
            return False
        if state.is_scheduled():
            waited = (now - max(self._last_busy, flow_run.created or now)).total_seconds()
            if waited > self.limits.start_timeout:
                self._not_picked_up(client, run, flow_run)
            return False
        if state.is_running():
            started = flow_run.start_time or state.timestamp
            if (now - started).total_seconds() > self.limits.run_timeout:
                message = (f"{TIMEOUT_MARK}: still Running {self.limits.run_timeout:.0f} s after it started; the "
                           "sweep cancels it and resumes it")
                client.set_flow_run_state(flow_run.id, Cancelling(message=message))
                self.logger.warning("run %s: flow run %s %s", run.name, flow_run.id, message[len(TIMEOUT_MARK) + 2:])
        elif state.is_cancelling() and (now - state.timestamp).total_seconds() > CANCEL_GRACE \
                and self._timed_out(client, flow_run):
            client.set_flow_run_state(flow_run.id, Cancelled(message=f"{TIMEOUT_MARK}: still Cancelling "
                                                             f"{CANCEL_GRACE:.0f} s later; marked Cancelled by the sweep"),
                                      force=True)
        return state.is_running() or state.is_pending() or state.is_cancelling()

    def _not_picked_up(self, client, run: _Run, flow_run) -> None:
        pool = self.work_pool or "its work pool"
        error = (f"flow run {flow_run.id} was not picked up by any worker of {pool} within "
                 f"{self.limits.start_timeout:.0f} s (start timeout) while none of the sweep's runs was running: "
                 f"it was cancelled; start a worker (prefect worker start --pool {pool}) or give a longer start timeout")
        client.set_flow_run_state(flow_run.id, Cancelled(message=error))
        self.logger.warning("run %s: %s", run.name, error)
        del self._running[flow_run.id]
        row = failed_row(run.item, self._row_dir(run.item), self.where.data_dir, self.where.problems,
                         self.where.problem_data_dir, error)
        self.rows.add(run.item, row)

    def _report(self, run: _Run, flow_run, error: str | None) -> None:
        state = flow_run.state
        row_dir, where = self._row_dir(run.item), self.where
        completed = state.is_completed()
        result = None
        if completed and self.rows.sweep_store is None and not has_report(run.item, row_dir, where.problems):
            result = _result_of(flow_run)
        if error is None and not completed:
            error = f"flow run {flow_run.id} ended {state.name}: {state.message}"
        row = stored_row(
            self.rows.sweep_store, run.item, row_dir, where.data_dir, where.problems, where.problem_data_dir, result,
            error, missing=f"flow run {flow_run.id} completed but its report in {row_dir} is not readable here "
            "(give the sweep a run store, --store, or the sweep's out_dir on a shared filesystem)",
            resumes=run.attempt,
        )
        del self._running[flow_run.id]
        self.rows.add(run.item, row)
        self.logger.info("run %s: %s", run.name, describe(row))


def run_config_source(config_path: str | None, target: str | None) -> dict:
    """How the runs get the sweep's config file: its absolute path for runs in this process;
    its contents (``config_data``) for a deployment's, whose workers need not see this
    machine's files (a pool with no shared disk). ``{}`` without a file."""
    if not config_path:
        return {}
    path = Path(config_path).expanduser().resolve()
    if target is None:
        return {"config_path": str(path)}
    return {"config_data": read_config_file(path)}  # ConfigError names the file (checked before, too)
