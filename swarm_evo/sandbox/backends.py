"""The sandbox backends' registry (issue 43): every list of backends reads it.

A backend is one :class:`Backend` record: its name (``sandbox.backend``, ``--executor``), the
configuration keys only it reads, how it is built from a run configuration, and what a killed
run may have left of it. The configuration's ``sandbox.backend`` choices and key checks
(:class:`swarm_evo.config.SandboxConfig`), the CLI's ``--executor`` choices, the flows
(``flows/evaluate_program.py``, ``flows/two_phase_evo.py``), the run session and
:func:`swarm_evo.sandbox.factory.make_sandbox` read :data:`BACKENDS`; ``SandboxSettings``
(``blocks/sandbox_settings.py``) takes its fields from ``SandboxConfig``.

A new backend is a module with its sandbox class (``execute``, ``describe_confinement()``,
``confined``; a backend that wraps a command runs it through
:func:`swarm_evo.sandbox.process_runner.run_supervised`), and a record here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from swarm_evo.sandbox.base import RunSettings, Sandbox



@dataclass(frozen=True)
class Backend:
    """A sandbox backend.

    Attributes:
        name: ``sandbox.backend`` / ``--executor`` value.
        summary: what runs a program, for the configuration's and the CLI's help.
        keys: the ``sandbox.*`` keys only this backend reads (the others read every common key).
        build: ``build(config, threads) -> Sandbox``: the sandbox of a run configuration, with
            ``threads`` OpenMP/BLAS threads per program. Raises ``SandboxUnavailableError`` when
            the backend cannot run here (names the fix).
        leftovers: ``leftovers(run_dir) -> names``: removes what a killed run process left
            running (the Docker backend's containers), or None when nothing can be left.
    """

    name: str
    summary: str
    keys: tuple[str, ...]
    build: Callable[["RunSettings", int], Sandbox]
    leftovers: Callable[[Path], list[str]] | None = None


def _slots(config: "RunSettings") -> int:
    """Executions at once: the GPU slots when GPUs are given, else ``search.parallel_workers``."""
    from swarm_evo.sandbox.gpu_slots import execution_workers

    return execution_workers(config)


def _local(config: "RunSettings", threads: int) -> Sandbox:
    from swarm_evo.sandbox.gpu_slots import config_spec
    from swarm_evo.sandbox.local import LocalSandbox
    from swarm_evo.sandbox.program_env import resolve_program_python

    cfg = config.sandbox
    return LocalSandbox(
        python=resolve_program_python(cfg.python).path, max_output_bytes=cfg.max_output_bytes,
        memory_limit_mb=cfg.memory_limit_mb, num_threads=threads, pids_limit=cfg.pids_limit,
        parallel_workers=_slots(config), shm_size_mb=cfg.shm_size_mb,
        disk_limit_mb=cfg.disk_limit_mb, network=cfg.network, allow_unconfined=cfg.allow_unconfined,
        preload=tuple(cfg.preload), gpus=config_spec(config), slots_per_gpu=cfg.slots_per_gpu,
    )


def _docker(config: "RunSettings", threads: int) -> Sandbox:
    from swarm_evo.sandbox.docker_sandbox import DockerSandbox
    from swarm_evo.sandbox.gpu_slots import config_spec

    cfg = config.sandbox
    return DockerSandbox(
        image=cfg.image, memory_limit_mb=cfg.memory_limit_mb, cpus=cfg.cpus, pids_limit=cfg.pids_limit,
        shm_size_mb=cfg.shm_size_mb, gpus=config_spec(config), slots_per_gpu=cfg.slots_per_gpu,
        parallel_workers=_slots(config), num_threads=threads,
        max_output_bytes=cfg.max_output_bytes, disk_limit_mb=cfg.disk_limit_mb, network=cfg.network,
    )


def _by_path(target: str) -> Callable[["RunSettings", int], Sandbox]:
    """A builder named by import path ``module:function``, imported at its first call: a backend whose
    sandbox lives outside the domain core (the pool backend's, in flows/, talks to Prefect's API)."""

    def build(config: "RunSettings", threads: int) -> Sandbox:
        import importlib

        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)(config, threads)

    return build


def _docker_leftovers(run_dir: Path) -> list[str]:
    from swarm_evo.sandbox.docker_leftovers import remove_stray_containers

    return remove_stray_containers(run_dir)


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("local", "local processes (default)", ("python", "allow_unconfined", "preload"), _local),
        Backend("docker", "Docker containers", ("image", "cpus"), _docker, _docker_leftovers),
        Backend("pool", "flow runs on the workers of a Prefect work pool (sandbox.work_pool; issue 52)",
                ("work_pool", "pool_wait"), _by_path("flows.pool_sandbox:build")),
    )
}
"""The backends by name; the first is the default."""

NAMES: tuple[str, ...] = tuple(BACKENDS)
"""The backend names, the default first: ``sandbox.backend``'s and ``--executor``'s choices."""


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        ValueError: no such backend (the message lists the known ones).
    """
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r}: use one of {', '.join(NAMES)}") from None


def readers(key: str) -> tuple[str, ...]:
    """The backends that read the ``sandbox.*`` key ``key`` (every backend for a common key)."""
    own = tuple(name for name, b in BACKENDS.items() if key in b.keys)
    return own or NAMES


def help_text() -> str:
    """The help of ``--executor``: ``local: local processes (default); docker: Docker containers``."""
    return "; ".join(f"{b.name}: {b.summary}" for b in BACKENDS.values())
