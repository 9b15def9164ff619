"""Build the sandbox a configuration names (SPEC §10), without the rest of a run session.

Kept apart from :mod:`swarm_evo.run.session` so that an Eval Service job (flows/evaluate_program)
builds its sandbox without importing the search (litellm, scikit-learn: seconds per job).
"""

from __future__ import annotations

import logging
import os

from swarm_evo.sandbox import backends
from swarm_evo.sandbox.base import RunSettings, Sandbox
from swarm_evo.sandbox.gpu_slots import execution_workers


log = logging.getLogger(__name__)
_warned_network: set[str] = set()


def threads_per_execution(parallel_workers: int) -> int:
    """OpenMP/BLAS threads per program: the cores shared by the parallel executions (the run's
    execution slots: :func:`~swarm_evo.sandbox.gpu_slots.execution_workers`).

    Measured here (2 cores): two HistGradientBoosting programs with 2 OpenMP threads each ran
    for over 10 minutes without finishing; with 1 thread each they took 5.6 s.
    """
    return max(1, (os.cpu_count() or 1) // max(1, parallel_workers))


def make_sandbox(config: RunSettings) -> Sandbox:
    """The execution backend named by ``config.sandbox.backend`` (SPEC §10; built by its record in
    :mod:`swarm_evo.sandbox.backends`).

    The local backend refuses, at its first execution, to run programs it cannot confine unless
    ``sandbox.allow_unconfined`` (:func:`swarm_evo.sandbox.confinement.cannot_confine`).

    With ``sandbox.gpus`` the sandbox owns the run's device groups: each ``execute`` holds one
    (:class:`swarm_evo.sandbox.gpu_slots.DeviceAllocator`) for its duration, so the caller only runs
    at most :func:`~swarm_evo.sandbox.gpu_slots.execution_workers` executions at once; threads and the default memory limit
    are shared out among those.

    Raises:
        SandboxUnavailableError: docker backend with no daemon or no image; GPUs given that this
            host does not have (each names the fix).
    """
    cfg = config.sandbox
    threads = threads_per_execution(execution_workers(config))
    if cfg.network and cfg.backend not in _warned_network:  # once per run (process) and backend
        _warned_network.add(cfg.backend)
        log.warning("sandbox.network is true: programs of the %s backend share the host's network and reach its "
                    "local services (model servers, the Prefect API)", cfg.backend)
    return backends.get(cfg.backend).build(config, threads)
