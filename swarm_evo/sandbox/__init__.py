"""Execution sandboxes (SPEC §10): one interface, interchangeable backends.

``LocalSandbox`` runs programs as local processes, ``DockerSandbox`` in containers with GPU
passthrough; both implement :class:`Sandbox` and report the same :class:`ExecutionResult`.
:mod:`~swarm_evo.sandbox.backends` is the backend registry (names, keys, builders), and
:mod:`~swarm_evo.sandbox.process_runner` the one runner of a supervised subprocess.
``describe_runtime`` asks a sandbox what it offers programs (Python, packages, devices).

May import: nothing else of swarm_evo (``config`` only for type checking).
"""

from swarm_evo.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    ExecutionResult,
    Sandbox,
    SandboxError,
    SandboxUnavailableError,
)
from swarm_evo.sandbox.docker_sandbox import DEFAULT_IMAGE, DockerSandbox
from swarm_evo.sandbox.env_scrub import scrub_env
from swarm_evo.sandbox.failure import classify_failure
from swarm_evo.sandbox.gpus import GpuSpec, parse_gpus
from swarm_evo.sandbox.gpu_slots import DeviceAllocator
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.output import read_bounded
from swarm_evo.sandbox.runtime import RuntimeInfo, RuntimeProbeError, describe_runtime
from swarm_evo.sandbox.workdir import prepare_workdir

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DeviceAllocator",
    "DockerSandbox",
    "ExecutionResult",
    "GpuSpec",
    "LocalSandbox",
    "RuntimeInfo",
    "RuntimeProbeError",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailableError",
    "classify_failure",
    "describe_runtime",
    "parse_gpus",
    "prepare_workdir",
    "read_bounded",
    "scrub_env",
]
