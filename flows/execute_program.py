"""execute_program: one program's execution as a flow run on a work pool (issue 52, item 4).

A run with ``sandbox.backend: pool`` (``flows/pool_sandbox.py``) submits each execution as a flow
run of an ``execute-program`` deployment on ``sandbox.work_pool``; a worker of that pool runs this
flow, which runs the program in the worker's own sandbox (``backend``: local or docker) with the
run's limits and hands the node directory's files and the result back through the run store
(:func:`swarm_evo.store.pool.run_on_worker`). The parameters are small: the program text, the
store URL, the data's digest (the data itself is cached per worker), the limits, the run's lease.

Like ``flows/evaluate_program.py`` this module imports only Prefect at import time: the flow-run
process of each execution starts in a second or two.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.context import FlowRunContext

from flows._heartbeat_guard import heartbeats_guarded

FLOW_NAME = "execute-program"
DEFAULT_DEPLOYMENT = f"{FLOW_NAME}/default"
NOT_SENT = ("backend", "work_pool", "pool_wait", "gpus", "slots_per_gpu", "python", "preload")
"""``sandbox.*`` keys that do not travel: the worker's own backend, interpreter (its checkout's
program environment) and GPUs; a one-shot flow-run process starts no preload server."""


def worker_config(limits: dict, backend: str):
    """The run configuration a worker builds its sandbox from: the run's ``sandbox`` limits (less
    :data:`NOT_SENT`) on ``backend``, one execution per flow-run process.

    Raises:
        pydantic.ValidationError: a limit the worker's version does not know or accept.
    """
    from swarm_evo.config import RunConfig

    sandbox = {k: v for k, v in limits.items() if k not in NOT_SENT}
    return RunConfig.model_validate({"sandbox": {**sandbox, "backend": backend, "preload": []},
                                     "search": {"parallel_workers": 1}})


@flow(name=FLOW_NAME, log_prints=False, persist_result=False)
@heartbeats_guarded
def execute_program(store: str, run_id: str, key: str, code: str, data: str, timeout: float,
                    limits: dict, lease: dict | None = None, backend: str = "local") -> dict:
    """Run ``code`` for the run ``run_id`` (the files of its node directory are under
    ``STORE/pool/executions/<run_id>/<key>/in/``; the data the program sees as ``input/`` under
    ``STORE/pool/data/<data>/``) in this worker's ``backend`` sandbox with ``limits`` (the run's
    ``sandbox`` section) for at most ``timeout`` s; unless ``lease`` (``{"url", "generation",
    "token"}``: the run's writer) was superseded meanwhile. Returns ``{"key", "executed_by",
    "exc_type", "exec_time", "superseded"}``; the whole result is ``.../<key>/result.json``.

    Raises:
        SandboxError: this worker's sandbox failed (the run retries on another worker).
    """
    from swarm_evo.sandbox.factory import make_sandbox
    from swarm_evo.store.pool import run_on_worker, worker_identity
    from swarm_evo.store.data import data_cache_root
    from swarm_evo.store.location import open_store

    context = FlowRunContext.get()
    flow_run = context.flow_run if context is not None else None
    identity = worker_identity(str(flow_run.id) if flow_run else None, flow_run.name if flow_run else None)
    sandbox = make_sandbox(worker_config(limits, backend))
    out = run_on_worker(sandbox, open_store(store), run_id=run_id, key=key, code=code, data_digest_=data,
                        timeout=timeout, lease=lease, identity=identity, cache_root=data_cache_root())
    result = out.get("result") or {}
    get_run_logger().info("%s on %s: %s in %.1f s%s", key, identity["worker"], result.get("exc_type") or "ok",
                          result.get("exec_time") or 0.0, f"; superseded: {out['superseded']}" if out["superseded"] else "")
    return {"key": key, "executed_by": identity, "exc_type": result.get("exc_type"),
            "exec_time": result.get("exec_time"), "superseded": out["superseded"]}
