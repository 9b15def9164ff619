"""The ``swarm-evo`` command line (issue 2 contract).

    swarm-evo prepare COMPETITION_ID --raw-dir RAW_DIR --data-dir DATA_DIR
    swarm-evo run (--competition-id ID --data-dir DATA_DIR | --problem NAME [--instance I] [--data-dir DIR])
                  [--model M] [--max-steps N] [--seed S]
                  [--run-dir RUN_DIR] [--config FILE] [--parallel-workers W] [--time-limit SEC]
                  [--executor local|docker] [--image IMAGE] [--gpus none|all|N|ID,ID]
                  [--llm-block NAME] [--sandbox-block NAME] [--policy two_phase|greedy|random]
                  [--python PYTHON_OR_VENV]
    swarm-evo resume RUN_DIR [--max-steps N] [--time-limit SEC] [--parallel-workers W]
                     [--executor local|docker] [--image IMAGE] [--gpus G] [--llm-block NAME]
                     [--max-consecutive-failures N] [--take-over]
    swarm-evo grade --competition-id ID --data-dir DATA_DIR SUBMISSION_CSV
    swarm-evo eval run|submit --problem P PROGRAM.py [--results-dir DIR] [--num-runs N] [--timeout S]
    swarm-evo eval status|result JOB_ID;  swarm-evo eval serve [--name default]
    swarm-evo env build [--profile tabular|deep] [--path DIR] [--rebuild]
    swarm-evo pool setup --pool NAME [--type process|docker] [--heartbeat-frequency S]
    swarm-evo sweep (--data-dir DATA_DIR --competitions A,B | --problems tsp:kroA100,circle-packing)
                    --seeds N --policies two_phase,greedy,random --max-steps N --model M --out OUT_DIR
                    [--deployment NAME]

Exit codes: 0 success, 1 the run failed, 2 bad input (the message names the file, field or
value and the fix). ``run`` uses Prefect's ephemeral API unless PREFECT_API_URL is set.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from swarm_evo.cli.local_paths import data_location, url_argument
from swarm_evo.cli.run_summary import print_summary
from swarm_evo.cli.store_option import (
    STORE_HELP,
    check_store_option,
    store_data_dir,
    store_source,
)
from swarm_evo.run import heap

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    from swarm_evo.sandbox import backends

    parser = argparse.ArgumentParser(prog="swarm-evo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare", help="write a competition in MLE-bench's layout")
    p.add_argument("competition_id")
    p.add_argument("--raw-dir", type=Path, default=None, help="raw Kaggle files (not needed for sklearn-*)")
    p.add_argument("--data-dir", type=data_location, default=None,
                   help="the data directory, or a store location (an fsspec URL: s3://bucket/prefix/data); "
                   "default STORE/data with --store")
    p.add_argument("--store", default=None,
                   help="run store (directory or fsspec URL; default $SWARM_EVO_STORE): prepare into STORE/data")

    r = sub.add_parser("run", help="run the two-phase evolutionary search (Prefect flow two-phase-evo)")
    target = r.add_mutually_exclusive_group(required=True)
    target.add_argument("--competition-id", help="a Kaggle/MLE-bench competition under --data-dir")
    target.add_argument("--problem", help="an optimisation problem: circle-packing, tsp, count-primes or a folder")
    r.add_argument("--instance", default=None,
                   help="instance of a problem that has several (config problem.instance), e.g. kroA100 for tsp: "
                   "the file tsp/kroA100.tsp in the data directory (default: the problem's own, berlin52 for tsp)")
    r.add_argument("--data-dir", type=data_location, default=None,
                   help="MLE-bench data directory or a store location (s3://bucket/prefix/data, read through "
                   "a local cache; required with --competition-id); a problem's data files (a local folder)")
    r.add_argument("--model", default=None, help="'offline' (default) or a litellm model name")
    r.add_argument("--max-steps", type=int, default=None)
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--run-dir", type=Path, default=None)
    r.add_argument("--config", type=Path, default=None, help="YAML config file")
    r.add_argument("--parallel-workers", type=int, default=None)
    r.add_argument("--time-limit", type=float, default=None,
                   help="seconds for the whole run, counted from the command's start")
    r.add_argument("--executor", choices=backends.NAMES, default=None,
                   help="sandbox backend: " + backends.help_text())
    r.add_argument("--image", default=None, help="Docker sandbox image (default swarm-evo-sandbox:latest)")
    r.add_argument("--gpus", default=None,
                   help="GPUs for programs (either backend): none, all, a count (2) or device ids (0,1); each GPU is an "
                   "execution slot (sandbox.slots_per_gpu executions share one)")
    r.add_argument("--python", default=None,
                   help="interpreter or virtual environment that runs programs on the local backend "
                   "(default: the program environment `swarm-evo env build` made)")
    r.add_argument("--llm-block", default=None, help="saved LLMSettings block (API key)")
    r.add_argument("--sandbox-block", default=None, help="saved SandboxSettings block")
    r.add_argument("--mlebench-repo", type=Path, default=None,
                   help="an mle-bench checkout: config.yaml, description and leaderboard.csv read in place "
                   "from its mlebench/competitions/<id>/ (default $MLEBENCH_REPO)")
    r.add_argument("--policy", choices=("two_phase", "greedy", "random"), default=None,
                   help="search policy (SPEC §12): two_phase (default), greedy (AIDE) or random (drafts only)")
    r.add_argument("--store", default=None, help=STORE_HELP)

    c = sub.add_parser("resume", help="continue a run from its run directory after a crash or a stop")
    c.add_argument("run_dir", help="the run directory (holds journal.json), or a run in a store: STORE/runs/<name>, "
                   "fetched into runs/<name> here")
    c.add_argument("--store", default=None, help=STORE_HELP + "; a run resumed from a store goes on mirroring there")
    c.add_argument("--take-over", action="store_true", help="take the run's store location over even while its "
                   "writer is alive (that copy stops); without it such a resume is refused (docs/many-machines.md)")
    c.add_argument("--max-steps", type=int, default=None, help="a new budget (nodes in the journal, all told)")
    c.add_argument("--time-limit", type=float, default=None,
                   help="seconds for the whole run, time before the crash included")
    c.add_argument("--parallel-workers", type=int, default=None)
    c.add_argument("--executor", choices=backends.NAMES, default=None)
    c.add_argument("--image", default=None)
    c.add_argument("--gpus", default=None)
    c.add_argument("--python", default=None, help="interpreter or virtual environment that runs programs")
    c.add_argument("--llm-block", default=None, help="saved LLMSettings block (default: the run's own)")
    c.add_argument("--sandbox-block", default=None, help="saved SandboxSettings block")
    c.add_argument("--max-consecutive-failures", type=int, default=None,
                   help="stop again after this many model failures in a row (model.max_consecutive_failures); "
                   "only failures after the resume count")

    g = sub.add_parser("grade", help="grade a submission against the private answers; prints JSON")
    g.add_argument("--competition-id", required=True)
    g.add_argument("--data-dir", type=data_location, required=True,
                   help="MLE-bench data directory or a store location (fsspec URL)")
    g.add_argument("submission", type=Path)
    g.add_argument("--mlebench-repo", type=Path, default=None,
                   help="an mle-bench checkout (config.yaml, leaderboard.csv; default $MLEBENCH_REPO)")
    g.add_argument("--jsonl", action="store_true",
                   help="print the report as one JSON line (MLE-bench's CompetitionReport.to_dict shape)")

    from swarm_evo.cli.eval_cli import add_eval_parser

    add_eval_parser(sub)

    from swarm_evo.cli.sweep_cli import add_sweep_parser

    add_sweep_parser(sub)

    from swarm_evo.cli.env_cli import add_env_parser

    add_env_parser(sub)

    from swarm_evo.cli.pool_cli import add_pool_parser

    add_pool_parser(sub)
    return parser


def _fail(message: str) -> int:
    one_line = " ".join(str(message).split())  # bad input is one line, e.g. a multi-line YAML error
    print(f"swarm-evo: error: {one_line}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _prepare(args) -> int:
    from swarm_evo.competition import prepare_competition

    args.data_dir = args.data_dir or store_data_dir(args)
    if args.data_dir is None:
        return _fail("--data-dir is required (or --store: the competition goes to STORE/data)")

    if isinstance(args.data_dir, str):  # a store URL: prepared here, then uploaded
        from swarm_evo.cli.store_data import prepare_to_store

        print(f"prepared {args.competition_id} in {prepare_to_store(args.competition_id, args.raw_dir, args.data_dir)}")
        return 0
    competition = prepare_competition(args.competition_id, args.raw_dir, args.data_dir)
    print(f"prepared {competition.id} in {competition.data_dir}")
    return 0


def _grade(args) -> int:
    from swarm_evo.competition import grade_submission, load_competition

    if isinstance(args.data_dir, str):  # a store URL: the public and private parts through the data cache
        from swarm_evo.cli.store_data import graded_competition

        competition = graded_competition(args.competition_id, args.data_dir, args.mlebench_repo)
    else:
        competition = load_competition(args.competition_id, args.data_dir, args.mlebench_repo)
    # the user's own file: a link to it is fine (program files are read without following links)
    report = grade_submission(Path(args.submission).resolve(), competition)
    print(report.to_json(indent=None if args.jsonl else 2))
    return 0


def _start_flow() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    # the core's warnings (a model without tool calls, an agent evolution that failed) reach the
    # flow run's logs in the UI, not only the terminal
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "swarm_evo")


def _preflight(config, api_key, competition_id, problem, data_dir, run_dir):
    """Every check that can fail on bad input, before the flow starts and anything is written:
    objective (and its instance), the context window against the prompts' fixed text, model
    access, sandbox (daemon, image, GPU runtime), run directory ownership. Returns the objective."""
    from swarm_evo.competition import CompetitionError
    from swarm_evo.objective.load import load_objective
    from swarm_evo.store import StoreError

    try:  # first, before litellm and the sandbox are imported: a wrong --data-dir answers in ~1 s
        objective = load_objective(competition_id, problem, data_dir, config.mlebench_repo, config.problem.instance)
    except StoreError as exc:  # a store URL as the data directory that cannot be opened or read
        raise StoreError(f"--data-dir {exc}") from None
    except CompetitionError as exc:
        if competition_id and "not found: prepare" in str(exc):
            raise CompetitionError(
                f"{exc}: run `swarm-evo prepare {competition_id} --raw-dir RAW_DIR --data-dir {data_dir}`"
            ) from None
        raise
    from swarm_evo.run.prompt_budget import check_prompt_window

    check_prompt_window(config, objective)  # a context window too small for the prompts' fixed text: exit 2
    from swarm_evo.objective.fitness import choose_fitness

    choose_fitness(objective, config.search)  # search.fitness: hidden where no split is possible: exit 2
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.preflight import open_sandbox, probe_endpoints
    from swarm_evo.run.session import check_run_dir

    for probe in probe_endpoints(endpoint_for(config.model, api_key), config):  # one small call per model
        if probe.warning:
            print(f"warning: model '{probe.model}': {probe.warning}", file=sys.stderr)
    if run_dir is not None:
        check_run_dir(run_dir, objective, config.search.policy)
    sandbox, runtime = open_sandbox(config)  # preflight: daemon, image, GPU runtime, program interpreter
    print(f"sandbox: {config.sandbox.backend} ({runtime.device}); python {runtime.python} ({runtime.executable}); "
          f"packages: {runtime.package_list}")
    from swarm_evo.sandbox.confinement import describe_confinement

    print(f"confinement: {describe_confinement(sandbox)}")
    return objective


def _run(args):
    """Everything ``swarm-evo run`` does before its flow: the exit code of bad input, or the
    flow call (a callable) once the config, the preflight and the Prefect API are ready."""
    _start_flow()
    from flows.run_config import resolve_config

    if args.competition_id and args.data_dir is None:
        args.data_dir = store_data_dir(args)  # a store's competitions: STORE/data
    if args.competition_id and args.data_dir is None:
        return _fail("--data-dir is required with --competition-id (the MLE-bench data directory; with --store "
                     "it defaults to STORE/data)")
    if args.competition_id and args.instance is not None:
        return _fail(f"--instance {args.instance} applies to problems (e.g. --problem tsp --instance kroA100), "
                     f"not to competition {args.competition_id}: drop it")
    overrides = dict(
        model=args.model, instance=args.instance, max_steps=args.max_steps, seed=args.seed,
        parallel_workers=args.parallel_workers, time_limit=args.time_limit,
        executor=args.executor, image=args.image, gpus=args.gpus, policy=args.policy, python=args.python,
        mlebench_repo=str(args.mlebench_repo.expanduser().resolve()) if args.mlebench_repo else None,
        store=args.store,
    )
    # Validate everything before the flow starts, so bad input costs nothing.
    config, api_key = resolve_config(
        str(args.config) if args.config else None, llm_block=args.llm_block, sandbox_block=args.sandbox_block,
        **overrides,
    )
    # the store answers; a --run-dir is not another run's place there, nor behind it (a default name is new)
    check_store_option(config, store_source(args), args.run_dir)
    objective = _preflight(config, api_key, args.competition_id, args.problem, args.data_dir, args.run_dir)
    from swarm_evo.run.session import default_run_dir

    run_dir = args.run_dir or default_run_dir(Path(getattr(objective, "label", objective.id)).name, config.seed)
    from flows._ephemeral import start_ephemeral_api
    from flows.two_phase_evo import two_phase_evo

    start_ephemeral_api()
    # The time limit counts from the command's start: imports, the preflight calls (a hanging
    # model costs one timeout there) and the Prefect API's start-up come out of it.
    startup = time.monotonic() - args.started
    overrides["time_limit"] = max(1.0, config.search.time_limit - startup)
    return lambda: two_phase_evo(
        competition_id=args.competition_id,
        problem=args.problem,
        data_dir=str(args.data_dir) if args.data_dir else None,
        run_dir=str(run_dir),
        config_path=str(args.config) if args.config else None,
        llm_block=args.llm_block,
        sandbox_block=args.sandbox_block,
        **overrides,
    )


def _flow_outcome(run) -> int:
    """Run the flow and print its summary; a run stopped by a failing model exits 1 with its
    message (the fix and the resume command) instead of a traceback."""
    from swarm_evo.run.session import RunStoppedError

    try:
        summary = run()
    except RunStoppedError as exc:
        print(f"swarm-evo: run stopped: {exc}", file=sys.stderr)
        return 1
    return print_summary(summary)


def _resume(args):
    """Everything ``swarm-evo resume`` does before its flow; returns the flow call (a callable)."""
    from swarm_evo.run.resume import read_run_info
    from swarm_evo.store import StoreError, resolve_run
    from swarm_evo.cli.store_option import check_stored_writer
    from swarm_evo.store.location import redact_url
    from swarm_evo.store.run_lock import check_free

    _start_flow()
    from flows.run_config import resolve_config

    try:
        check_stored_writer(args.run_dir, args.take_over)  # a live writer: refused before anything is fetched
        run_dir, run_store = resolve_run(args.run_dir)  # a run in a store is fetched into runs/<name>
    except StoreError as exc:
        given = redact_url(args.run_dir)
        said = str(exc) if str(exc).startswith(given) else f"{given}: {exc}"
        raise StoreError(f"resume {said}") from None
    if run_store is not None:
        print(f"fetched {args.run_dir} into {run_dir}")
    check_free(run_dir)  # one process per run directory (issue 53, item 2)
    info = read_run_info(run_dir)
    llm_block = args.llm_block or info.llm_block
    overrides = dict(
        max_steps=args.max_steps, parallel_workers=args.parallel_workers, time_limit=args.time_limit,
        executor=args.executor, image=args.image, gpus=args.gpus, python=args.python,
        max_consecutive_failures=args.max_consecutive_failures, store=args.store or run_store,
    )
    config, api_key = resolve_config(base=info.config, llm_block=llm_block, sandbox_block=args.sandbox_block,
                                     **overrides)
    check_store_option(config, store_source(args), run_dir, take_over=args.take_over)  # not ahead, no live writer
    _preflight(config, api_key, info.competition_id, info.problem, info.data_dir, None)  # a path or a store URL
    print(f"resuming {run_dir}: {info.nodes} of {config.search.max_steps} nodes done ({info.policy})")
    from flows._ephemeral import start_ephemeral_api
    from flows.two_phase_evo import two_phase_evo

    start_ephemeral_api()
    return lambda: two_phase_evo(resume=str(run_dir), llm_block=args.llm_block, take_over=args.take_over,
                                 sandbox_block=args.sandbox_block, **overrides)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``swarm-evo`` console script; returns the exit code."""
    started = time.monotonic()
    parser = _parser()
    args = parser.parse_args(argv)
    if (message := url_argument(parser, args)) is not None:
        return _fail(message)
    args.started = started
    if args.command == "eval":  # before the imports below (litellm, sklearn: seconds): submit stays fast
        from swarm_evo.cli.eval_cli import run_eval

        return run_eval(args)
    if args.command == "env":
        from swarm_evo.cli.env_cli import run_env

        return run_env(args)
    if args.command == "pool":
        from swarm_evo.cli.pool_cli import run_pool

        return run_pool(args)
    if args.command == "sweep":  # bad input -> exit 2 inside run_sweep
        from swarm_evo.cli.sweep_cli import run_sweep

        return run_sweep(args)
    try:
        handler = {"prepare": _prepare, "run": _run, "resume": _resume, "grade": _grade}[args.command]
        with heap.loading():  # imports and checks: then the heap they leave is frozen (swarm_evo/run/heap.py)
            outcome = handler(args)  # an exit code, or the flow to run (run, resume)
        return outcome if isinstance(outcome, int) else _flow_outcome(outcome)
    except Exception as exc:
        if _is_bad_input(exc):
            return _fail(str(exc))
        raise


BAD_INPUT: tuple[tuple[str, str], ...] = (
    ("swarm_evo.competition", "CompetitionError"),
    ("swarm_evo.config", "ConfigError"),
    ("swarm_evo.evaluation.problem_data", "ProblemError"),
    ("swarm_evo.llm.errors", "ModelAccessError"),
    ("swarm_evo.run.resume", "RunDirectoryError"),
    ("swarm_evo.sandbox.base", "SandboxUnavailableError"),
    ("swarm_evo.sandbox.runtime", "RuntimeProbeError"),
    ("swarm_evo.store.location", "StoreError"),
)
"""(module, class) of the errors that mean bad input (exit 2, one line naming the fix), with
``FileNotFoundError``."""


def _is_bad_input(exc: Exception) -> bool:
    """Whether ``exc`` is bad input (:data:`BAD_INPUT`). Imports nothing: an error class whose
    module was never imported cannot have been raised, and importing ``swarm_evo.llm.errors``
    (litellm, ~3 s) just to answer "no" would undo the fast path of a wrong ``--data-dir``."""
    if isinstance(exc, FileNotFoundError):
        return True
    return any(isinstance(exc, getattr(sys.modules[module], name))
               for module, name in BAD_INPUT if module in sys.modules)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
