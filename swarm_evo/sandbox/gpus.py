"""GPUs on every backend (SPEC §10; issue 52, item 3): the spec and the host's GPUs.

The spec (``sandbox.gpus`` in config, the SandboxSettings block, the ``gpus`` flow parameter and
``--gpus`` on the command line) is one of:

    None / "none"     no GPU (the default): local programs see no /dev/nvidia* node at all
    "all"             every GPU of the host (:func:`discover_gpus`)
    N (int >= 1)      the first N GPUs of the host
    ["0", "2"]        these device ids (nvidia-smi indices or ``GPU-<uuid>``; MIG ids: docker only)

Device groups, slots and their allocator are :mod:`swarm_evo.sandbox.gpu_slots`.
Every GPU given is one **device group**; ``sandbox.slots_per_gpu`` (default 1) executions share
one group, so a run has ``groups x slots_per_gpu`` execution slots (:func:`execution_slots`,
the scheduler's lane count). A :class:`DeviceAllocator` (thread-safe, one per set of groups in a
process: the runs of a sweep in one process share it) hands each execution the least-used group
for its duration and takes it back. What an execution sees of its group:

* local backend: ``CUDA_VISIBLE_DEVICES`` (:meth:`DeviceGroup.environment`) and, inside its
  namespaces, only the group's ``/dev/nvidia<minor>`` nodes plus the control nodes
  (:data:`CONTROL_NODES`) that exist (:meth:`DeviceGroup.device_nodes`);
* Docker: a ``DeviceRequest`` with the group's device ids (:func:`device_request`),
  ``NVIDIA_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES``.

GPU memory is not divided: executions that share a group share its memory.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Union


GpuSpec = Union[None, str, int, tuple[str, ...]]
"""Normalised spec: None, ``"all"``, a count ``N >= 1`` or a tuple of device ids."""

NVIDIA_FIX = (
    "install the NVIDIA driver and nvidia-container-toolkit on the Docker host "
    "(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html) "
    "and restart dockerd, or set gpus to none (--gpus none, sandbox.gpus: null)"
)
"""The fix named by every 'no GPU runtime' error."""

CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
"""Device nodes every CUDA program needs besides its GPUs' own (bound when the host has them)."""

PROC_GPUS = "/proc/driver/nvidia/gpus"
"""The NVIDIA driver's per-GPU directories (``<pci bus id>/information``)."""

_ID = re.compile(r"^(\d+(:\d+)?|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")
"""A device id as nvidia-container-toolkit takes it: an index (``0``, MIG ``0:1``) or a UUID."""

_SMI_LINE = re.compile(r"^GPU (\d+): .*\(UUID: (GPU-[0-9A-Za-z-]+)\)")
_DEV_NODE = re.compile(r"^nvidia(\d+)$")


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
    """Name of the global concurrency limit for GPUs shared by every container of a Docker host
    (the Docker backend's whole-spec group, :meth:`DeviceGroup.whole`): one per host.

    ``swarm-evo-gpus-<hostname>``, lower-cased, other characters replaced by dashes.
    """
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "host"
    return f"swarm-evo-gpus-{host}"


# ---------------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU.

    Attributes:
        name: the id executions name it by: the user's id (``"2"``, ``"GPU-<uuid>"``, MIG) or,
            for ``all``/N, its nvidia-smi index.
        index: nvidia-smi's index (PCI bus order), None when unknown.
        minor: the minor number of its ``/dev/nvidia<minor>`` node, None when unknown.
        uuid: ``GPU-<uuid>``, None when unknown.
        bus: its PCI bus id, the name of its directory under :data:`PROC_GPUS`; None when unknown.
    """

    name: str
    index: int | None = None
    minor: int | None = None
    uuid: str | None = None
    bus: str | None = None


def _from_smi(run: Callable) -> list[tuple[int, str]]:
    """``(index, uuid)`` per GPU from ``nvidia-smi -L`` (MIG lines skipped); [] when it fails."""
    try:
        done = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if getattr(done, "returncode", 1) != 0:
        return []
    found = []
    for line in (done.stdout or "").splitlines():
        match = _SMI_LINE.match(line)  # "GPU 0: NVIDIA H200 (UUID: GPU-...)"; MIG lines are indented
        if match:
            found.append((int(match.group(1)), match.group(2)))
    return found


def _from_proc(proc_dir: str | Path) -> list[tuple[int | None, str | None, str]]:
    """``(minor, uuid, bus id)`` per GPU from the driver's ``<bus id>/information`` files, in PCI bus
    order (nvidia-smi's default index order); [] when there is none."""
    try:
        buses = sorted(os.listdir(proc_dir))
    except OSError:
        return []
    found = []
    for bus in buses:
        fields = {}
        try:
            with open(os.path.join(proc_dir, bus, "information")) as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    fields[key.strip()] = value.strip()
        except OSError:
            continue
        minor = fields.get("Device Minor", "")
        uuid = fields.get("GPU UUID", "")
        found.append((int(minor) if minor.isdigit() else None, uuid if uuid.startswith("GPU-") else None, bus))
    return found


def _from_dev(dev_dir: str | Path) -> list[int]:
    """Minor numbers of the ``/dev/nvidia<N>`` nodes, ascending; [] when there is none."""
    try:
        names = os.listdir(dev_dir)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_DEV_NODE.match, names) if m)


def discover_gpus(run: Callable = subprocess.run, proc_dir: str | Path = PROC_GPUS,
                  dev_dir: str | Path = "/dev") -> tuple[Gpu, ...]:
    """The host's NVIDIA GPUs in nvidia-smi's order; () when none is found (never raises).

    Sources, each optional: ``nvidia-smi -L`` (indices and UUIDs; ``run`` is called like
    :func:`subprocess.run`), the driver's ``proc_dir`` (each GPU's device minor and UUID, in PCI
    bus order), and the ``/dev/nvidia<N>`` nodes of ``dev_dir``. A GPU's minor comes from the
    driver by its UUID, else from the node of the same number; without nvidia-smi the driver's
    list, else the nodes, give the GPUs in order.
    """
    smi = _from_smi(run)
    proc = _from_proc(proc_dir)
    nodes = _from_dev(dev_dir)
    if smi:
        driver = {uuid: (minor, bus) for minor, uuid, bus in proc if uuid}
        return tuple(Gpu(str(index), index, driver[uuid][0] if uuid in driver else
                         (index if index in nodes or not nodes else None), uuid, driver.get(uuid, (None, None))[1])
                     for index, uuid in smi)
    if proc:
        return tuple(Gpu(str(i), i, minor, uuid, bus) for i, (minor, uuid, bus) in enumerate(proc))
    return tuple(Gpu(str(i), i, minor, None) for i, minor in enumerate(nodes))


@functools.lru_cache(maxsize=1)
def host_gpus() -> tuple[Gpu, ...]:
    """:func:`discover_gpus` of this host, asked once per process."""
    return discover_gpus()
