"""benchmark_sweep: many ``two-phase-evo`` runs, one MLE-bench grading report (SPEC §1, §12).

Every (competition, policy, seed) of the plan is its own ``two-phase-evo`` flow run, with run
directory ``OUT/runs/<competition>-<policy>-s<seed>``:

- with ``deployment`` (a deployment of two-phase-evo, e.g. ``two-phase-evo/default``): each run
  is a flow run of that deployment, created with ``prefect.deployments.run_deployment``
  (linked to the sweep as a subflow), so the workers of its work pool — on as many machines as
  there are — share the sweep; the sweep polls them until they finish;
- without: the runs are subflows of the sweep in this process (``max_parallel_runs`` at a time,
  in threads that carry the sweep's context, as the step subflows of an epoch do).

Each run's grading report is read from ``RUN_DIR/grade_report.json`` (the run's own grading on
the private answers), else from the run's returned summary; a run that fails counts as a run
without a submission (``swarm_evo.sweep.failed_row``). After each finished run and at the end
the sweep (re)writes ``OUT/grading_reports.jsonl`` and ``OUT/summary.json``
(``swarm_evo.sweep``), and at the end publishes the summary as a table artifact (key
``benchmark-sweep``: one row per competition × policy; its versions are the sweep history).

Deployed as ``benchmark-sweep/nightly`` with a cron schedule (prefect.yaml).
"""

from __future__ import annotations

import contextvars
import inspect
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext

from flows.two_phase_evo import resolve_config, two_phase_evo
from swarm_evo import sweep
from swarm_evo.competition import CompetitionError, load_competition

FLOW_NAME = "benchmark-sweep"
RUN_FLOW_NAME = "two-phase-evo"
ARTIFACT_KEY = "benchmark-sweep"
DEFAULT_POLL_INTERVAL = 10.0


def supported_policies() -> tuple[str, ...]:
    """The search policies ``two_phase_evo`` accepts: all of ``sweep.POLICIES`` once it has a
    ``policy`` parameter, else only the default ``two_phase``."""
    if "policy" in inspect.signature(two_phase_evo.fn).parameters:
        return sweep.POLICIES
    return (sweep.DEFAULT_POLICY,)


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


def check_deployment(name: str) -> None:
    """Fail before any run when the Prefect server has no deployment ``name``.

    Raises:
        SweepError: no such deployment (the message says how to create it).
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(name)
        except ObjectNotFound:
            raise sweep.SweepError(
                f"deployment {name} not found on the Prefect server ({client.api_url}): "
                f"create it with `prefect deploy -n {name.split('/', 1)[1]}` from the repository root"
            ) from None


def _direction(competition_id: str, data_dir: str) -> bool:
    """is_lower_better of the competition (False when it cannot be loaded here)."""
    try:
        return load_competition(competition_id, Path(data_dir)).is_lower_better
    except CompetitionError:
        return False


class _Rows:
    """The sweep's rows in plan order; each finished run rewrites the two output files."""

    def __init__(self, items: list[tuple[str, str, int]], out_dir: Path):
        self._order = {item: i for i, item in enumerate(items)}
        self._rows: dict[tuple[str, str, int], dict] = {}
        self._out_dir = out_dir
        self._lock = threading.Lock()
        self._progress = create_progress_artifact(
            progress=0.0, description=f"Finished runs of the benchmark sweep {out_dir}, as % of {len(items)}"
        )

    def add(self, item: tuple[str, str, int], row: dict) -> None:
        with self._lock:
            self._rows[item] = row
            sweep.write_outputs(self.rows(), self._out_dir)
            done = 100.0 * len(self._rows) / max(1, len(self._order))
        update_progress_artifact(artifact_id=self._progress, progress=done)

    def rows(self) -> list[dict]:
        return [self._rows[item] for item in sorted(self._rows, key=self._order.__getitem__)]


def _row_from_run(item: tuple[str, str, int], run_dir: Path, data_dir: str, result: dict | None,
                  error: str | None, missing: str | None = None) -> dict:
    """The JSONL row of a finished run.

    A run that failed (``error``) gets a failed row even if its directory holds a
    grade_report.json (it may be an earlier attempt's). A completed run: its
    ``RUN_DIR/grade_report.json``, else the grade_report of its returned summary (``result``),
    else a failed row saying so (``missing``: why the report may be unreachable).
    """
    competition_id, policy, seed = item
    report = None
    if error is None:
        report = sweep.read_grade_report(run_dir)
        if report is None and isinstance(result, dict):
            report = result.get("grade_report")
        if report is None:
            error = missing or f"the run completed without {run_dir / sweep.GRADE_REPORT_FILE}"
    if report is not None:
        return sweep.report_row(report, policy=policy, seed=seed, run_dir=run_dir)
    return sweep.failed_row(competition_id, is_lower_better=_direction(competition_id, data_dir), policy=policy,
                            seed=seed, run_dir=run_dir, error=error)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS")


@contextmanager
def _shared_cores(executions: int):
    """Runs side by side in this process share the cores: while inside, the BLAS/OpenMP thread
    variables that are unset here are set to ``cpu_count // executions`` (local sandboxes pass
    them on to the programs; each run's sandbox only divides the cores among its own
    ``parallel_workers``). Without this, two runs with 2 OpenMP threads per program on 2 cores
    spin each other out: programs of 6 s took 150-220 s (measured here)."""
    added = {}
    if executions > 1:
        threads = str(max(1, (os.cpu_count() or 1) // executions))
        added = {name: threads for name in THREAD_VARIABLES if name not in os.environ}
    os.environ.update(added)
    try:
        yield added.get("OMP_NUM_THREADS")
    finally:
        for name in added:
            os.environ.pop(name, None)


def _run_in_process(items, parameters, rows: _Rows, data_dir: str, max_parallel_runs: int, workers: int) -> None:
    """Each run as a subflow of the sweep, ``max_parallel_runs`` at a time (``workers``: each
    run's parallel_workers)."""
    logger = get_run_logger()

    def one(item):
        params = parameters[item]
        name = Path(params["run_dir"]).name
        try:
            state = two_phase_evo.with_options(flow_run_name=name)(**params, return_state=True)
            if state.is_completed():
                row = _row_from_run(item, Path(params["run_dir"]), data_dir, state.result(), None)
            else:
                row = _row_from_run(item, Path(params["run_dir"]), data_dir, None,
                                    f"flow run ended {state.name}: {state.message}")
        except Exception as exc:  # a crash outside the run's own states (e.g. the API)
            logger.exception("run %s crashed", name)
            row = _row_from_run(item, Path(params["run_dir"]), data_dir, None, f"{type(exc).__name__}: {exc}")
        rows.add(item, row)
        logger.info("run %s: score %s (valid submission: %s)", name, row["score"], row["valid_submission"])

    runs_at_once = max(1, min(max_parallel_runs, len(items)))
    with _shared_cores(runs_at_once * workers) as threads:
        if threads:
            logger.info("%s runs at once: %s BLAS/OpenMP threads per program", runs_at_once, threads)
        with ThreadPoolExecutor(max_workers=runs_at_once, thread_name_prefix="sweep") as pool:
            for future in [pool.submit(contextvars.copy_context().run, one, item) for item in items]:
                future.result()


def _result_of(flow_run) -> dict | None:
    """The persisted result of a finished deployment run (None when not persisted/readable)."""
    try:
        value = flow_run.state.result(raise_on_failure=False)
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def _run_on_deployment(items, parameters, rows: _Rows, data_dir: str, name: str, max_parallel_runs: int,
                       poll_interval: float, run_timeout: float | None) -> None:
    """Each run as a flow run of deployment ``name``; at most ``max_parallel_runs`` unfinished."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    logger = get_run_logger()
    context = FlowRunContext.get()
    sweep_id = str(context.flow_run.id) if context and context.flow_run else "local"
    waiting = list(items)
    running: dict[object, tuple[tuple[str, str, int], float]] = {}
    with get_client(sync_client=True) as client:
        while waiting or running:
            while waiting and len(running) < max_parallel_runs:
                item = waiting.pop(0)
                params = parameters[item]
                run_name = Path(params["run_dir"]).name
                flow_run = run_deployment(
                    name, parameters=params, flow_run_name=run_name, timeout=0,
                    idempotency_key=f"{sweep_id}-{run_name}",  # a retried sweep does not duplicate runs
                    tags=["swarm-evo", FLOW_NAME],
                )
                logger.info("run %s: flow run %s of %s", run_name, flow_run.id, name)
                running[flow_run.id] = (item, time.monotonic())
            time.sleep(poll_interval)
            for flow_run_id, (item, started) in list(running.items()):
                flow_run = client.read_flow_run(flow_run_id)
                run_dir = Path(parameters[item]["run_dir"])
                state = flow_run.state
                if state is not None and state.is_final():
                    completed = state.is_completed()
                    row = _row_from_run(
                        item, run_dir, data_dir,
                        _result_of(flow_run) if completed and sweep.read_grade_report(run_dir) is None else None,
                        None if completed else f"flow run {flow_run_id} ended {state.name}: {state.message}",
                        missing=f"flow run {flow_run_id} completed but {run_dir / sweep.GRADE_REPORT_FILE} is not "
                        "readable here (the workers need the sweep's out_dir on a shared filesystem)",
                    )
                elif run_timeout is not None and time.monotonic() - started > run_timeout:
                    row = sweep.failed_row(
                        item[0], is_lower_better=_direction(item[0], data_dir), policy=item[1], seed=item[2],
                        run_dir=run_dir, error=f"flow run {flow_run_id} not finished after {run_timeout} s "
                        f"(state {state.name if state else None}); it was left running",
                    )
                else:
                    continue
                del running[flow_run_id]
                rows.add(item, row)
                logger.info("run %s: score %s (valid submission: %s)", run_dir.name, row["score"], row["valid_submission"])


@task(name="publish-sweep-summary", cache_policy=NO_CACHE)
def publish_summary(rows: list[dict], out_dir: str) -> dict:
    """Write OUT/grading_reports.jsonl and OUT/summary.json; the table artifact; the summary."""
    summary = sweep.write_outputs(rows, Path(out_dir))
    create_table_artifact(
        table=sweep.summary_table(summary),
        key=ARTIFACT_KEY,
        description=(
            f"Benchmark sweep {out_dir}: per competition and search policy, over seeds — runs, valid "
            f"submissions, MLE-bench medals and above-median, test score mean ± SEM (sample sd / √n over "
            f"the runs with a score). Files: {out_dir}/{sweep.REPORTS_FILE}, {out_dir}/{sweep.SUMMARY_FILE}."
        ),
    )
    return summary


@flow(name=FLOW_NAME, log_prints=True)
def benchmark_sweep(
    competitions: list[str],
    seeds: int | list[int] = 1,
    policies: list[str] = [sweep.DEFAULT_POLICY],  # noqa: B006 (never mutated)
    model: str | None = None,
    max_steps: int | None = None,
    data_dir: str = "data",
    out_dir: str | None = None,
    deployment: str | None = None,
    max_parallel_runs: int | None = None,
    parallel_workers: int | None = None,
    time_limit: float | None = None,
    config_path: str | None = None,
    executor: str | None = None,
    llm_block: str | None = None,
    sandbox_block: str | None = None,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    run_timeout: float | None = None,
) -> dict:
    """Run every (competition, policy, seed) as a two-phase-evo run and summarise the grades.

    Args:
        competitions: competition ids prepared under ``data_dir`` (MLE-bench layout).
        seeds: N (seeds 0..N-1) or a list of seeds; one run per seed.
        policies: search policies (``two_phase``, ``greedy``, ``random``; default ``[two_phase]``).
        model: litellm model or ``offline``; max_steps: each run's budget (nodes).
        data_dir: MLE-bench data directory, as seen by the machines that run the runs.
        out_dir: output folder (default ``runs/sweeps/<UTC time>``); run directories are
            ``OUT/runs/<competition>-<policy>-s<seed>`` (an existing one is continued).
        deployment: a two-phase-evo deployment (``NAME`` or ``two-phase-evo/NAME``): runs go
            to its work pool through ``run_deployment``; None runs them here as subflows.
            Workers must see ``data_dir`` and ``out_dir`` at the same (absolute) paths.
        max_parallel_runs: runs at once (default 1 here; all of them with a deployment, whose
            work pool and workers then limit the concurrency).
        parallel_workers, time_limit, config_path, executor, llm_block, sandbox_block: passed
            to every run (see two_phase_evo).
        poll_interval: seconds between state polls of deployment runs.
        run_timeout: seconds to wait for one deployment run before reporting it as failed.

    Returns:
        ``swarm_evo.sweep.summarize`` of the rows: ``{competition_id: {policy: stats}}``.

    Raises:
        SweepError, ConfigError, CompetitionError: bad parameters (before any run starts).
    """
    logger = get_run_logger()
    competition_ids = sweep.parse_names(competitions, "competitions")
    seed_list = sweep.parse_seeds(seeds)
    policy_list = sweep.parse_policies(policies, supported_policies())
    if max_parallel_runs is not None and max_parallel_runs < 1:
        raise sweep.SweepError(f"max_parallel_runs must be >= 1, got {max_parallel_runs}")
    if poll_interval <= 0:
        raise sweep.SweepError(f"poll_interval must be > 0 seconds, got {poll_interval}")
    # Validate the run parameters once (ConfigError names the key) before any run starts.
    config, _ = resolve_config(config_path, model=model, max_steps=max_steps, parallel_workers=parallel_workers,
                   time_limit=time_limit, executor=executor, llm_block=llm_block, sandbox_block=sandbox_block)
    data_path = Path(data_dir).expanduser().resolve()
    out_path = Path(out_dir).expanduser().resolve() if out_dir else sweep.default_out_dir().resolve()
    target = deployment_name(deployment) if deployment else None
    if target is None:
        for competition_id in competition_ids:
            load_competition(competition_id, data_path)  # CompetitionError: not prepared
    else:
        check_deployment(target)

    items = sweep.plan(competition_ids, policy_list, seed_list)
    with_policy = "policy" in inspect.signature(two_phase_evo.fn).parameters
    parameters = {}
    for competition_id, policy, seed in items:
        params = dict(
            competition_id=competition_id, data_dir=str(data_path),
            run_dir=str(out_path / sweep.RUNS_DIR / sweep.run_name(competition_id, policy, seed)),
            model=model, max_steps=max_steps, seed=seed, parallel_workers=parallel_workers,
            time_limit=time_limit, config_path=str(Path(config_path).expanduser().resolve()) if config_path else None,
            executor=executor, llm_block=llm_block, sandbox_block=sandbox_block,
            policy=policy if with_policy else None,
        )
        parameters[(competition_id, policy, seed)] = {k: v for k, v in params.items() if v is not None}
    (out_path / sweep.RUNS_DIR).mkdir(parents=True, exist_ok=True)
    logger.info("sweep of %s runs (%s x %s x seeds %s) into %s, %s", len(items), competition_ids, policy_list,
                seed_list, out_path, f"on deployment {target}" if target else "in this process")

    rows = _Rows(items, out_path)
    if target is None:
        _run_in_process(items, parameters, rows, str(data_path), max_parallel_runs or 1,
                        config.search.parallel_workers)
    else:
        _run_on_deployment(items, parameters, rows, str(data_path), target, max_parallel_runs or len(items),
                           poll_interval, run_timeout)
    summary = publish_summary(rows.rows(), str(out_path))
    print(sweep.format_table(sweep.summary_table(summary)))
    failed = sum(sweep.is_failed_row(row) for row in rows.rows())
    if failed:
        logger.warning("%s of %s runs failed (see error in %s)", failed, len(items), out_path / sweep.REPORTS_FILE)
    return summary
