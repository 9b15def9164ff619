"""What a backend confines (issue 32): the line ``swarm-evo run`` prints next to the sandbox line.

Modes of the local backend (``LocalSandbox.last_mode``, else predicted for this process):

* ``namespaces``: the orchestrator is root; programs run as nobody in PID, mount, IPC and
  network namespaces, in a root file system made from an allow-list (:mod:`.supervisor_root`);
* ``userns``: an ordinary user, the same inside a user namespace (programs keep the user's uid);
* ``subreaper``: no namespaces (``isolate=False``, or the kernel refuses them and
  ``sandbox.allow_unconfined`` is true): programs run as the orchestrator's user and see and
  reach what it does. Without ``allow_unconfined`` such a setup refuses to run programs
  (:func:`cannot_confine`, issue 42).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from swarm_evo.sandbox.cgroup_home import cgroup_home

ALLOW_LIST = "sees only input (read-only), its node directory, the interpreter and /usr, /etc, /lib*, /sys"
NOT_CONFINED = ("NOT confined (sandbox.allow_unconfined): programs can read the competition's answers and every "
                "host file their user can, and reach the network and the host's services (the Prefect API)")


def cannot_confine(why: str) -> str:
    """The refusal when the local backend cannot confine programs (``why``: what failed), naming the fixes."""
    return (f"the local sandbox cannot confine programs here ({why}): they would read the competition's answers "
            "and every host file, and reach the network and the Prefect API. Run as root or where user namespaces "
            "are allowed, give the flow's container CAP_SYS_ADMIN (prefect.yaml, docker-gpu), use the Docker "
            "backend (sandbox.backend: docker, --executor docker), or accept it: sandbox.allow_unconfined: true")


@functools.lru_cache(maxsize=1)
def user_namespaces_work() -> bool:
    """Whether this (non-root) user may create a user namespace: one ``unshare`` in a child
    process (the kernel's knobs differ by distribution: ``kernel.unprivileged_userns_clone``,
    ``user.max_user_namespaces``, AppArmor's ``apparmor_restrict_unprivileged_userns``)."""
    code = ("import ctypes,sys; libc=ctypes.CDLL(None, use_errno=True); "
            "sys.exit(0 if libc.unshare(0x10000000 | 0x00020000) == 0 else 1)")
    try:
        return subprocess.run([sys.executable, "-I", "-S", "-c", code], timeout=30, check=False,
                              stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def local_mode(isolate: bool = True) -> str:
    """The mode the local backend will use in this process: ``namespaces``, ``userns`` or
    ``subreaper`` (module docstring)."""
    if not isolate:
        return "subreaper"
    if os.geteuid() == 0:
        return "namespaces"
    return "userns" if user_namespaces_work() else "subreaper"


def is_confined(sandbox) -> bool:
    """False when programs of ``sandbox`` run unconfined: the backend's own ``confined`` (the
    local backend's ``subreaper`` mode is not), else the local rule for this process."""
    confined = getattr(sandbox, "confined", None)
    if confined is not None:
        return bool(confined)
    return local_mode(getattr(sandbox, "isolate", True)) != "subreaper"


def describe_memory(sandbox) -> str:
    """How the memory limit of a local ``sandbox`` applies: per execution (a memory cgroup:
    :mod:`.cgroup_home`) or per process (``RLIMIT_DATA``: no cgroup here)."""
    limit = getattr(sandbox, "memory_limit_mb", None)
    home = cgroup_home()
    if isinstance(home, str):
        return f"{limit} MiB per process (RLIMIT_DATA; no memory cgroup: {home})"
    return f"{limit} MiB per execution, scratch files included (cgroup v{home.version})"


def describe_processes(sandbox) -> str:
    """How the process limit of a local ``sandbox`` applies: per execution (a pids cgroup:
    :mod:`.pids_cgroup`) or per user (``RLIMIT_NPROC``: no pids cgroup here)."""
    limit = getattr(sandbox, "pids_limit", None)
    home = cgroup_home("pids")
    if isinstance(home, str):
        return f"{limit} per user (RLIMIT_NPROC, shared by the programs running at once; no pids cgroup: {home})"
    return f"{limit} per execution (cgroup v{home.version})"


def network_text(sandbox) -> str:
    """The confinement line's network: ``none``, or the host's with ``sandbox.network``."""
    return "the host's (sandbox.network)" if getattr(sandbox, "network", False) else "none"


def describe_local(sandbox) -> str:
    """The confinement line of a local ``sandbox`` (its ``last_mode``, else predicted for this process)."""
    network = network_text(sandbox)
    memory = f"; memory: {describe_memory(sandbox)}; processes: {describe_processes(sandbox)}"
    mode = getattr(sandbox, "last_mode", None) or local_mode(getattr(sandbox, "isolate", True))
    if mode == "namespaces":
        return f"namespaces (root, programs run as nobody): {ALLOW_LIST}; network: {network}{memory}"
    if mode == "userns":
        return f"user namespace (programs run as uid {os.getuid()}): {ALLOW_LIST}; network: {network}{memory}"
    return NOT_CONFINED + memory


def describe_confinement(sandbox) -> str:
    """One line: what programs of ``sandbox`` can see and reach, and how their memory is bounded,
    e.g. ``namespaces (root, programs run as nobody): sees only ...; network: none; memory: 4096
    MiB per execution, ...``: the backend's own ``describe_confinement()``, else the local line."""
    own = getattr(sandbox, "describe_confinement", None)
    return own() if callable(own) else describe_local(sandbox)
