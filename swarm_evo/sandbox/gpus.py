"""GPU requests for the Docker sandbox: the ``gpus`` spec, device requests, per-execution leases.

The spec (SPEC §10; ``sandbox.gpus`` in config, the SandboxSettings block, the ``gpus`` flow
parameter and ``--gpus`` on the command line) is one of:

    None / "none"     no GPU (the default)
    "all"             every GPU of the host             -> Docker ``--gpus all``
    N (int >= 1)      the first N GPUs                  -> ``--gpus N``
    ["0", "2"]        these device ids (or UUIDs)       -> ``--gpus '"device=0,2"'``

With parallel steps two containers must not fight over one device: an id list is split into
disjoint groups, one per parallel execution, handed out by :class:`DevicePool` (an execution
waits while every group is in use). "all" and N name no particular devices, so executions
with them share a *global concurrency limit* of one slot (:attr:`DevicePool.shared_limit`),
which the Prefect layer holds around each execution; being global, it also serialises GPU
use across runs of a sweep on the same host.
"""

from __future__ import annotations

import queue
import re
import socket
from contextlib import contextmanager
from typing import Iterator, Union

GpuSpec = Union[None, str, int, tuple[str, ...]]
"""Normalised spec: None, ``"all"``, a count ``N >= 1`` or a tuple of device ids."""

NVIDIA_FIX = (
    "install the NVIDIA driver and nvidia-container-toolkit on the Docker host "
    "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html) "
    "and restart dockerd, or set gpus to none (--gpus none, sandbox.gpus: null)"
)
"""The fix named by every 'no GPU runtime' error."""

_ID = re.compile(r"^(\d+(:\d+)?|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")
"""A device id as nvidia-container-toolkit takes it: an index (``0``, MIG ``0:1``) or a UUID."""


def parse_gpus(value: object) -> GpuSpec:
    """Normalise a GPU spec from YAML, a block, a flow parameter or a CLI flag.

    Accepts None, ``"none"``/``""``, ``"all"``, an int or digit string ``N >= 1``, a list of
    ids, or a comma-separated string of ids (``"0,1"``; a single id as ``"device=0"`` too).

    Raises:
        ValueError: anything else, naming the value and the accepted forms.
    """
    accepted = "use none, all, a count such as 2, or device ids such as [0, 1] / '0,1' / GPU-<uuid>"
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"gpus={value!r} is not a GPU spec: {accepted}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"gpus={value} is negative: {accepted}")
        return value or None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none", "0"):
            return None
        if text.lower() == "all":
            return "all"
        if text.isdigit():
            return int(text)
        text = text.removeprefix("device=")
        ids = [part.strip() for part in text.split(",")]
        return _ids(ids, value, accepted)
    if isinstance(value, (list, tuple)):
        return _ids([str(v).strip() for v in value], value, accepted)
    raise ValueError(f"gpus={value!r} is not a GPU spec: {accepted}")


def _ids(ids: list[str], original: object, accepted: str) -> tuple[str, ...]:
    if not ids or any(not _ID.match(i) for i in ids):
        raise ValueError(f"gpus={original!r} is not a GPU spec: {accepted}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus={original!r} names a device twice")
    return tuple(ids)


def device_request(spec: GpuSpec) -> dict | None:
    """Keyword arguments of ``docker.types.DeviceRequest`` for a spec (``docker run --gpus``).

    ``{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}`` for ``"all"``; ``count``
    N for a count; ``device_ids`` for ids; None for no GPU. The same lower-case keys go under
    a docker work pool's ``container_create_kwargs.device_requests``.
    """
    if spec is None:
        return None
    request: dict = {"driver": "nvidia", "capabilities": [["gpu"]]}
    if spec == "all":
        request["count"] = -1
    elif isinstance(spec, int):
        request["count"] = spec
    else:
        request["device_ids"] = list(spec)
    return request


def describe_spec(spec: GpuSpec) -> str:
    """Human form of a spec: ``"no GPU"``, ``"all GPUs"``, ``"2 GPUs"``, ``"GPUs 0,1"``."""
    if spec is None:
        return "no GPU"
    if spec == "all":
        return "all GPUs"
    if isinstance(spec, int):
        return f"{spec} GPU{'s' if spec != 1 else ''}"
    return "GPU" + ("s " if len(spec) > 1 else " ") + ",".join(spec)


def default_limit_name() -> str:
    """Name of the global concurrency limit for shared GPUs: one per Docker host.

    ``swarm-evo-gpus-<hostname>``, lower-cased, other characters replaced by dashes.
    """
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "host"
    return f"swarm-evo-gpus-{host}"


class DevicePool:
    """Hands each parallel execution its own GPUs, or marks them as shared (SPEC §10).

    Args:
        spec: a normalised spec (:func:`parse_gpus`).
        parallel_workers: executions that may run at once.
        limit_name: name of the global concurrency limit used for "all"/N specs.

    For a tuple of ``d`` ids the ids are dealt round-robin into ``min(d, parallel_workers)``
    disjoint groups; :meth:`lease` blocks until a group is free. For "all"/N every lease is
    the spec itself and :attr:`shared_limit` names the one-slot global concurrency limit the
    caller must hold (the domain core does not talk to Prefect). Thread-safe.
    """

    def __init__(self, spec: GpuSpec, parallel_workers: int, limit_name: str | None = None) -> None:
        self.spec = spec
        self._groups: queue.Queue[tuple[str, ...]] | None = None
        if isinstance(spec, tuple):
            n = max(1, min(len(spec), parallel_workers))
            groups = [tuple(spec[i::n]) for i in range(n)]
            self._groups = queue.Queue()
            for group in groups:
                self._groups.put(group)
            self.groups = groups
        else:
            self.groups = []
        shared = spec == "all" or isinstance(spec, int)
        self.shared_limit: str | None = (limit_name or default_limit_name()) if shared else None

    @contextmanager
    def lease(self) -> Iterator[GpuSpec]:
        """The spec one execution requests; device-id groups are exclusive until exit."""
        if self._groups is None:
            yield self.spec
            return
        group = self._groups.get()
        try:
            yield group
        finally:
            self._groups.put(group)
