"""benchmark_sweep: many ``two-phase-evo`` runs, one MLE-bench grading report (SPEC §1, §12).

Every (task, policy, seed) of the plan is its own ``two-phase-evo`` flow run, a task being a
competition or a problem on an instance (``tsp:kroA100``), with run directory
``OUT/runs/<competition>-<policy>-s<seed>`` (problems: ``OUT/runs/tsp-kroA100-<policy>-s<seed>``):

- with ``deployment`` (a deployment of two-phase-evo, e.g. ``two-phase-evo/default``): each run
  is a flow run of that deployment, created with ``prefect.deployments.run_deployment``
  (linked to the sweep as a subflow), so the workers of its work pool — on as many machines as
  there are — share the sweep; the sweep polls them until they finish, resumes crashed and
  timed-out ones, reports those no worker takes (flows/_sweep_deployment.py);
- without: the runs are subflows of the sweep in this process (``max_parallel_runs`` at a time,
  in threads that carry the sweep's context, as the step subflows of an epoch do;
  flows/_sweep_in_process.py).

The sweep records an id in ``OUT/sweep.json`` (and the store's ``sweep.json``) when it is created;
started again on the same output folder it is the same sweep: finished runs keep their rows and
no run is started twice (swarm_evo/sweeps/sweep_identity.py); a store folder holding another
sweep is refused. A crashed deployment flow run of this flow is restarted by an automation
(flows/_sweep_restart.py).

Each run's grading report is read from ``RUN_DIR/grade_report.json`` (the run's own grading on
the private answers; a problem run's ``RUN_DIR/problem_report.json``), else from the run's
returned summary; a run that fails counts as a run without a submission
(``flows/_sweep_rows.py``). After each finished run and at the end the sweep (re)writes
``OUT/grading_reports.jsonl``, ``OUT/problem_reports.jsonl`` (problems) and
``OUT/summary.json`` (``swarm_evo.sweeps.sweep``), and at the end publishes the summary as table
artifacts (key ``benchmark-sweep``: one row per competition × policy, its versions the sweep
history; key ``benchmark-sweep-problems``: one row per problem task × policy).

Deployed as ``benchmark-sweep/nightly`` with a cron schedule (prefect.yaml).
"""

from __future__ import annotations

import inspect
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext

from flows._heartbeat_guard import heartbeats_guarded
from flows._process_heap import heap_settled
from flows._sweep_deployment import (
    DEFAULT_START_TIMEOUT,
    DeploymentSweep,
    Limits,
    Where,
    check_deployment,
    default_run_timeout,
    deployment_name,
    run_config_source,
)
from flows._state_watch import keep_sweep_running
from flows._sweep_in_process import run_in_process
from flows._sweep_restart import check_restarts, default_flow_out_dir, ensure_restart_automation
from flows._sweep_rows import Rows
from flows.run_config import resolve_config
from flows.two_phase_evo import two_phase_evo
from swarm_evo.competition import load_competition
from swarm_evo.evaluation import load_problem
from swarm_evo.objective.load import stored_competition
from swarm_evo.store import checked_store, is_url
from swarm_evo.sweeps import sweep, sweep_problems
from swarm_evo.sweeps.sweep_identity import claim_sweep, finished_rows
from swarm_evo.sweeps.sweep_store import SweepStore

FLOW_NAME = "benchmark-sweep"
ARTIFACT_KEY = "benchmark-sweep"
PROBLEMS_ARTIFACT_KEY = "benchmark-sweep-problems"
DEFAULT_POLL_INTERVAL = 10.0


def supported_policies() -> tuple[str, ...]:
    """The search policies ``two_phase_evo`` accepts: all of ``sweep.POLICIES`` once it has a
    ``policy`` parameter, else only the default ``two_phase``."""
    if "policy" in inspect.signature(two_phase_evo.fn).parameters:
        return sweep.POLICIES
    return (sweep.DEFAULT_POLICY,)



@task(name="publish-sweep-summary", cache_policy=NO_CACHE)
def publish_summary(rows: list[dict], out_dir: str) -> dict:
    """Write OUT/grading_reports.jsonl, OUT/problem_reports.jsonl and OUT/summary.json; the table
    artifacts (competitions; problems); the summary."""
    summary = sweep.write_outputs(rows, Path(out_dir))
    problem_table = sweep_problems.problem_table(summary)
    if problem_table:
        create_table_artifact(
            table=problem_table,
            key=PROBLEMS_ARTIFACT_KEY,
            description=(
                f"Benchmark sweep {out_dir}: per problem task (problem:instance) and search policy, over seeds — "
                f"runs, valid runs, the problem's own score (mean ± SEM, sample sd / √n over the runs with a "
                f"score; its direction), the best known score. File: {out_dir}/{sweep_problems.PROBLEM_REPORTS_FILE}."
            ),
        )
        if len(problem_table) == sum(len(by_policy) for by_policy in summary.values()):
            return summary  # no competitions
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
@heartbeats_guarded  # never declared dead while alive (flows/_heartbeat_guard.py)
@heap_settled  # in its own flow-run process: the import-time heap frozen (flows/_process_heap.py)
def benchmark_sweep(
    competitions: list[str] | None = None,
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
    problems: list[str] | None = None,
    problem_data_dir: str | None = None,
    store: str | None = None,
    max_resumes: int = 2,
    start_timeout: float = DEFAULT_START_TIMEOUT,
) -> dict:
    """Run every (task, policy, seed) as a two-phase-evo run and summarise the grades / scores.

    Args:
        competitions: competition ids prepared under ``data_dir`` (MLE-bench layout).
        problems: problem tasks ``NAME`` or ``NAME:INSTANCE`` (``["tsp:kroA100", "circle-packing"]``,
            see swarm_evo/sweeps/sweep_problems.py); at least one competition or problem is needed.
        problem_data_dir: where the problems' data files are looked up (None: the default data
            directories, swarm_evo/evaluation/problem_data.py::data_search_dirs).
        seeds: N (seeds 0..N-1) or a list of seeds; one run per seed.
        policies: search policies (``two_phase``, ``greedy``, ``random``; default ``[two_phase]``).
        model: litellm model or ``offline``; max_steps: each run's budget (nodes).
        data_dir: MLE-bench data directory, as seen by the machines that run the runs, or a store
            URL the competitions were prepared in (``swarm-evo prepare … --data-dir URL``).
        out_dir: output folder (default ``runs/sweeps/<UTC time>``; a deployment flow run's:
            ``runs/sweeps/<its expected start, UTC>-<first 8 hex of its id>``); run directories are
            ``OUT/runs/<competition>-<policy>-s<seed>`` or ``OUT/runs/<problem>-<instance>-<policy>-s<seed>``
            (an existing one is continued). ``OUT/sweep.json`` records the sweep's id: the sweep
            started again on the same folder is the same sweep (its finished rows are kept, no run
            is started twice: flows/_sweep_deployment.py, swarm_evo/sweeps/sweep_identity.py).
        deployment: a two-phase-evo deployment (``NAME`` or ``two-phase-evo/NAME``): runs go
            to its work pool through ``run_deployment``; None runs them here as subflows.
            Without a store, workers must see ``data_dir`` and ``out_dir`` at the same (absolute)
            paths.
        max_parallel_runs: runs at once (default 1 here; all of them with a deployment, whose
            work pool and workers then limit the concurrency).
        parallel_workers, time_limit, config_path, executor, llm_block, sandbox_block: passed
            to every run (see two_phase_evo); with a deployment, the config file's contents go
            instead of its path (``config_data``: the workers need not see this machine's files).
        poll_interval: seconds between state polls of deployment runs.
        run_timeout: seconds a deployment run may be Running (from its start; time queued for a
            free worker does not count) before the sweep cancels it and resumes it (a resume);
            default :func:`default_run_timeout` of the runs' time limit (``time_limit``, else the
            config's ``search.time_limit``).
        start_timeout: seconds a deployment run may wait for a worker while none of the sweep's
            runs is running before it is cancelled and reported (default 1800).
        store: a run store (directory or fsspec URL, swarm_evo/store/): every run is mirrored to
            ``STORE/sweeps/<out_dir's name>/runs/<run name>/`` and its row is read from there,
            never from a worker's disk; the sweep's files are copied to ``STORE/sweeps/<name>/``.
            Runs of a deployment then work in a scratch directory of their worker
            (swarm_evo/sweeps/sweep_store.py), so the workers need no shared disk.
        max_resumes: with a deployment, times a crashed or timed-out run is resumed from its
            journal (in the store, else in its run directory on a shared disk) before its row
            reports it; and times a crashed deployment flow run of this sweep is restarted
            (flows/_sweep_restart.py); in this process, times a run declared dead while alive
            is resumed (flows/_state_watch.py).

    Returns:
        ``swarm_evo.sweeps.sweep.summarize`` of the rows: ``{task: {policy: stats}}``.

    Raises:
        SweepError, ConfigError, CompetitionError, ProblemError: bad parameters (before any run
            starts); ProblemError names an unknown instance and the available ones; SweepError
            also: the store's folder for ``out_dir`` holds another sweep.
    """
    logger = get_run_logger()
    if not competitions and not problems:
        raise sweep.SweepError("give competitions and/or problems (e.g. problems=['tsp:kroA100', 'circle-packing'])")
    competition_ids = sweep.parse_names(competitions, "competitions") if competitions else []
    try:
        problem_tasks = {t.task: t for t in sweep_problems.parse_problem_tasks(problems, "problems")} if problems else {}
    except ValueError as exc:
        raise sweep.SweepError(str(exc)) from None
    seed_list = sweep.parse_seeds(seeds)
    policy_list = sweep.parse_policies(policies, supported_policies())
    if max_parallel_runs is not None and max_parallel_runs < 1:
        raise sweep.SweepError(f"max_parallel_runs must be >= 1, got {max_parallel_runs}")
    if poll_interval <= 0:
        raise sweep.SweepError(f"poll_interval must be > 0 seconds, got {poll_interval}")
    if max_resumes < 0:
        raise sweep.SweepError(f"max_resumes must be >= 0, got {max_resumes}")
    if run_timeout is not None and run_timeout <= 0:
        raise sweep.SweepError(f"run_timeout must be > 0 seconds, got {run_timeout}")
    if not start_timeout > 0:
        raise sweep.SweepError(f"start_timeout must be > 0 seconds, got {start_timeout}")
    context = FlowRunContext.get()
    flow_run = context.flow_run if context else None
    deployed = flow_run is not None and flow_run.deployment_id is not None  # a deployment's flow run (nightly)
    if deployed:
        check_restarts(flow_run.id, max_resumes)  # SweepError: crashed and restarted too often
    # Validate the run parameters once (ConfigError names the key) before any run starts.
    config, _ = resolve_config(config_path, model=model, max_steps=max_steps, parallel_workers=parallel_workers,
                   time_limit=time_limit, executor=executor, llm_block=llm_block, sandbox_block=sandbox_block)
    stored_data = is_url(data_dir)  # a store URL: each run reads it through its machine's data cache
    data_path = data_dir if stored_data else str(Path(data_dir).expanduser().resolve())
    out_path = Path(out_dir) if out_dir else (default_flow_out_dir(flow_run) if deployed else sweep.default_out_dir())
    out_path = out_path.expanduser().resolve()
    run_store = checked_store(store)  # StoreError: cannot be reached or written
    sweep_store = SweepStore(run_store, out_path.name) if run_store is not None else None
    target = deployment_name(deployment) if deployment else None
    if target is None:
        for competition_id in competition_ids:
            if stored_data:  # CompetitionError: not prepared; StoreError: the store does not answer
                stored_competition(competition_id, data_path)
            else:
                load_competition(competition_id, Path(data_path))  # CompetitionError: not prepared
    else:
        work_pool = check_deployment(target)
    problem_data = str(Path(problem_data_dir).expanduser().resolve()) if problem_data_dir else None
    for task in problem_tasks.values():  # ProblemError: unknown problem or instance
        load_problem(task.problem, Path(problem_data) if problem_data else None, task.instance)

    claim = claim_sweep(out_path, sweep_store.location if sweep_store else None,
                        str(flow_run.id) if deployed else None)  # SweepError: the store's folder is another sweep's
    sweep_id = claim.identity.id
    if deployed:
        try:
            ensure_restart_automation()
        except Exception as exc:
            logger.warning("no automation to restart this sweep if it crashes (%s: %s)", type(exc).__name__, exc)
    items = sweep.plan([*competition_ids, *problem_tasks], policy_list, seed_list)
    config_source = run_config_source(config_path, target)
    with_policy = "policy" in inspect.signature(two_phase_evo.fn).parameters
    parameters = {}
    for task, policy, seed in items:
        problem_task = problem_tasks.get(task)
        target_params = (dict(competition_id=task, data_dir=data_path) if problem_task is None else
                         dict(problem=problem_task.problem, instance=problem_task.instance, data_dir=problem_data))
        label = task if problem_task is None else problem_task.label
        run_name = sweep.run_name(label, policy, seed)
        params = dict(
            **target_params,
            run_dir=(sweep_store.worker_run_dir(run_name, sweep_id) if sweep_store is not None and target is not None
                     else str(out_path / sweep.RUNS_DIR / run_name)),
            store=sweep_store.url if sweep_store is not None else None,
            model=model, max_steps=max_steps, seed=seed, parallel_workers=parallel_workers,
            time_limit=time_limit, executor=executor, llm_block=llm_block, sandbox_block=sandbox_block,
            policy=policy if with_policy else None, **config_source,
        )
        parameters[(task, policy, seed)] = {k: v for k, v in params.items() if v is not None}
    (out_path / sweep.RUNS_DIR).mkdir(parents=True, exist_ok=True)
    logger.info("sweep %s of %s runs (%s x %s x seeds %s) into %s%s, %s", sweep_id[:8], len(items),
                [*competition_ids, *problem_tasks], policy_list, seed_list, out_path,
                f" and {sweep_store.url}" if sweep_store else "", f"on deployment {target}" if target else "in this process")
    done = finished_rows(out_path) if claim.local else {}  # a restart: the finished runs keep their rows
    reused = {item: done[Path(parameters[item]["run_dir"]).name] for item in items
              if Path(parameters[item]["run_dir"]).name in done}
    todo = [item for item in items if item not in reused]
    if not claim.new:
        logger.info("sweep %s started again: %s finished runs keep their rows, %s runs to wait for, resume or start",
                    sweep_id[:8], len(reused), len(todo))

    rows = Rows(items, out_path, sweep_store, reused)
    with keep_sweep_running():  # marked Crashed while alive: Running again before its restart (issue 53, item 11)
        if target is None:
            run_in_process(todo, parameters, rows, data_path, problem_tasks, problem_data, max_parallel_runs or 1,
                           config.search.parallel_workers, max_resumes)
        else:
            limits = Limits(max_parallel_runs=max_parallel_runs or len(items), poll_interval=poll_interval,
                            run_timeout=run_timeout or default_run_timeout(config.search.time_limit),
                            start_timeout=start_timeout, max_resumes=max_resumes)
            DeploymentSweep(target, work_pool, parameters, rows, Where(data_path, problem_tasks, problem_data),
                            limits, sweep_id).run(todo)
    summary = publish_summary(rows.rows(), str(out_path))
    rows.publish()
    if competition_ids:
        print(sweep.format_table(sweep.summary_table(summary)))
    if problem_tasks:
        print(sweep.format_table(sweep_problems.problem_table(summary)))
    failed = sum(sweep.is_failed_row(row) for row in rows.rows())
    if failed:
        logger.warning("%s of %s runs failed (see error in %s)", failed, len(items), out_path / sweep.REPORTS_FILE)
    return summary
