"""The pool backend's sandbox (issue 52, items 4 and 5): ``sandbox.backend: pool`` runs each
execution as a flow run of an ``execute-program`` deployment on ``sandbox.work_pool``
(``flows/execute_program.py``), and takes its outcome back through the run store into the node
directory, so that the journal, the debug chain, the hidden split's grading and the review see
what a local execution gives. It lives in flows/ (it talks to Prefect's API); the backend
registry (:mod:`swarm_evo.sandbox.backends`) builds it by import path.

Failures keep their classes (item 5): a program's crash, timeout or memory error comes back in
the result (the program's: debugged). A worker that dies or vanishes mid-execution (its flow run
ends Crashed/Failed without a result, or its heartbeat in the store stops for
:data:`DEAD_AFTER` s) is the sandbox's: the execution is submitted again, with a fresh key (a late
result of the lost try is never read), at most :data:`POOL_RETRIES` more times; no worker taking
it within ``sandbox.pool_wait`` or the retries spent raise
:class:`~swarm_evo.store.pool.PoolUnavailableError`, which stops the run (resumable:
:func:`swarm_evo.step.execution.execute_program`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from pathlib import Path

from swarm_evo.sandbox.base import ExecutionResult, SandboxError, SandboxUnavailableError
from swarm_evo.store.pool import (
    BEAT_FILE,
    EXECUTED_BY_FILE,
    RESULT_FILE,
    PoolUnavailableError,
    download_files,
    execution_location,
    node_files,
    read_json,
    upload_data,
    upload_files,
)
from swarm_evo.store.location import Store, open_store, put_object

log = logging.getLogger("swarm_evo.sandbox.pool")  # PREFECT_LOGGING_EXTRA_LOGGERS names swarm_evo: the run shows it

DEFAULT_POOL_WAIT = 600.0
"""``sandbox.pool_wait`` when not set: seconds an execution waits for a worker."""
POOL_RETRIES = 2
"""Submissions of one execution after a lost worker (3 tries in all)."""
DEAD_AFTER = 20.0
"""Seconds without a heartbeat (:data:`swarm_evo.store.pool.BEAT_SECONDS` apart) after which a
running execution's worker counts as lost."""
START_WAIT = 30.0
"""Seconds a flow run may stay Pending (its worker starting its process) before it counts as lost."""
POLL = 0.5
"""Seconds between looks at the flow run and the store."""


class WorkerLost(SandboxError):
    """The worker of one try died or vanished (the execution is submitted again)."""


class PoolSandbox:
    """Runs each program on a worker of ``work_pool`` (see the module). ``limits``: the run's
    ``sandbox`` section (a dict), sent with every execution; ``store``: the run store's URL."""

    gpu_limit = None
    confined = True  # the workers' local backend refuses to run unconfined unless allow_unconfined

    def __init__(self, work_pool: str, store: str, limits: dict, *, pool_wait: float = DEFAULT_POOL_WAIT,
                 retries: int = POOL_RETRIES, dead_after: float = DEAD_AFTER) -> None:
        self.work_pool, self.limits, self.pool_wait = work_pool, dict(limits), float(pool_wait)
        self.retries, self.dead_after = retries, dead_after
        self.store: Store = open_store(store)
        self.memory_limit_mb = limits.get("memory_limit_mb")
        self.network = bool(limits.get("network"))
        self.run_id = f"probe-{uuid.uuid4().hex[:12]}"  # until bind_run: the runtime probe, a bare sandbox
        self.mirror = None
        self._deployment = None
        self._lock = threading.Lock()
        self._progress = time.monotonic()  # the pool's last sign of life for this run: a start, a beat, a result

    def describe_confinement(self) -> str:
        """The ``confinement:`` line: each worker's own sandbox."""
        return f"pool {self.work_pool}: each worker confines programs in its own sandbox (its local or Docker backend)"

    def bind_run(self, run_id: str, mirror=None) -> None:
        """Tie the sandbox to its run: executions are kept under the run's id, and with ``mirror``
        (the run's :class:`~swarm_evo.store.mirror.RunMirror`) carry its lease, and a result is
        taken only while this process still holds it."""
        self.run_id, self.mirror = run_id, mirror

    # ------------------------------------------------------------------ Prefect
    def _deployment_id(self, client):
        with self._lock:
            if self._deployment is None:
                from prefect.client.schemas.filters import (
                    FlowFilter, FlowFilterName, WorkPoolFilter, WorkPoolFilterName,
                )

                from flows.execute_program import FLOW_NAME

                found = client.read_deployments(
                    flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW_NAME])),
                    work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[self.work_pool])))
                if not found:
                    raise SandboxUnavailableError(
                        f"sandbox.work_pool={self.work_pool!r}: no {FLOW_NAME} deployment on that work pool; deploy "
                        f"one (prefect deploy -n {FLOW_NAME}/default, whose pool is swarm-evo-process) or name the "
                        "pool it is on")
                self._deployment = sorted(found, key=lambda d: d.name != "default")[0].id
            return self._deployment

    def _lease(self) -> dict | None:
        lease = getattr(self.mirror, "lease", None)
        if lease is None:
            return None
        return {"url": self.mirror.target.url, "generation": lease.generation, "token": lease.owner.get("token")}

    # ------------------------------------------------------------------ execute
    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` on a worker of the pool (see the module); the node directory's files come
        back into ``workdir``, with ``executed_by.json`` naming the worker.

        Raises:
            PoolUnavailableError: no worker within ``sandbox.pool_wait``, or every try's worker lost.
            SandboxUnavailableError: no ``execute-program`` deployment on the pool.
            SandboxError: the store failed (retried by the step's task).
            SupersededError: another process took the run over meanwhile (the result is dropped).
        """
        from prefect.client.orchestration import get_client

        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            digest = upload_data(self.store, Path(public_dir))
        except OSError as exc:
            raise SandboxError(f"cannot upload the data {public_dir} to the run store {self.store.url}: {exc}") from exc
        lost: list[str] = []
        with get_client(sync_client=True) as client:
            while True:
                key = f"{workdir.name[:40]}-{uuid.uuid4().hex[:10]}"
                location = execution_location(self.store, self.run_id, key)
                try:
                    out = self._one_try(client, location, key, code, digest, timeout, workdir)
                except WorkerLost as exc:
                    lost.append(str(exc))
                    with contextlib.suppress(Exception):  # the lost try's files (a late writer may add some)
                        location.fs.rm(location.root, recursive=True)
                    log.warning("%s: %s; %s", workdir.name, exc, "submitted again" if len(lost) <= self.retries
                                else "no retry left")
                    if len(lost) > self.retries:
                        raise PoolUnavailableError(
                            f"work pool {self.work_pool}: the execution of {workdir.parent.name}/{workdir.name} lost "
                            f"its worker {len(lost)} times ({'; '.join(lost)}); the run stops: check the workers, then resume "
                            "it (swarm-evo resume RUN_DIR)") from None
                    continue
                break
        if self.mirror is not None:
            self.mirror.check_writer()  # a superseded writer takes no result into its journal
        if out.get("superseded"):
            raise SandboxError(f"the worker refused the execution: {out['superseded']}")
        try:
            download_files(location, "out", out.get("files") or [], workdir)
        except OSError as exc:
            raise SandboxError(f"cannot fetch the outputs of {key} from {location.url}: {exc}") from exc
        (workdir / EXECUTED_BY_FILE).write_text(json.dumps({**out["executed_by"], "key": key,
                                                           "left_out": out.get("left_out") or [],
                                                           "lost_workers": len(lost)}))
        with contextlib.suppress(Exception):
            location.fs.rm(location.root, recursive=True)
        return ExecutionResult.model_validate(out["result"])

    def _alive(self) -> None:
        with self._lock:
            self._progress = max(self._progress, time.monotonic())

    def _one_try(self, client, location: Store, key: str, code: str, digest: str, timeout: float,
                 workdir: Path) -> dict:
        """Submit one flow run and wait for its ``result.json``.

        Raises:
            WorkerLost: its worker died or vanished.
            PoolUnavailableError: no worker took it within ``pool_wait`` (the flow run is cancelled).
        """
        from prefect.client.schemas.objects import StateType
        from prefect.states import Cancelled

        try:
            files, _left_out = node_files(workdir)
            names = upload_files(location, "in", files)
            put_object(location, "in.json", json.dumps({"files": names}).encode())
        except OSError as exc:
            raise SandboxError(f"cannot upload {workdir} to the run store {self.store.url}: {exc}") from exc
        parameters = {"store": self.store.url, "run_id": self.run_id, "key": key, "code": code, "data": digest,
                      "timeout": float(timeout), "limits": self.limits, "lease": self._lease()}
        flow_run = client.create_flow_run_from_deployment(self._deployment_id(client), parameters=parameters,
                                                          name=f"exec-{key}", tags=["swarm-evo", "execution"])

        def cancel(why: str) -> None:
            with contextlib.suppress(Exception):
                client.set_flow_run_state(flow_run.id, Cancelled(message=why), force=True)

        submitted = time.monotonic()
        beat, beat_at, pending_at, final_at = None, None, None, None
        while True:
            out = read_json(location, RESULT_FILE)
            if out is not None:
                self._alive()
                return out
            state = client.read_flow_run(flow_run.id).state
            kind = state.type if state is not None else StateType.SCHEDULED
            now = time.monotonic()
            if kind == StateType.SCHEDULED:
                # waiting behind busy workers is not waiting for none: the clock runs while nothing of this
                # run made progress on the pool (no start, no heartbeat, no result)
                if now - max(submitted, self._progress) > self.pool_wait:
                    what = f"{workdir.parent.name}/{workdir.name}"
                    why = (f"no worker of work pool {self.work_pool} took the execution of {what} within "
                           f"sandbox.pool_wait={self.pool_wait:g} s; the run stops: start a worker (prefect worker "
                           f"start --pool {self.work_pool}), then resume the run (swarm-evo resume RUN_DIR)")
                    cancel(why)
                    raise PoolUnavailableError(why)
            elif kind == StateType.PENDING:
                if pending_at is None:
                    pending_at = now
                    self._alive()
                if now - pending_at > START_WAIT:
                    cancel("its worker did not start it")
                    raise WorkerLost(f"flow run exec-{key} stayed Pending {START_WAIT:g} s (its worker is gone)")
            elif kind in (StateType.RUNNING, StateType.CANCELLING, StateType.PAUSED):
                seen = read_json(location, BEAT_FILE)
                if beat_at is None or seen != beat:
                    beat, beat_at = seen, now
                    self._alive()
                elif now - beat_at > self.dead_after:
                    cancel("its worker stopped beating")
                    raise WorkerLost(f"the worker of flow run exec-{key} stopped beating ({self.dead_after:g} s "
                                     "without a heartbeat)")
            else:  # final (Completed, Failed, Crashed, Cancelled) and no result yet: the store may lag a moment
                final_at = final_at or now
                if now - final_at > 5:
                    raise WorkerLost(f"flow run exec-{key} ended {state.name} without a result"
                                     + (f" ({state.message[:300]})" if state.message else ""))
            time.sleep(POLL)


def build(config, threads: int) -> PoolSandbox:
    """The pool sandbox of a run configuration (the registry's builder; ``threads`` is the
    workers' business).

    Raises:
        SandboxUnavailableError: no ``sandbox.work_pool``, no run store, or no Prefect server
            (each names the fix).
    """
    import os

    from prefect.settings import get_current_settings

    cfg = config.sandbox
    pool = getattr(cfg, "work_pool", None)
    if not pool:
        raise SandboxUnavailableError("sandbox.backend pool needs sandbox.work_pool: the name of the Prefect work "
                                      "pool whose workers run the programs (e.g. swarm-evo-process)")
    store = getattr(getattr(config, "store", None), "url", None) or os.environ.get("SWARM_EVO_STORE")
    if not store:
        raise SandboxUnavailableError("sandbox.backend pool needs a run store the workers reach: give --store URL, "
                                      "store.url or $SWARM_EVO_STORE (docs/many-machines.md)")
    if not get_current_settings().api.url:
        raise SandboxUnavailableError("sandbox.backend pool needs a Prefect server whose workers run the programs: "
                                      "set PREFECT_API_URL (docs/many-machines.md)")
    limits = cfg.model_dump(mode="json")
    wait = getattr(cfg, "pool_wait", None)
    return PoolSandbox(pool, store, limits, pool_wait=DEFAULT_POOL_WAIT if wait is None else wait)
