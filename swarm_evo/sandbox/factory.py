"""Build the sandbox a configuration names (SPEC §10), without the rest of a run session.

Kept apart from :mod:`swarm_evo.run.session` so that an Eval Service job (flows/evaluate_program)
builds its sandbox without importing the search (litellm, scikit-learn: seconds per job).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from swarm_evo.sandbox.base import Sandbox
from swarm_evo.sandbox.docker_sandbox import DockerSandbox
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.program_env import resolve_program_python

if TYPE_CHECKING:
    from swarm_evo.config import RunConfig

log = logging.getLogger(__name__)
_warned_network: set[str] = set()


def threads_per_execution(parallel_workers: int) -> int:
    """OpenMP/BLAS threads per program: the cores shared by the parallel executions.

    Measured here (2 cores): two HistGradientBoosting programs with 2 OpenMP threads each ran
    for over 10 minutes without finishing; with 1 thread each they took 5.6 s.
    """
    return max(1, (os.cpu_count() or 1) // max(1, parallel_workers))


def make_sandbox(config: RunConfig) -> Sandbox:
    """The execution backend named by ``config.sandbox.backend`` (SPEC §10).

    The local backend refuses, at its first execution, to run programs it cannot confine unless
    ``sandbox.allow_unconfined`` (:func:`swarm_evo.sandbox.confinement.cannot_confine`).

    Raises:
        SandboxUnavailableError: docker backend with no daemon or no image (names the fix).
    """
    cfg = config.sandbox
    threads = threads_per_execution(config.search.parallel_workers)
    if cfg.network and cfg.backend not in _warned_network:  # once per run (process) and backend
        _warned_network.add(cfg.backend)
        log.warning("sandbox.network is true: programs of the %s backend share the host's network and reach its "
                    "local services (model servers, the Prefect API)", cfg.backend)
    if cfg.backend == "docker":
        return DockerSandbox(
            image=cfg.image,
            memory_limit_mb=cfg.memory_limit_mb,
            cpus=cfg.cpus,
            pids_limit=cfg.pids_limit,
            shm_size_mb=cfg.shm_size_mb,
            gpus=tuple(cfg.gpus) if isinstance(cfg.gpus, list) else cfg.gpus,
            parallel_workers=config.search.parallel_workers,
            num_threads=threads,
            max_output_bytes=cfg.max_output_bytes,
            disk_limit_mb=cfg.disk_limit_mb,
            network=cfg.network,
        )
    return LocalSandbox(
        python=resolve_program_python(cfg.python).path,
        max_output_bytes=cfg.max_output_bytes,
        memory_limit_mb=cfg.memory_limit_mb,
        num_threads=threads,
        pids_limit=cfg.pids_limit,
        parallel_workers=config.search.parallel_workers,
        shm_size_mb=cfg.shm_size_mb,
        disk_limit_mb=cfg.disk_limit_mb,
        network=cfg.network,
        allow_unconfined=cfg.allow_unconfined,
    )
