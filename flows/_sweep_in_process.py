"""The runs of a benchmark sweep without a deployment: subflows of the sweep in this process,
``max_parallel_runs`` at a time (flows/benchmark_sweep.py), sharing the machine's cores."""

from __future__ import annotations

import contextvars
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from prefect import get_run_logger

from flows._state_watch import declared_dead_failure
from flows._sweep_deployment import RESUME_PARAMETERS
from flows._sweep_rows import Rows, describe, stored_row
from flows.two_phase_evo import two_phase_evo

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


def run_in_process(items, parameters, rows: Rows, data_dir: str, problems: dict, problem_data_dir: str | None,
                    max_parallel_runs: int, workers: int, max_resumes: int = 2) -> None:
    """Each run as a subflow of the sweep, ``max_parallel_runs`` at a time (``workers``: each
    run's parallel_workers). A run that stopped because its flow run was declared dead while it
    lived (flows/_state_watch.py) is resumed here, at most ``max_resumes`` times."""
    logger = get_run_logger()

    def one(item):
        params = parameters[item]
        name = Path(params["run_dir"]).name
        where = (rows.sweep_store, item, Path(params["run_dir"]), data_dir, problems, problem_data_dir)
        try:
            state = two_phase_evo.with_options(flow_run_name=name)(**params, return_state=True)
            for attempt in range(1, max_resumes + 1):
                if not declared_dead_failure(state):
                    break
                logger.warning("run %s was declared dead while alive and stopped; resuming it (resume %s of at most "
                               "%s)", name, attempt, max_resumes)
                kept = {k: v for k, v in params.items() if k in RESUME_PARAMETERS + ("store",)}
                state = two_phase_evo.with_options(flow_run_name=f"{name}-resume{attempt}")(
                    **kept, resume=params["run_dir"], return_state=True)
            if state.is_completed():
                row = stored_row(*where, state.result(), None)
            else:
                row = stored_row(*where, None, f"flow run ended {state.name}: {state.message}")
        except Exception as exc:  # a crash outside the run's own states (e.g. the API)
            logger.exception("run %s crashed", name)
            row = stored_row(*where, None, f"{type(exc).__name__}: {exc}")
        rows.add(item, row)
        logger.info("run %s: %s", name, describe(row))

    runs_at_once = max(1, min(max_parallel_runs, len(items)))
    with _shared_cores(runs_at_once * workers) as threads:
        if threads:
            logger.info("%s runs at once: %s BLAS/OpenMP threads per program", runs_at_once, threads)
        with ThreadPoolExecutor(max_workers=runs_at_once, thread_name_prefix="sweep") as pool:
            for future in [pool.submit(contextvars.copy_context().run, one, item) for item in items]:
                future.result()
