"""What a Docker run process killed mid-execution leaves behind, and its removal on resume.

A run process SIGKILLed during an execution never reaches the ``finally`` that removes its
container (:class:`~swarm_evo.sandbox.docker_sandbox.DockerSandbox`); the backend's ``leftovers``
(:mod:`swarm_evo.sandbox.backends`) call :func:`remove_stray_containers` when the run resumes.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from swarm_evo.sandbox.base import SandboxUnavailableError
from swarm_evo.sandbox.docker_sandbox import WORKDIR_LABEL, _docker


def remove_stray_containers(under: Path, client=None) -> list[str]:
    """Force-remove this backend's containers whose node directory lies under ``under``.

    A run process SIGKILLed during an execution leaves its container running (its ``finally``
    never ran); call this when the run is resumed, with the run directory. Containers are
    selected by :data:`WORKDIR_LABEL` (absolute path, compared after resolving ``under``).

    Returns:
        The names of the containers removed (possibly empty).

    Raises:
        SandboxUnavailableError: no Docker daemon answers (only when ``client`` is None).
    """
    docker = _docker()
    if client is None:
        try:
            client = docker.from_env()
            client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailableError(f"cannot reach the Docker daemon ({exc})") from None
    root = Path(under).resolve()
    removed = []
    for container in client.containers.list(all=True, filters={"label": WORKDIR_LABEL}):
        path = Path(container.labels.get(WORKDIR_LABEL) or "/nonexistent-workdir-label")
        if path == root or root in path.parents:
            with suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
                removed.append(container.name)
    return removed
