"""Local-process sandbox backend: a fresh Python process per execution (SPEC §10).

The program runs as ``python solution.py`` (:meth:`LocalSandbox.command`) with the node
directory as cwd, under a small supervisor (:mod:`swarm_evo.sandbox.supervisor`, run by path
with the sandbox interpreter through :func:`swarm_evo.sandbox.process_runner.run_supervised`,
the one subprocess runner) that enforces the timeout and guarantees that nothing the program
started outlives it:

* **Process tree.** The program runs in its own PID namespace: when it ends, times out, or
  the run process is SIGKILLed, the kernel kills every process it left, daemons included.
* **User, file system, network** (issue 32). As root, the program runs as ``nobody`` (no
  supplementary groups, no new privileges; its node directory is handed over to nobody for the
  execution and taken back after); as an ordinary user, in a user namespace with the user's
  own uid. Either way in a root file system made from an allow-list
  (:mod:`~swarm_evo.sandbox.supervisor_root`): its node directory, the public data behind
  ``input`` (read-only), the interpreter's and the system directories (read-only), private
  size-limited ``/tmp``, ``/var/tmp``, ``/dev/shm``; ``HOME`` is ``working/.home``. The
  answers, other nodes, the journal, home directories and caches are not there. Its network
  namespace has only a loopback of its own (``network=True``: the host's). As root the public
  data must be readable by others. **Where the namespaces cannot be made** (a kernel that
  refuses user namespaces, a container without CAP_SYS_ADMIN) the execution is refused with
  :class:`~swarm_evo.sandbox.base.SandboxUnavailableError` (issue 42) unless
  ``allow_unconfined``: then the program runs as the orchestrator's user with its files and
  network, under a subreaper, with one warning per run.
* **Limits.** ``pids_limit`` processes and threads per execution: a pids cgroup per execution
  where the host has one (:mod:`~swarm_evo.sandbox.pids_cgroup`; a fork bomb gets EAGAIN, a
  program beside it does not), else ``RLIMIT_NPROC`` (the processes the program's user already
  has plus ``pids_limit``, shared by the programs running at once; not enforced for root); memory
  (``memory_limit_mb``, default host memory / parallel workers): a memory cgroup per execution
  where the host has one (:mod:`~swarm_evo.sandbox.memory_cgroup`: its processes and its
  ``/tmp``, ``/var/tmp``, ``/dev/shm`` files together; the first OOM kill stops the whole
  execution, ``MemoryError``), else only ``RLIMIT_DATA`` per process, with one warning per run
  (also set with a cgroup: one process past it gets Python's ``MemoryError``; ``RLIMIT_DATA``
  rather than ``RLIMIT_AS``: thread stacks and allocator arenas of numerical libraries count
  fully against address space); no core dumps; ``oom_score_adj`` 1000; ``disk_limit_mb``: no
  file larger (``RLIMIT_FSIZE``) and no more in the node directory (``DiskLimitError``,
  :mod:`swarm_evo.sandbox.disk_limit`).
* **Output.** stdout and stderr are pipes read by the run process: each keeps at most
  ``max_log_bytes`` (head, ``[... N bytes truncated ...]``, tail) in ``stdout.txt`` /
  ``stderr.txt``, written after the run without following links the program planted.
* **Environment.** Scrubbed of secrets (:func:`~swarm_evo.sandbox.env_scrub.scrub_env`).
* **GPUs** (issue 52). Without ``gpus`` a program's ``/dev`` holds no ``/dev/nvidia*`` node (and,
  unconfined, ``CUDA_VISIBLE_DEVICES`` is empty). With ``gpus`` each execution holds one device
  group of the sandbox's :class:`~swarm_evo.sandbox.gpu_slots.DeviceAllocator` (``slots_per_gpu``
  executions share a group): ``CUDA_VISIBLE_DEVICES`` names it and only its
  ``/dev/nvidia<N>`` nodes and the control nodes are bound into the program's root. GPU memory
  is not bounded: executions sharing a GPU share its memory.

``exec_time`` is the program's wall time measured by the supervisor from just before its fork
to its exit. As root, when nobody cannot reach the interpreter or the node directory (no
mount namespace), programs keep running as root.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from swarm_evo.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    LOG_FILE_FACTOR,
    NOBODY_GID,
    NOBODY_UID,
    SOLUTION_FILE,
    WORKING_DIR,
    ExecutionResult,
    SandboxError,
    SandboxUnavailableError,
    default_memory_limit_mb,
)
from swarm_evo.sandbox.confinement import describe_local, local_mode
from swarm_evo.sandbox.env_scrub import scrub_env
from swarm_evo.sandbox.gpus import GpuSpec
from swarm_evo.sandbox.gpu_slots import DeviceGroup, as_groups, shared_allocator
from swarm_evo.sandbox.failure import result_from_captures
from swarm_evo.sandbox.process_runner import run_supervised
from swarm_evo.sandbox.workdir import (
    hand_over_workdir,
    prepare_workdir,
    remove_escaping_links,
    take_back_workdir,
)
from swarm_evo.sandbox.disk_limit import DEFAULT_DISK_LIMIT_MB, classify_disk_limit
from swarm_evo.sandbox.memory_cgroup import ExecutionMemory
from swarm_evo.sandbox.pids_cgroup import ExecutionPids
from swarm_evo.sandbox.preload import DEFAULT_PRELOAD, imports_any

log = logging.getLogger(__name__)

SUPERVISOR_NAMESPACE = Path(__file__).with_name("supervisor_namespace.py")
"""The supervisor's helpers (standard library only): run by path, they print an interpreter's paths."""

HOME_DIR = ".home"
"""``HOME`` of a program run as nobody: ``working/.home`` (created per execution)."""

_warned: set[str] = set()


def _warn_once(warning: str) -> None:
    """Log ``warning`` once per process (a run is one process)."""
    if warning not in _warned:
        _warned.add(warning)
        log.warning("local sandbox: %s", warning)


def process_count(uid: int) -> int:
    """Processes and threads (tasks) whose real uid is ``uid`` right now (``/proc``)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields.get("Threads", "1").strip() or 1)
        except (OSError, KeyError, ValueError):
            continue
    return count


@functools.lru_cache(maxsize=8)
def interpreter_paths(python: str) -> tuple[str, ...]:
    """What ``python`` needs to run a program (its prefixes and ``sys.path`` under ``-I``:
    ``supervisor_namespace.python_paths`` run by that interpreter), asked once per interpreter.
    The supervisor gets them in its config and starts with ``-S``: importing ``site`` (and the
    ``.pth`` files of an editable install) took ≈ 15 of its ≈ 45 ms per execution (issue 16).

    Raises:
        SandboxError: the interpreter cannot be started or fails to answer.
    """
    try:
        done = subprocess.run([python, "-I", str(SUPERVISOR_NAMESPACE)], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"cannot start {python!r}: {exc}") from exc
    if done.returncode != 0:
        raise SandboxError(f"cannot start {python!r}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return tuple(json.loads(done.stdout))


class LocalSandbox:
    """Run programs as local processes (the embedded default backend of SPEC §10).

    Args:
        max_output_bytes: cap on each of stdout, stderr and term_out kept in the result (bytes).
        memory_limit_mb: memory (MiB) of one execution, its processes and scratch files together
            (a memory cgroup; without one ``RLIMIT_DATA`` per process); default 80 % of host
            memory / ``parallel_workers`` (the Docker backend's rule). Past it: ``MemoryError``.
        python: interpreter that runs the program and the supervisor (default: the current).
        num_threads: BLAS/OpenMP thread counts exported to the program (default: CPU count;
            variables already set in the environment are kept).
        extra_env: variables added after scrubbing.
        pids_limit: processes and threads one execution may have (a pids cgroup per execution,
            :mod:`.pids_cgroup`; config ``sandbox.pids_limit``); without a pids cgroup, what the
            program's user may add to those it already has (``RLIMIT_NPROC``; not for root).
        parallel_workers: executions at once, for the default memory limit.
        max_log_bytes: cap of each of ``stdout.txt``/``stderr.txt`` on disk (bytes; default
            ``10 * max_output_bytes``, at least ``max_output_bytes``).
        tmp_size_mb, shm_size_mb: sizes of the private ``/tmp`` (and ``/var/tmp``) and
            ``/dev/shm`` tmpfs (namespace modes; they count against the memory limit with a cgroup).
        isolate: run programs as nobody in namespaces when root (default True; False keeps the
            old behaviour: the caller's user, process group and subreaper only).
        disk_limit_mb: space (MiB) the program may fill in its node directory, and the largest
            file it may write (``RLIMIT_FSIZE``); past it the program is stopped with
            ``DiskLimitError`` (:mod:`swarm_evo.sandbox.disk_limit`).
        network: keep the host's network (no network namespace; ``sandbox.network``). By
            default a program has a loopback of its own and reaches nothing of the host's.
        allow_unconfined: where the namespaces cannot be made, run programs unconfined (with a
            warning) instead of refusing (``sandbox.allow_unconfined``; default False).
        preload: modules imported once by a program server of ``python`` that each execution is
            forked from (:mod:`swarm_evo.sandbox.preload`; ``sandbox.preload``, default
            :data:`~swarm_evo.sandbox.preload.DEFAULT_PRELOAD`), for programs that import one of
            them; other programs, and every program when empty, start a new interpreter. Only
            for the default :meth:`command`.
        gpus: a GPU spec (:func:`~swarm_evo.sandbox.gpus.parse_gpus`'s forms: the host's GPUs
            discovered, :func:`~swarm_evo.sandbox.gpu_slots.device_groups`) or device groups already
            formed; each execution gets one group (module docstring). None: no GPU.
        slots_per_gpu: executions that share one device group at once (``sandbox.slots_per_gpu``).

    Raises:
        ValueError: ``max_output_bytes`` < 1024, ``slots_per_gpu`` < 1, not a GPU spec.
        SandboxUnavailableError: the GPUs given are not on this host, or a GPU's device node is
            unknown (the message names the fix).

    Thread-safe: parallel ``execute`` calls with different workdirs do not interfere; each
    holds its device group until it returns (``gpu_limit`` is None: nothing host-wide to hold).
    """

    gpu_limit: str | None = None
    last_mode: str | None = None
    """The supervisor mode of the latest execution: ``namespaces`` (root), ``userns`` (a user
    namespace), ``subreaper`` (not confined), or None before the first."""

    def __init__(
        self,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        memory_limit_mb: int | None = None,
        python: str = sys.executable,
        num_threads: int | None = None,
        extra_env: Mapping[str, str] | None = None,
        pids_limit: int = 512,
        parallel_workers: int = 1,
        max_log_bytes: int | None = None,
        tmp_size_mb: int = 512,
        shm_size_mb: int = 1024,
        isolate: bool = True,
        disk_limit_mb: int = DEFAULT_DISK_LIMIT_MB,
        network: bool = False,
        allow_unconfined: bool = False,
        preload: tuple[str, ...] | list[str] = DEFAULT_PRELOAD,
        gpus: GpuSpec | list[DeviceGroup] = None,
        slots_per_gpu: int = 1,
    ) -> None:
        if max_output_bytes < 1024:
            raise ValueError("max_output_bytes must be at least 1024")
        self.max_output_bytes = int(max_output_bytes)
        self.max_log_bytes = max(self.max_output_bytes, int(max_log_bytes or LOG_FILE_FACTOR * self.max_output_bytes))
        self.memory_limit_mb = int(memory_limit_mb or default_memory_limit_mb(parallel_workers))
        self.python = python
        self.num_threads = num_threads
        self.extra_env = dict(extra_env or {})
        self.pids_limit = int(pids_limit)
        self.tmp_size_mb = int(tmp_size_mb)
        self.shm_size_mb = int(shm_size_mb)
        self.isolate = bool(isolate)
        self.disk_limit_mb = int(disk_limit_mb)
        self.network = bool(network)
        self.allow_unconfined = bool(allow_unconfined)
        self.preload = tuple(preload)
        self.gpu_groups = as_groups(gpus)
        for group in self.gpu_groups:  # an unknown device node is an error now, not at the first execution
            group.device_nodes()
        self.devices = shared_allocator(self.gpu_groups, slots_per_gpu)

    def command(self) -> list[str]:
        """The argv of the program itself (run by the supervisor in the node directory)."""
        return [self.python, SOLUTION_FILE]

    def program_user(self) -> tuple[int, int] | None:
        """``(uid, gid)`` programs run as: nobody when we are root and isolate, else None (ours)."""
        return (NOBODY_UID, NOBODY_GID) if self.isolate and os.geteuid() == 0 else None

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` as ``workdir/solution.py`` for at most ``timeout`` seconds.

        Creates ``input`` (symlink to ``public_dir``; an existing ``input`` is kept),
        ``working/`` and ``submission/``; writes ``stdout.txt``/``stderr.txt`` (bounded) in
        ``workdir`` once the program and all its processes are gone. At the timeout the
        program gets SIGKILL (SIGTERM is not asked for); whatever it leaves is killed too.

        Raises:
            SandboxError: the interpreter cannot be started, the workdir prepared, or the
                supervisor failed (namespace setup, exec of the program).
        """
        workdir = Path(workdir).resolve()
        prepare_workdir(code, workdir, public_dir)
        env = scrub_env(num_threads=self.num_threads, extra=self.extra_env)
        user = self.program_user()
        owner = None
        if self.isolate:  # the caller's home is out of the program's sight
            home = workdir / WORKING_DIR / HOME_DIR
            home.mkdir(exist_ok=True)
            env["HOME"] = str(home)
        if user is not None:
            try:
                owner = hand_over_workdir(workdir, *user)
            except OSError as exc:
                raise SandboxError(f"cannot hand {workdir} over to uid {user[0]}: {exc}") from exc
        try:
            preload = self.preload if self.command() == [self.python, SOLUTION_FILE] and imports_any(
                code, self.preload) else ()
            with self.devices.lease() as gpus:
                return self._run(workdir, Path(public_dir), env, user, float(timeout), owner, preload, gpus)
        finally:
            if owner is not None:
                take_back_workdir(workdir, owner, user[0])
            remove_escaping_links(workdir, public_dir)

    def _config(self, workdir: Path, public_dir: Path, user, timeout: float,
                python_paths: tuple[str, ...], memory: ExecutionMemory, pids: ExecutionPids,
                gpus: DeviceGroup | None = None) -> dict:
        """The supervisor's config (:mod:`.supervisor`; :func:`.process_runner.run_supervised` adds ``status_fd``),
        with the execution's device group ``gpus`` (:meth:`gpu_config`)."""
        uid = user[0] if user is not None else os.getuid()
        return {
            **self.gpu_config(gpus),
            "argv": self.command(),
            "workdir": str(workdir),
            "timeout": timeout,
            "parent_pid": os.getpid(),
            "uid": user[0] if user is not None else None,
            "gid": user[1] if user is not None else None,
            "namespaces": self.isolate,
            "network": self.network,
            "allow_unconfined": self.allow_unconfined,
            "memory_bytes": self.memory_limit_mb * 1024 * 1024,  # RLIMIT_DATA per process (the cgroup: all)
            "cgroup_procs": [f for f in (memory.procs_file, pids.procs_file) if f],
            "nproc": process_count(uid) + self.pids_limit if uid != 0 and pids.rlimit_nproc else None,
            "fsize_bytes": self.disk_limit_mb * 1024 * 1024,
            "readonly": [str(Path(public_dir).resolve())] if public_dir is not None else [],
            "tmp_size_mb": self.tmp_size_mb,
            "shm_size_mb": self.shm_size_mb,
            "python_paths": list(python_paths),
        }

    @staticmethod
    def gpu_config(gpus: DeviceGroup | None) -> dict:
        """The supervisor's GPU keys for an execution holding the device group ``gpus`` (or none):
        ``env_extra`` (its ``CUDA_VISIBLE_DEVICES``, applied after the fork, so the program server's
        key is not split by it), ``env_unconfined`` (what replaces it where every host GPU is
        visible: the ``subreaper`` mode), ``gpu_devices`` (the nodes bound into its ``/dev``) and
        ``gpu_buses`` (the driver's GPU directories its ``/proc`` keeps; None: all).

        Raises:
            SandboxUnavailableError: a GPU of the group has no known device node.
        """
        if gpus is None:
            return {"env_extra": {}, "env_unconfined": {"CUDA_VISIBLE_DEVICES": ""}, "gpu_devices": [],
                    "gpu_buses": []}
        return {"env_extra": gpus.environment(confined=True), "env_unconfined": gpus.environment(confined=False),
                "gpu_devices": gpus.device_nodes(), "gpu_buses": gpus.buses()}

    def _run(self, workdir: Path, public_dir: Path, env: dict, user, timeout: float, owner,
             preload: tuple[str, ...], gpus: DeviceGroup | None = None) -> ExecutionResult:
        python_paths = interpreter_paths(self.python)  # SandboxError here, before any descriptor is open
        memory = ExecutionMemory(self.memory_limit_mb, _warn_once)  # SandboxError: a cgroup could not be made
        try:
            pids = ExecutionPids(self.pids_limit, _warn_once, memory)
            try:
                return self._supervise(workdir, public_dir, env, user, timeout, owner, python_paths, memory, pids,
                                       preload, gpus)
            finally:
                pids.close()
        finally:
            memory.close()

    def _supervise(self, workdir: Path, public_dir: Path, env: dict, user, timeout: float, owner,
                   python_paths: tuple[str, ...], memory: ExecutionMemory, pids: ExecutionPids,
                   preload: tuple[str, ...], gpus: DeviceGroup | None = None) -> ExecutionResult:
        cfg = self._config(workdir, public_dir, user, timeout, python_paths, memory, pids, gpus)
        run = run_supervised(self.python, cfg, workdir, env, timeout, self.max_log_bytes,
                             self.disk_limit_mb * 1024 * 1024, memory, preload)
        report = run.report
        self.last_mode = report.get("mode")
        for warning in report.get("warnings") or []:
            _warn_once(warning)
        status = report.get("status")
        exit_code = os.waitstatus_to_exitcode(status) if status is not None else None
        result = result_from_captures(
            workdir,
            run.out,
            run.err,
            exit_code=exit_code,
            exec_time=float(report.get("exec_time") or 0.0),
            timed_out=bool(report.get("timed_out")),
            timeout=timeout,
            max_output_bytes=self.max_output_bytes,
            owner=owner,
        )
        # a stop by the watcher before the timeout is not a timeout (the supervisor's timer starts later)
        return pids.classify(memory.classify(classify_disk_limit(result, self.disk_limit_mb, run.watcher,
                                                                 deadline=run.started + timeout)))

    @property
    def confined(self) -> bool:
        """False when programs run unconfined (the ``subreaper`` mode; :mod:`.confinement`)."""
        return (self.last_mode or local_mode(self.isolate)) != "subreaper"

    def describe_confinement(self) -> str:
        """What programs see and reach, and how their memory is bounded (:func:`.confinement.describe_local`),
        and their GPUs when the sandbox has device groups (:meth:`.gpu_slots.DeviceAllocator.describe`)."""
        gpus = self.devices.describe()
        return describe_local(self) + (f"; {gpus}" if gpus else "")
