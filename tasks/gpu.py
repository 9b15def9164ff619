"""GPU sharing task: the global concurrency limit that serialises shared-GPU executions (SPEC §10).

Device groups (``sandbox.gpus``, ``sandbox.slots_per_gpu``) are handed out by the sandbox itself
(:class:`swarm_evo.sandbox.gpu_slots.DeviceAllocator`, issue 52); a host-wide limit is needed only
when the GPUs are the Docker host's choice (``all``/N with no GPU visible from the run's
machine: ``sandbox.gpu_limit`` names it), held around each execution by ``tasks/execute.py``.
"""

from __future__ import annotations

from prefect import task
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from tasks._policy import TASK_DEFAULTS


@task(name="ensure-gpu-limit", **TASK_DEFAULTS)
def ensure_gpu_limit(name: str) -> int:
    """Create the global concurrency limit ``name`` with one slot unless it exists; return its limit.

    An existing limit is kept as it is, so an operator can allow more containers per host
    (``prefect gcl update NAME --limit 2``) when the GPUs have room for them.
    """
    with get_client(sync_client=True) as client:
        try:
            return client.read_global_concurrency_limit_by_name(name).limit
        except ObjectNotFound:
            pass
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:  # another run created it meanwhile
            return client.read_global_concurrency_limit_by_name(name).limit
        return 1
