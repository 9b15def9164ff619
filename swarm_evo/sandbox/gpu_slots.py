"""Device groups and GPU slots (SPEC §10; issue 52, item 3): which GPUs an execution gets.

Every GPU given (:mod:`swarm_evo.sandbox.gpus`: the spec, the host's GPUs) is one
:class:`DeviceGroup`; ``sandbox.slots_per_gpu`` executions share a group, so a run has
``groups x slots_per_gpu`` execution slots (:func:`execution_slots`, :func:`execution_workers`:
the scheduler's lane count). A :class:`DeviceAllocator` (thread-safe, one per set of groups in a
process) hands each execution the least-used group for its duration and takes it back.
GPU memory is not divided: executions that share a group share its memory.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from swarm_evo.sandbox.base import RunSettings, SandboxUnavailableError
from swarm_evo.sandbox.gpus import (
    CONTROL_NODES,
    PROC_GPUS,
    Gpu,
    GpuSpec,
    default_limit_name,
    describe_spec,
    discover_gpus,
    host_gpus,
    parse_gpus,
)



@dataclass(frozen=True)
class DeviceGroup:
    """The GPUs one execution gets (one GPU per group as formed by :func:`device_groups`).

    Attributes:
        gpus: the group's GPUs.
        whole: for the Docker backend's fallback only: a spec (``"all"`` or N) sent to Docker
            as it is, when no GPU of the Docker host is visible from here (``gpus`` is empty).
    """

    gpus: tuple[Gpu, ...]
    whole: GpuSpec = None

    @property
    def names(self) -> tuple[str, ...]:
        """The ids the group's GPUs go by (``("0",)``, ``("GPU-…",)``)."""
        return tuple(g.name for g in self.gpus)

    def describe(self) -> str:
        """``"GPU 0"``, ``"GPUs 0,1"``, ``"all GPUs"``."""
        return describe_spec(self.whole) if self.whole is not None else describe_spec(self.names)

    def cuda_visible_devices(self, confined: bool = True) -> str:
        """The group's ``CUDA_VISIBLE_DEVICES``: its UUIDs when all are known (right whatever the
        program sees); else ``0,…,k-1`` where only the group's devices exist (``confined``: the
        local backend's namespaces, a container), else the host's indices (PCI bus order, with
        ``CUDA_DEVICE_ORDER=PCI_BUS_ID``)."""
        if self.gpus and all(g.uuid for g in self.gpus):
            return ",".join(g.uuid for g in self.gpus)  # type: ignore[misc]
        if confined:
            return ",".join(str(i) for i in range(len(self.gpus)))
        return ",".join(str(g.index) if g.index is not None else g.name for g in self.gpus)

    def environment(self, confined: bool = True, docker: bool = False) -> dict[str, str]:
        """Variables an execution of this group gets: ``CUDA_VISIBLE_DEVICES``,
        ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and, for Docker, ``NVIDIA_VISIBLE_DEVICES`` (the ids
        requested). The Docker fallback group (``whole``) gets nothing: Docker chooses."""
        if self.whole is not None:
            return {}
        env = {"CUDA_VISIBLE_DEVICES": self.cuda_visible_devices(confined), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        if docker:
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(self.names)
        return env

    def device_nodes(self, dev_dir: str = "/dev") -> list[str]:
        """The device nodes a local execution of this group gets bound into its root: the GPUs'
        ``/dev/nvidia<minor>`` and :data:`CONTROL_NODES` (the supervisor binds those that exist).

        Raises:
            SandboxUnavailableError: a GPU whose device node is unknown (names the GPU and the fix).
        """
        nodes = []
        for gpu in self.gpus:
            if gpu.minor is None:
                raise SandboxUnavailableError(
                    f"sandbox.gpus names GPU {gpu.name!r}, whose /dev/nvidia<N> node the local backend cannot find "
                    "(nvidia-smi -L, /proc/driver/nvidia/gpus): name it by its nvidia-smi index, install the NVIDIA "
                    "driver's nvidia-smi, use the docker backend for MIG devices, or set sandbox.gpus: none")
            nodes.append(f"{dev_dir}/nvidia{gpu.minor}")
        return nodes + [f"{dev_dir}/{name}" for name in CONTROL_NODES]

    def buses(self) -> list[str] | None:
        """The PCI bus ids of the group's GPUs (their :data:`PROC_GPUS` directories), None when one is
        unknown: a local execution's ``/proc`` hides the other GPUs' directories, as Docker's
        NVIDIA runtime does, so that NVML (``nvidia-smi``) lists only the group."""
        buses = [g.bus for g in self.gpus]
        return None if not buses or None in buses else buses  # type: ignore[return-value]

    def request(self) -> dict | None:
        """The Docker ``DeviceRequest`` of this group (:func:`device_request`)."""
        return device_request(self.whole if self.whole is not None else self.names)


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


_NO_GPU_FIX = ("install the NVIDIA driver (nvidia-smi -L lists the GPUs), name device ids (sandbox.gpus: [0, 1]), "
               "or set sandbox.gpus: none (--gpus none)")


def device_groups(spec: GpuSpec, discover: Callable[[], Sequence[Gpu]] | None = None,
                  docker: bool = False) -> list[DeviceGroup]:
    """The device groups of a spec: one per GPU given ([] for None), in the spec's order.

    ``"all"``: every GPU :func:`discover_gpus` finds; N: the first N; ids: those, matched to the
    discovered GPUs by index or UUID (their device nodes; ids are kept as given). ``discover``
    defaults to :func:`host_gpus`. With ``docker`` the GPUs are the Docker host's: where none is
    visible from here, ``"all"``/N become one group that sends the spec to Docker as it is
    (:attr:`DeviceGroup.whole`) and ids are sent as given.

    Raises:
        ValueError: not a GPU spec (:func:`parse_gpus`).
        SandboxUnavailableError: ``"all"``/N and no GPU found (not with ``docker``), fewer GPUs
            than N, or an id that names no GPU found here; each names the value and the fix.
    """
    spec = parse_gpus(spec)  # idempotent: a raw value is taken as the config takes it
    if spec is None:
        return []
    found = tuple((discover or host_gpus)())
    if spec == "all" or isinstance(spec, int):
        if not found:
            if docker:
                return [DeviceGroup((), whole=spec)]
            raise SandboxUnavailableError(f"sandbox.gpus={spec!r}: no NVIDIA GPU found on this machine: " + _NO_GPU_FIX)
        if isinstance(spec, int) and spec > len(found):
            raise SandboxUnavailableError(
                f"sandbox.gpus={spec}: this machine has {len(found)} GPU{'s' if len(found) != 1 else ''} "
                f"({', '.join(g.name for g in found)}): give at most {len(found)}, all, or device ids")
        chosen = found if spec == "all" else found[:spec]
        return [DeviceGroup((gpu,)) for gpu in chosen]
    groups = []
    for name in spec:
        gpu = next((g for g in found if name in (g.name, g.uuid)), None)
        if gpu is not None:
            groups.append(DeviceGroup((Gpu(name, gpu.index, gpu.minor, gpu.uuid, gpu.bus),)))
        elif found:
            raise SandboxUnavailableError(
                f"sandbox.gpus names GPU {name!r}, which this machine does not have (nvidia-smi -L: "
                f"{', '.join(_describe_gpu(g) for g in found)}): name one of them, or set "
                "sandbox.gpus: none")
        else:  # nothing discovered: an index is its own node's minor (the usual numbering)
            index = int(name) if name.isdigit() else None
            groups.append(DeviceGroup((Gpu(name, index, index, name if name.startswith("GPU-") else None),)))
    return groups


def _describe_gpu(gpu: Gpu) -> str:
    return f"{gpu.name} ({gpu.uuid})" if gpu.uuid else gpu.name


def execution_slots(config: "RunSettings", discover: Callable[[], Sequence[Gpu]] | None = None) -> int | None:
    """A run's execution slots when it is given GPUs: device groups x ``sandbox.slots_per_gpu``
    (the scheduler's lane count in place of ``search.parallel_workers``); None without GPUs.

    Raises:
        SandboxUnavailableError: as :func:`device_groups` (the GPUs given are not here).
    """
    spec = config_spec(config)
    if spec is None:
        return None
    groups = device_groups(spec, discover, docker=config.sandbox.backend == "docker")
    return len(groups) * config.sandbox.slots_per_gpu


def config_spec(config: "RunSettings") -> GpuSpec:
    """``config.sandbox.gpus`` as a normalised spec (its id list as a tuple)."""
    gpus = config.sandbox.gpus
    return tuple(gpus) if isinstance(gpus, list) else gpus


# ---------------------------------------------------------------------------------- allocator


class DeviceAllocator:
    """Hands each execution one device group for its duration (thread-safe).

    Args:
        groups: the device groups (:func:`device_groups`); may be empty (no GPU).
        slots_per_gpu: executions that may hold one group at once (>= 1).

    :meth:`lease` gives the group with the fewest executions (the first such one), so
    executions spread over the GPUs before they share one, and blocks while every group holds
    ``slots_per_gpu`` executions. :attr:`slots` is ``len(groups) * slots_per_gpu``.

    Raises:
        ValueError: ``slots_per_gpu`` < 1.
    """

    def __init__(self, groups: Sequence[DeviceGroup], slots_per_gpu: int = 1) -> None:
        if int(slots_per_gpu) < 1:
            raise ValueError(f"sandbox.slots_per_gpu={slots_per_gpu}: give 1 or more executions per GPU")
        self.groups = list(groups)
        self.slots_per_gpu = int(slots_per_gpu)
        self._busy = [0] * len(self.groups)
        self._cond = threading.Condition()

    @property
    def slots(self) -> int:
        """Executions that may hold a group at once."""
        return len(self.groups) * self.slots_per_gpu

    def describe(self) -> str:
        """The confinement line's GPU part, e.g. ``GPUs: 0, 1 (one per execution, 2 executions per GPU:
        4 slots; GPU memory not bounded)``; ``""`` without groups."""
        if not self.groups:
            return ""
        if self.groups[0].whole is not None:
            return f"GPUs: {self.groups[0].describe()} of the Docker host, shared by its containers " \
                f"(global concurrency limit {default_limit_name()}; GPU memory not bounded)"
        names = ", ".join(g.describe().removeprefix("GPU ").removeprefix("GPUs ") for g in self.groups)
        share = "" if self.slots_per_gpu == 1 else f", {self.slots_per_gpu} executions per GPU"
        return f"GPUs: {names} (one per execution{share}: {self.slots} slot{'s' if self.slots != 1 else ''}; " \
            "GPU memory not bounded)"

    def in_use(self) -> list[int]:
        """Executions holding each group now (in :attr:`groups` order)."""
        with self._cond:
            return list(self._busy)

    @contextmanager
    def lease(self) -> Iterator[DeviceGroup | None]:
        """The device group of one execution until the block exits (None when there are no groups)."""
        if not self.groups:
            yield None
            return
        with self._cond:
            while min(self._busy) >= self.slots_per_gpu:
                self._cond.wait()
            slot = self._busy.index(min(self._busy))
            self._busy[slot] += 1
        try:
            yield self.groups[slot]
        finally:
            with self._cond:
                self._busy[slot] -= 1
                self._cond.notify()


_allocators: dict[tuple, DeviceAllocator] = {}
_allocators_lock = threading.Lock()


def shared_allocator(groups: Sequence[DeviceGroup], slots_per_gpu: int = 1) -> DeviceAllocator:
    """The process's allocator of these groups and slots: sandboxes of runs in one process (a
    sweep) that are given the same GPUs share their slots instead of each filling them.

    Raises:
        ValueError: ``slots_per_gpu`` < 1.
    """
    key = (tuple(groups), int(slots_per_gpu))
    with _allocators_lock:
        allocator = _allocators.get(key)
        if allocator is None:
            allocator = _allocators[key] = DeviceAllocator(groups, slots_per_gpu)
        return allocator


def as_groups(gpus: GpuSpec | Sequence[DeviceGroup], docker: bool = False) -> list[DeviceGroup]:
    """Device groups from a sandbox's ``gpus`` argument: a spec (:func:`parse_gpus`'s forms, the
    host's GPUs discovered) or groups already formed (tests, a caller with its own discovery).

    Raises:
        ValueError: not a GPU spec. SandboxUnavailableError: as :func:`device_groups`.
    """
    if isinstance(gpus, (list, tuple)) and gpus and all(isinstance(g, DeviceGroup) for g in gpus):
        return list(gpus)
    return device_groups(parse_gpus(gpus), docker=docker)


def as_group(gpus: DeviceGroup | GpuSpec) -> DeviceGroup | None:
    """A Docker container's device group from a group or a spec (``all``/N: Docker's choice, one
    :attr:`DeviceGroup.whole` group; ids: one group of them); None for no GPU."""
    if gpus is None or isinstance(gpus, DeviceGroup):
        return gpus
    if gpus == "all" or isinstance(gpus, int):
        return DeviceGroup((), whole=gpus)
    return DeviceGroup(tuple(Gpu(name) for name in gpus))


def execution_workers(config: "RunSettings") -> int:
    """Executions a run makes at once: its GPU slots when it is given GPUs (device groups x
    ``sandbox.slots_per_gpu``, :func:`execution_slots`), else
    ``search.parallel_workers``.

    Raises:
        SandboxUnavailableError: the GPUs given are not on this host (names the fix).
    """
    return execution_slots(config) or config.search.parallel_workers
