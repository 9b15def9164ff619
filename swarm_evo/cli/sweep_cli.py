"""``swarm-evo sweep``: a benchmark sweep from the command line (SPEC §12; issue 6).

    swarm-evo sweep [--data-dir DATA_DIR --competitions A,B] [--problems P[:INSTANCE],...]
                    [--problem-data-dir DIR] --seeds N
                    --policies two_phase,greedy,random --max-steps N --model M --out OUT_DIR
                    [--deployment NAME] [--parallel-runs R] [--parallel-workers W]
                    [--config FILE] [--time-limit SEC] [--executor local|docker]
                    [--llm-block NAME] [--sandbox-block NAME] [--poll SECONDS] [--run-timeout SECONDS]
                    [--store URL] [--max-resumes N] [--start-timeout SECONDS]

Runs the ``benchmark-sweep`` flow (flows/benchmark_sweep.py): every (task, policy, seed) —
seeds ``0..N-1`` — is one ``two-phase-evo`` run in ``OUT_DIR/runs/<task>-<policy>-s<seed>``,
a task being a competition or a problem: ``--problems tsp:kroA100,tsp:a280,circle-packing``
(``NAME[:INSTANCE]``; runs ``OUT_DIR/runs/tsp-kroA100-<policy>-s<seed>``, data files looked up
in ``--problem-data-dir``, else ``--data-dir`` when no competition is given, else the default
data directories); in this process (Prefect's ephemeral API unless PREFECT_API_URL is set),
or with ``--deployment NAME`` as flow runs of ``two-phase-evo/NAME`` on the server named by
PREFECT_API_URL (its work pool's workers run them; they must see DATA_DIR and OUT_DIR).
Writes ``OUT_DIR/grading_reports.jsonl`` (one MLE-bench CompetitionReport per line plus
``policy``, ``seed``, ``run_dir``) and ``OUT_DIR/summary.json`` (per competition and policy:
runs, valid_submissions, any_medal, above_median, score_mean, score_sem, ...; see
swarm_evo/sweeps/sweep.py), and prints the summary table. Problem runs: ``OUT_DIR/problem_reports.jsonl``
and, per task and policy, the mean ± SEM of the problem's own score (e.g. tour_length, lower is
better; swarm_evo/sweeps/sweep_problems.py).

``OUT_DIR/sweep.json`` records the sweep's id (and, with ``--store``, ``STORE/sweeps/<OUT_DIR's
name>/sweep.json``): the same command again with the same ``--out`` (and ``--store``) continues
the sweep — finished runs keep their rows, runs in flight are waited for, none is started twice —
and an ``--out`` whose store folder holds another sweep is bad input (docs/many-machines.md).

Exit codes: 0 every run finished with a grading report (valid or not), 1 some run failed
(its row has ``error: "run failed: ..."``), 2 bad input (one line naming the field and the fix).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from swarm_evo.cli.local_paths import data_location

EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2


def add_sweep_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``sweep`` on ``subparsers`` (from ``add_subparsers``)."""
    from swarm_evo.sandbox import backends

    s = subparsers.add_parser(
        "sweep", help="benchmark sweep: (competitions, problems) x policies x seeds (Prefect flow benchmark-sweep)",
        description="Run every competition or problem x search policy x seed as its own two-phase-evo run and "
        "write OUT/grading_reports.jsonl (MLE-bench grading reports), OUT/problem_reports.jsonl and OUT/summary.json.",
    )
    s.add_argument("--data-dir", type=data_location, default=None,
                   help="MLE-bench data directory (prepared competitions; required with --competitions), or a "
                   "store URL the competitions were prepared in (every worker reads it through its own cache)")
    s.add_argument("--competitions", default=None, help="comma-separated competition ids, e.g. A,B")
    s.add_argument("--problems", default=None,
                   help="comma-separated problems NAME or NAME:INSTANCE, e.g. tsp:kroA100,tsp:a280,circle-packing")
    s.add_argument("--problem-data-dir", type=Path, default=None,
                   help="where the problems' data files are (e.g. tsp/kroA100.tsp); default --data-dir when no "
                   "competition is given, else $SWARM_EVO_DATA_DIR, ./data, ../shared/data")
    s.add_argument("--seeds", default="1", help="N: runs with seeds 0..N-1 per competition and policy (default 1)")
    s.add_argument("--policies", default="two_phase",
                   help="comma-separated search policies: two_phase, greedy, random (default two_phase)")
    s.add_argument("--max-steps", type=int, default=None, help="budget of each run (nodes)")
    s.add_argument("--model", default=None, help="'offline' (default) or a litellm model name")
    s.add_argument("--out", type=Path, default=None, help="output directory (default runs/sweeps/<UTC time>)")
    s.add_argument("--deployment", default=None,
                   help="two-phase-evo deployment (NAME or two-phase-evo/NAME): send the runs to its work pool")
    s.add_argument("--parallel-runs", type=int, default=None,
                   help="runs at once (default 1 in this process; all with --deployment)")
    s.add_argument("--parallel-workers", type=int, default=None, help="steps at once within each run")
    s.add_argument("--config", type=Path, default=None, help="YAML config file for every run")
    s.add_argument("--time-limit", type=float, default=None, help="seconds for each run")
    s.add_argument("--executor", choices=backends.NAMES, default=None, help="sandbox backend of the runs")
    s.add_argument("--llm-block", default=None, help="saved LLMSettings block (API key)")
    s.add_argument("--sandbox-block", default=None, help="saved SandboxSettings block")
    s.add_argument("--poll", type=float, default=10.0, help="with --deployment: seconds between state polls")
    s.add_argument("--run-timeout", type=float, default=None,
                   help="with --deployment: seconds a run may stay Running before the sweep cancels it and resumes it "
                   "(default 1.5 x the runs' time limit + 600)")
    s.add_argument("--start-timeout", type=float, default=1800.0,
                   help="with --deployment: seconds a run may wait for a worker, while none of the sweep's runs is "
                   "running, before the sweep cancels it and reports it (default 1800)")
    s.add_argument("--store", default=None,
                   help="run store (directory or fsspec URL, e.g. s3://bucket/prefix; default $SWARM_EVO_STORE): runs "
                   "are mirrored to STORE/sweeps/<OUT's name>/runs/<run>/ and every row is read from there, so the "
                   "workers of --deployment need no shared disk (docs/many-machines.md)")
    s.add_argument("--max-resumes", type=int, default=2,
                   help="with --deployment: times a crashed or timed-out run is resumed from its journal, in the store "
                   "or on a shared disk (default 2)")
    s.add_argument("--mlebench-repo", type=Path, default=None,
                   help="an mle-bench checkout for every run (sets $MLEBENCH_REPO; workers of --deployment "
                   "need it in their own environment or config)")
    return s


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"swarm-evo: error: {' '.join(str(message).split())}", file=sys.stderr)
    return code


def _problem_data_dir(args) -> Path | None:
    """--problem-data-dir, else --data-dir when the sweep has no competition (and is a folder), else None."""
    if args.problem_data_dir is not None:
        return args.problem_data_dir
    return args.data_dir if not args.competitions and isinstance(args.data_dir, Path) else None


def _check(args) -> tuple[list[str], list[str], list[int], list[str]]:
    """Bad-input checks before any run; ``(competitions, problem tasks, seeds, policies)``.

    Raises:
        SweepError, ConfigError, CompetitionError, ProblemError, ModelAccessError,
            SandboxUnavailableError: the message names the field and the fix.
    """
    from flows._sweep_deployment import check_deployment, deployment_name, prefect_api_url
    from flows.benchmark_sweep import supported_policies
    from flows.run_config import resolve_config
    from swarm_evo.competition import (
        BUILTIN_COMPETITIONS,
        CompetitionError,
        load_competition,
    )
    from swarm_evo.evaluation import load_problem
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.llm.probe import check_model_access
    from swarm_evo.sweeps import sweep
    from swarm_evo.sweeps.sweep_problems import parse_problem_tasks

    if args.competitions is None and args.problems is None:
        raise sweep.SweepError("give --competitions A,B (with --data-dir) and/or --problems, e.g. "
                               "--problems tsp:kroA100,circle-packing")
    competitions = sweep.parse_names(args.competitions, "--competitions") if args.competitions is not None else []
    try:
        problems = parse_problem_tasks(args.problems, "--problems") if args.problems is not None else []
    except ValueError as exc:
        raise sweep.SweepError(str(exc)) from None
    if competitions and args.data_dir is None:
        from swarm_evo.cli.store_option import store_data_dir

        args.data_dir = store_data_dir(args)  # a store's competitions: STORE/data
    if competitions and args.data_dir is None:
        raise sweep.SweepError("--data-dir is required with --competitions (the MLE-bench data directory; with "
                               "--store it defaults to STORE/data)")
    problem_data = _problem_data_dir(args)
    if problem_data is not None and not problem_data.is_dir():
        raise sweep.SweepError(f"--problem-data-dir {problem_data} is not a directory: give the problems' data directory")
    for task in problems:  # unknown problem or instance: ProblemError names the instances there are
        try:
            load_problem(task.problem, problem_data, task.instance)
        except ValueError as exc:
            raise type(exc)(f"--problems {task.task}: {exc}") from None
    tasks = [t.task for t in problems]
    try:
        seeds = sweep.parse_seeds(args.seeds)
    except sweep.SweepError as exc:
        raise sweep.SweepError(f"--{exc}") from None
    try:
        policies = sweep.parse_policies(args.policies, supported_policies())
    except sweep.SweepError as exc:
        raise sweep.SweepError(f"--{exc}") from None
    for flag, value in (("--max-steps", args.max_steps), ("--parallel-runs", args.parallel_runs),
                        ("--parallel-workers", args.parallel_workers)):
        if value is not None and value < 1:
            raise sweep.SweepError(f"{flag} must be >= 1 (got {value})")
    if args.time_limit is not None and args.time_limit <= 0:
        raise sweep.SweepError(f"--time-limit must be > 0 seconds (got {args.time_limit})")
    if args.poll <= 0:
        raise sweep.SweepError(f"--poll must be > 0 seconds (got {args.poll})")
    if args.run_timeout is not None and args.run_timeout <= 0:
        raise sweep.SweepError(f"--run-timeout must be > 0 seconds (got {args.run_timeout})")
    if args.max_resumes < 0:
        raise sweep.SweepError(f"--max-resumes must be >= 0 (got {args.max_resumes})")
    if args.start_timeout <= 0:
        raise sweep.SweepError(f"--start-timeout must be > 0 seconds (got {args.start_timeout})")
    _check_store(args)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise sweep.SweepError(f"--out {args.out} is a file: give a directory (it is created if missing)")
    args.out = (args.out or sweep.default_out_dir()).expanduser().resolve()
    _check_owner(args)
    if args.config is not None and not args.config.is_file():
        raise sweep.SweepError(f"--config {args.config} not found: give a YAML config file")
    config, api_key = resolve_config(
        str(args.config) if args.config else None, model=args.model, max_steps=args.max_steps,
        parallel_workers=args.parallel_workers, time_limit=args.time_limit, executor=args.executor,
        llm_block=args.llm_block, sandbox_block=args.sandbox_block,
    )
    if args.deployment:
        name = deployment_name(args.deployment)
        if not prefect_api_url():
            raise sweep.SweepError(
                "--deployment needs a Prefect server: set PREFECT_API_URL to the /api URL of the server "
                f"whose workers run {name} (e.g. http://127.0.0.1:4200/api)"
            )
        check_deployment(name)
        return competitions, tasks, seeds, policies
    # In this process: the data, the model and the sandbox must be usable here.
    stored = isinstance(args.data_dir, str)  # a store URL: read through this machine's data cache
    if competitions and not stored and not args.data_dir.is_dir():
        raise sweep.SweepError(f"--data-dir {args.data_dir} is not a directory: give the MLE-bench data directory")
    for competition_id in competitions:
        try:
            if stored:
                from swarm_evo.objective.load import stored_competition
                from swarm_evo.store import StoreError

                try:
                    stored_competition(competition_id, args.data_dir)
                except StoreError as exc:
                    raise StoreError(f"--data-dir {exc}") from None
            else:
                load_competition(competition_id, args.data_dir)
        except CompetitionError as exc:
            spec = BUILTIN_COMPETITIONS.get(competition_id)
            raw = " --raw-dir RAW_DIR" if spec is None or spec.needs_raw_dir else ""
            raise CompetitionError(
                f"--competitions: {exc} (run `swarm-evo prepare {competition_id}{raw} --data-dir {args.data_dir}`)"
            ) from None
    check_model_access(endpoint_for(config.model, api_key))
    from swarm_evo.run.preflight import open_sandbox

    open_sandbox(config)  # preflight: daemon, image, GPU runtime
    return competitions, tasks, seeds, policies


def _check_store(args) -> None:
    """``--store`` (or ``$SWARM_EVO_STORE``) answers and takes writes; sets ``args.store``.

    Raises:
        StoreError: one line naming the option or variable, the URL and the error.
    """
    from swarm_evo.store import STORE_ENV, StoreError, checked_store

    source = "--store" if args.store else f"${STORE_ENV}"
    args.store = args.store or os.environ.get(STORE_ENV) or None
    try:
        checked_store(args.store)
    except StoreError as exc:
        raise StoreError(f"{source} {exc}") from None


def _check_owner(args) -> None:
    """The store's folder for ``--out`` holds no other sweep (swarm_evo/sweeps/sweep_identity.py).

    Raises:
        SweepError: one line naming --out, --store and the fix; StoreError: the store cannot be read.
    """
    if not args.store:
        from swarm_evo.sweeps.sweep_identity import read_local

        read_local(args.out)  # SweepError: OUT/sweep.json is not a sweep record
        return
    from swarm_evo.store import StoreError, open_store
    from swarm_evo.sweeps.sweep_identity import check_sweep
    from swarm_evo.sweeps.sweep_store import SweepStore

    location = SweepStore(open_store(args.store), args.out.name).location
    try:
        check_sweep(args.out, location, out_flag="--out", store_flag="--store")
    except OSError as exc:
        raise StoreError(f"--store {args.store}: cannot read {location.url} ({type(exc).__name__}: {exc})") from None


def _data_dir_parameter(data_dir: Path | str | None) -> str:
    """The flow's ``data_dir``: a folder made absolute, a store URL as given, ``data`` by default."""
    if data_dir is None:
        return "data"
    return data_dir if isinstance(data_dir, str) else str(data_dir.expanduser().resolve())


def _bad_input_errors() -> tuple[type[BaseException], ...]:
    from swarm_evo.competition import CompetitionError
    from swarm_evo.config import ConfigError
    from swarm_evo.evaluation import ProblemError
    from swarm_evo.llm.errors import ModelAccessError
    from swarm_evo.sandbox import RuntimeProbeError, SandboxUnavailableError
    from swarm_evo.store import StoreError
    from swarm_evo.sweeps.sweep import SweepError

    return (SweepError, CompetitionError, ConfigError, ModelAccessError, SandboxUnavailableError,
            RuntimeProbeError, FileNotFoundError, ProblemError, StoreError)


def run_sweep(args) -> int:
    """Run ``swarm-evo sweep``; returns the exit code (see the module docstring)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from swarm_evo.sweeps import sweep, sweep_problems

    if args.mlebench_repo is not None:  # read by load_competition here and in the runs of this process
        from swarm_evo.competition.loader import MLEBENCH_REPO_ENV

        os.environ[MLEBENCH_REPO_ENV] = str(args.mlebench_repo.expanduser().resolve())
    bad_input = _bad_input_errors()
    try:
        competitions, problems, seeds, policies = _check(args)
    except bad_input as exc:
        return _fail(str(exc))
    from swarm_evo.run import heap

    with heap.loading():  # the imports: then the heap they leave is frozen (swarm_evo/run/heap.py)
        from flows._ephemeral import start_ephemeral_api
        from flows.benchmark_sweep import benchmark_sweep

        start_ephemeral_api()
    out_dir = args.out
    problem_data = _problem_data_dir(args)
    try:
        summary = benchmark_sweep(
            competitions=competitions or None, problems=problems or None,
            problem_data_dir=str(problem_data.expanduser().resolve()) if problem_data else None,
            seeds=seeds, policies=policies, model=args.model, max_steps=args.max_steps,
            data_dir=_data_dir_parameter(args.data_dir), out_dir=str(out_dir),
            deployment=args.deployment,
            max_parallel_runs=args.parallel_runs, parallel_workers=args.parallel_workers,
            time_limit=args.time_limit, config_path=str(args.config.resolve()) if args.config else None,
            executor=args.executor, llm_block=args.llm_block, sandbox_block=args.sandbox_block,
            poll_interval=args.poll, run_timeout=args.run_timeout, store=args.store, max_resumes=args.max_resumes,
            start_timeout=args.start_timeout,
        )
    except bad_input as exc:
        return _fail(str(exc))
    files = ([sweep.REPORTS_FILE] if competitions else []) + ([sweep_problems.PROBLEM_REPORTS_FILE] if problems else [])
    rows = [json.loads(line) for name in files for line in (out_dir / name).read_text().splitlines() if line.strip()]
    if competitions:
        print(sweep.format_table(sweep.summary_table(summary)))
        print(f"grading reports: {out_dir / sweep.REPORTS_FILE}")
    if problems:
        print(sweep.format_table(sweep_problems.problem_table(summary)))
        print(f"problem reports: {out_dir / sweep_problems.PROBLEM_REPORTS_FILE}")
    print(f"summary: {out_dir / sweep.SUMMARY_FILE}")
    if args.store:
        from swarm_evo.store import open_store
        from swarm_evo.sweeps.sweep_store import SweepStore

        print(f"store: {SweepStore(open_store(args.store), out_dir.name).url}")
    failed = [row for row in rows if sweep.is_failed_row(row)]
    if failed:
        for row in failed:
            print(f"run {row['run_dir']}: {row['error']}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return 0
