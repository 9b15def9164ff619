"""What the sandbox actually offers a program: Python, packages, CPUs, memory, GPUs.

Prompts tell the model which packages it may import and on which device its program runs
(``device_info`` and ``packages`` in the templates). Those facts must come from the runtime
that executes the programs (the Docker image actually used, or the local interpreter), not
from the orchestrating process, so :func:`describe_runtime` runs :data:`PROBE_PROGRAM` through
the sandbox itself, with the same limits and GPU request as every execution. For Docker this
doubles as the preflight check: a missing image, a dead daemon or a host without the NVIDIA
runtime fails here, before any step.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from swarm_evo.sandbox.confinement import describe_confinement, is_confined

PACKAGES = ("numpy", "pandas", "scikit-learn", "scipy", "lightgbm", "xgboost", "catboost", "optuna",
            "pillow", "scikit-image", "torch", "torchvision", "timm")
"""Packages reported to the model when the runtime has them (distribution names, as pip lists them)."""

DISTRIBUTION_ALIASES = {"xgboost": ("xgboost", "xgboost-cpu")}
"""Distributions installed under another name: ``xgboost-cpu`` is imported as ``xgboost``."""

PROBE_MARKER = "SWARM_EVO_RUNTIME="

PROBE_PROGRAM = r'''
import json, os, platform, shutil, subprocess, sys
from importlib import metadata

PACKAGES = %(packages)r
ALIASES = %(aliases)r
packages = {}
for name in PACKAGES:
    for dist in ALIASES.get(name, (name,)):
        try:
            packages[name] = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            pass

def cgroup_memory_mb():
    # the program's own cgroup first (the local backend's per-execution cgroup), then the root of the mount (a container)
    own = {}
    try:
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.rstrip("\n").split(":", 2)
            own["2" if controllers == "" else ("1" if "memory" in controllers.split(",") else "")] = path.strip("/")
    except OSError:
        pass
    paths = []
    for version, top, name in (("1", "/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("2", "/sys/fs/cgroup", "memory.max")):
        parts = own.get(version, "").split("/") if own.get(version) else []
        # a container shows its own cgroup as the mount's root: try the path's tails too
        paths += [os.path.join(top, *parts[i:], name) for i in range(len(parts) + 1)]
    for path in paths:
        try:
            raw = open(path).read().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:
            return int(raw) // (1024 * 1024)
    return None

def cgroup_cpus():
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read())
        period = int(open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read())
        if quota > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None

gpus = []
if shutil.which("nvidia-smi"):
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout
        gpus = [line.strip() for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass

print("%(marker)s" + json.dumps({
    "python": platform.python_version(),
    "executable": sys.executable,
    "machine": platform.machine(),
    "cores": len(os.sched_getaffinity(0)),
    "cpu_limit": cgroup_cpus(),
    "memory_limit_mb": cgroup_memory_mb(),
    "gpus": gpus,
    "packages": packages,
}))
''' % {"packages": PACKAGES, "aliases": DISTRIBUTION_ALIASES, "marker": PROBE_MARKER}
"""A program that prints one ``SWARM_EVO_RUNTIME={json}`` line describing its runtime."""


class RuntimeProbeError(RuntimeError):
    """The probe program did not run or printed nothing usable."""


class RuntimeInfo(BaseModel):
    """The runtime a sandbox gives programs (from :data:`PROBE_PROGRAM`).

    Fields: ``python`` version; ``executable`` (the interpreter's path as the program sees it); ``machine`` (e.g. ``x86_64``); ``cores`` visible; ``cpu_limit``
    (CPUs of a cgroup quota, or None); ``memory_limit_mb`` (cgroup limit, or None);
    ``gpus`` (``"name, memory"`` per GPU from nvidia-smi); ``packages`` (name -> version);
    ``confinement`` (what the sandbox confines, :func:`~swarm_evo.sandbox.confinement.describe_confinement`,
    set by :func:`describe_runtime`) and ``confined`` (False: programs ran unconfined,
    ``sandbox.allow_unconfined``).
    """

    model_config = ConfigDict(extra="ignore")

    python: str
    executable: str = ""
    machine: str = ""
    cores: int = 1
    cpu_limit: float | None = None
    memory_limit_mb: int | None = None
    gpus: list[str] = []
    packages: dict[str, str] = {}
    confinement: str = ""
    confined: bool = True

    @property
    def device(self) -> str:
        """One line for prompts, e.g. ``"1 NVIDIA A100 (80 GB); 4 CPUs; 16384 MB memory"``."""
        cpus = self.cpu_limit if self.cpu_limit is not None else self.cores
        parts = [f"{cpus:g} CPU{'s' if cpus != 1 else ''} ({self.machine or 'unknown'})"]
        if self.memory_limit_mb:
            parts.append(f"{self.memory_limit_mb} MB memory limit")
        if self.gpus:
            parts.insert(0, f"{len(self.gpus)} GPU{'s' if len(self.gpus) > 1 else ''}: " + "; ".join(self.gpus))
        else:
            parts.insert(0, "CPU only")
        return ", ".join(parts)

    @property
    def package_list(self) -> str:
        """``"numpy==2.4.6, pandas==2.3.3, ..."`` in :data:`PACKAGES` order."""
        return ", ".join(f"{name}=={self.packages[name]}" for name in PACKAGES if name in self.packages)


def parse_probe_output(stdout: str) -> RuntimeInfo:
    """The :class:`RuntimeInfo` from the probe's stdout.

    Raises:
        RuntimeProbeError: no ``SWARM_EVO_RUNTIME=`` line, or it is not valid JSON.
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            try:
                return RuntimeInfo.model_validate(json.loads(line[len(PROBE_MARKER):]))
            except ValueError as exc:
                raise RuntimeProbeError(f"unreadable runtime probe output: {exc}") from None
    raise RuntimeProbeError("the runtime probe printed no SWARM_EVO_RUNTIME line")


def describe_runtime(sandbox, timeout: float = 120.0) -> RuntimeInfo:
    """Run :data:`PROBE_PROGRAM` in ``sandbox`` (any :class:`~swarm_evo.sandbox.Sandbox`).

    Uses a throw-away work directory and an empty public directory under the system temp dir.

    Raises:
        SandboxError (or a subclass): the sandbox itself failed (daemon, image, GPU runtime),
            or cannot confine programs (``SandboxUnavailableError``, unless ``sandbox.allow_unconfined``).
        RuntimeProbeError: the program ran but failed or printed nothing usable; the message
            holds the end of its output.
    """
    with tempfile.TemporaryDirectory(prefix="swarm-evo-probe-") as tmp:
        workdir = Path(tmp) / "probe"
        public = Path(tmp) / "public"
        public.mkdir()
        result = sandbox.execute(PROBE_PROGRAM, workdir, public, timeout)
    if not result.ok:
        raise RuntimeProbeError(
            f"the runtime probe failed ({result.exc_type}: {result.exc_info}); output:\n{result.term_out[-2000:]}"
        )
    info = parse_probe_output(result.stdout)
    return info.model_copy(update={"confinement": describe_confinement(sandbox), "confined": is_confined(sandbox)})
