"""Docker sandbox backend: one container per execution, GPUs passed through (SPEC §10).

Each execution creates a container from the sandbox image, starts it, waits with a timeout,
kills it at the timeout, collects its logs and removes it in ``finally`` (``containers.run``
would leave a container behind when ``start`` fails). The container:

* has no network (``network_mode="none"``: loopback only), or the host's (``network_mode="host"``)
  with ``network=True`` (``sandbox.network``: programs that must download; a warning per run);
* has memory (swap included), CPU, pids and ``/dev/shm`` limits;
* runs as a non-root user with every capability dropped, ``no-new-privileges``, a read-only
  root filesystem and a small ``/tmp`` tmpfs; an init process reaps children; anonymous
  volumes an image declares (``VOLUME``) are removed with the container (they are not watched);
* sees the node directory read-write at ``/workspace`` (its cwd) and the competition's
  public data read-only at ``/workspace/input``; it may fill at most ``disk_limit_mb`` there
  (``fsize`` ulimit per file, a :class:`~swarm_evo.sandbox.disk_limit.DiskWatcher` over the
  directory kills the container past it: ``DiskLimitError``);
* gets no host environment: only what a program needs (thread counts, ``HOME=/tmp``,
  ``PYTHONUNBUFFERED``, ``MPLBACKEND``) — API keys never reach it;
* gets its GPUs as a ``DeviceRequest`` (``docker run --gpus``) of one device group, leased per
  execution (:mod:`~swarm_evo.sandbox.gpus`: ``sandbox.slots_per_gpu`` containers share a group),
  with ``NVIDIA_VISIBLE_DEVICES`` and ``CUDA_VISIBLE_DEVICES`` naming it.

stdout and stderr are read live from an attach stream into the local backend's bounded
captures (:class:`~swarm_evo.sandbox.output.OutputCapture`: at most ``max_log_bytes`` each on
disk, head + ``[... N bytes truncated ...]`` + tail, exact counts); the json-file log driver
keeps its own copy capped (``docker logs``; the fallback when attaching fails). exc_type is
classified by the same :func:`~swarm_evo.sandbox.failure.classify_failure` (exit 137 with
``OOMKilled`` -> MemoryError, timeout -> TimeoutError).

Every container carries :data:`LABEL` (the node directory's name) and :data:`WORKDIR_LABEL`
(its absolute path): a run process that is SIGKILLed mid-execution never reaches its
``finally``, and :func:`~swarm_evo.sandbox.docker_leftovers.remove_stray_containers` removes what it left on resume.
"""

from __future__ import annotations

import os
import secrets
import time
from contextlib import closing, suppress
from pathlib import Path

from swarm_evo.sandbox.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    INPUT_DIR,
    LOG_FILE_FACTOR,
    NOBODY_GID,
    NOBODY_UID,
    SOLUTION_FILE,
    ExecutionResult,
    SandboxError,
    SandboxUnavailableError,
    default_memory_limit_mb,
    host_memory_mb,
)
from swarm_evo.sandbox.confinement import network_text
from swarm_evo.sandbox.disk_limit import DEFAULT_DISK_LIMIT_MB, DiskWatcher, classify_disk_limit
from swarm_evo.sandbox.docker_streams import ContainerInit, attach_streams, logs_capture
from swarm_evo.sandbox.env_scrub import scrub_env
from swarm_evo.sandbox.failure import result_from_captures
from swarm_evo.sandbox.gpus import NVIDIA_FIX, GpuSpec, default_limit_name
from swarm_evo.sandbox.gpu_slots import DeviceGroup, as_group, as_groups, shared_allocator
from swarm_evo.sandbox.output import OutputCapture
from swarm_evo.sandbox.workdir import (
    hand_over_workdir,
    mount_point,
    prepare_workdir,
    remove_escaping_links,
    take_back_workdir,
)


DEFAULT_IMAGE = "swarm-evo-sandbox:latest"
"""Built by ``bash deployments/build-sandbox-image-offline.sh`` (or deployments/sandbox.Dockerfile)."""

CONTAINER_WORKDIR = "/workspace"
LABEL = "org.swarm-evo.execution"
"""Label on every container this backend creates (``docker ps -a --filter label=...``); its
value is the node directory's name. (The image's own label, ``org.swarm-evo.sandbox``, is
inherited by every container of the image, including ``docker build`` steps.)"""

WORKDIR_LABEL = "org.swarm-evo.workdir"
"""Label on every container of this backend: the absolute path of its node directory
(:func:`~swarm_evo.sandbox.docker_leftovers.remove_stray_containers` selects by it)."""

NOBODY = f"{NOBODY_UID}:{NOBODY_GID}"
"""User of the program when the orchestrator runs as root (``nobody:nogroup``)."""

__all__ = ["DEFAULT_IMAGE", "LABEL", "WORKDIR_LABEL", "DockerSandbox", "host_memory_mb"]

BUILD_HINT = "build it with `bash deployments/build-sandbox-image-offline.sh {image}` (no registry needed) " \
    "or `docker build -f deployments/sandbox.Dockerfile -t {image} deployments`"


def _docker():
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxUnavailableError("the docker SDK is not installed: pip install docker") from exc
    return docker


class DockerSandbox:
    """Run programs in Docker containers (SPEC §10), reporting the local backend's result.

    Args:
        image: sandbox runtime image (must exist locally; nothing is pulled).
        memory_limit_mb: container memory limit, swap included (MiB).
        cpus: CPU quota of each container (e.g. ``1.5``).
        pids_limit: maximum processes/threads in the container (fork-bomb guard).
        shm_size_mb: size of ``/dev/shm`` (PyTorch DataLoader workers need it).
        tmp_size_mb: size of the ``/tmp`` tmpfs (counts against the memory limit).
        gpus: a GPU spec (:func:`~swarm_evo.sandbox.gpus.parse_gpus`'s forms; ``all``/N are the
            GPUs found on this machine, taken to be the Docker host) or device groups already
            formed (:func:`~swarm_evo.sandbox.gpu_slots.device_groups`).
        slots_per_gpu: containers that share one device group at once (``sandbox.slots_per_gpu``).
        parallel_workers: executions at once, for the default memory and CPU limits.
        num_threads: BLAS/OpenMP threads exported to the program.
        max_output_bytes: cap on each of stdout, stderr and term_out in the result.
        client: a ``docker.DockerClient`` (default ``docker.from_env()``).
        max_log_bytes: cap of each of ``stdout.txt``/``stderr.txt`` on disk (bytes; default
            ``10 * max_output_bytes``).
        disk_limit_mb: space (MiB) the program may fill in its node directory, and the largest
            file it may write (``fsize`` ulimit); past it the container is killed and the result
            is ``DiskLimitError`` (:mod:`swarm_evo.sandbox.disk_limit`).
        network: give containers the host's network (``network_mode="host"``) instead of none.

    Raises:
        SandboxUnavailableError: the Docker daemon does not answer (message names the fix).
    """

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        memory_limit_mb: int | None = None,
        cpus: float | None = None,
        pids_limit: int = 512,
        shm_size_mb: int = 1024,
        tmp_size_mb: int = 512,
        gpus: GpuSpec | list[DeviceGroup] = None,
        parallel_workers: int = 1,
        slots_per_gpu: int = 1,
        num_threads: int | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        client=None,
        max_log_bytes: int | None = None,
        disk_limit_mb: int = DEFAULT_DISK_LIMIT_MB,
        network: bool = False,
    ) -> None:
        if max_output_bytes < 1024:
            raise ValueError("max_output_bytes must be at least 1024")
        self.network = bool(network)
        docker = _docker()
        if client is None:
            try:
                client = docker.from_env()
                client.ping()
            except docker.errors.DockerException as exc:
                raise SandboxUnavailableError(
                    f"cannot reach the Docker daemon ({exc}): start it (`dockerd &`, or "
                    "`systemctl start docker`), set DOCKER_HOST, or use --executor local"
                ) from None
        self.client = client
        self.image = image
        workers = max(1, parallel_workers)
        self.memory_limit_mb = int(memory_limit_mb or default_memory_limit_mb(workers))
        self.cpus = float(cpus or max(0.5, (os.cpu_count() or 1) / workers))
        self.pids_limit = int(pids_limit)
        self.shm_size_mb = int(shm_size_mb)
        self.tmp_size_mb = int(tmp_size_mb)
        self.gpu_groups = as_groups(gpus, docker=True)
        self.devices = shared_allocator(self.gpu_groups, slots_per_gpu)
        self.num_threads = num_threads
        self.max_output_bytes = int(max_output_bytes)
        self.max_log_bytes = max(self.max_output_bytes, int(max_log_bytes or LOG_FILE_FACTOR * self.max_output_bytes))
        self.disk_limit_mb = int(disk_limit_mb)
        self._check_image()

    # ------------------------------------------------------------------ setup

    def _check_image(self) -> None:
        docker = _docker()
        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailableError(
                f"sandbox image '{self.image}' not found on the Docker host: " + BUILD_HINT.format(image=self.image)
            ) from None
        except docker.errors.DockerException as exc:
            raise SandboxUnavailableError(f"cannot inspect image '{self.image}': {exc}") from None

    confined = True
    """Programs always run confined, in a container (:func:`~swarm_evo.sandbox.confinement.is_confined`)."""

    def describe_confinement(self) -> str:
        """The confinement line (:func:`~swarm_evo.sandbox.confinement.describe_confinement`)."""
        gpus = self.devices.describe()
        return (f"container: sees only /workspace (its node directory) and input (read-only); network: "
                f"{network_text(self)}; memory: {self.memory_limit_mb} MiB per container" + (f"; {gpus}" if gpus else ""))

    @property
    def gpu_limit(self) -> str | None:
        """Global concurrency limit to hold around an execution, or None: only when the GPUs are
        Docker's choice (``all``/N and no GPU visible from here: one group shared by every
        container of the Docker host, :attr:`~swarm_evo.sandbox.gpu_slots.DeviceGroup.whole`)."""
        return default_limit_name() if any(g.whole is not None for g in self.gpu_groups) else None

    def user(self) -> str:
        """``uid:gid`` of the program: the caller's own ids, or nobody when the caller is root."""
        uid, gid = os.getuid(), os.getgid()
        return NOBODY if uid == 0 else f"{uid}:{gid}"

    def environment(self, gpus: DeviceGroup | None = None) -> dict[str, str]:
        """The whole environment of the program: nothing from the host (SPEC §10); with a device
        group its ``CUDA_VISIBLE_DEVICES``/``NVIDIA_VISIBLE_DEVICES`` (:meth:`DeviceGroup.environment`)."""
        extra = {"HOME": "/tmp", **(gpus.environment(confined=True, docker=True) if gpus is not None else {})}
        return scrub_env({}, num_threads=self.num_threads, extra=extra)

    def container_kwargs(self, workdir: Path, public_dir: Path, gpus: DeviceGroup | GpuSpec, name: str) -> dict:
        """Arguments of ``client.containers.create`` for one execution (see module docstring);
        ``gpus``: its device group (a spec is taken as one group), or None."""
        docker = _docker()
        gpus = as_group(gpus)
        mounts = [
            docker.types.Mount(CONTAINER_WORKDIR, str(workdir), type="bind"),
            docker.types.Mount(
                f"{CONTAINER_WORKDIR}/{INPUT_DIR}", str(Path(public_dir).resolve()), type="bind", read_only=True
            ),
        ]
        request = gpus.request() if gpus is not None else None
        log_cap = max(self.max_log_bytes, 1_000_000)
        return dict(
            image=self.image,
            command=["python", SOLUTION_FILE],
            name=name,
            labels={LABEL: workdir.name, WORKDIR_LABEL: str(workdir)},
            working_dir=CONTAINER_WORKDIR,
            user=self.user(),
            environment=self.environment(gpus),
            network_mode="host" if self.network else "none",
            mem_limit=f"{self.memory_limit_mb}m",
            memswap_limit=f"{self.memory_limit_mb}m",
            nano_cpus=int(self.cpus * 1e9),
            pids_limit=self.pids_limit,
            shm_size=f"{self.shm_size_mb}m",
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.tmp_size_mb}m,mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            # no file past the disk limit (EFBIG; the node directory is watched as a whole)
            ulimits=[docker.types.Ulimit(name="fsize", soft=self.disk_limit_mb * 1024 * 1024,
                                         hard=self.disk_limit_mb * 1024 * 1024)],
            init=True,
            mounts=mounts,
            device_requests=[docker.types.DeviceRequest(**request)]
            if request
            else None,
            log_config=docker.types.LogConfig(
                type="json-file", config={"max-size": str(log_cap), "max-file": "1"}
            ),
            stdin_open=False,
            tty=False,
        )

    def create_container(self, workdir: Path, public_dir: Path, gpus: DeviceGroup | GpuSpec):
        """Create (not start) the container of one execution; the caller removes it.

        Raises:
            SandboxUnavailableError: the image vanished.
            SandboxError: the daemon refused the container.
        """
        docker = _docker()
        name = f"swarm-evo-{Path(workdir).name[:24]}-{secrets.token_hex(3)}"
        try:
            return self.client.containers.create(**self.container_kwargs(Path(workdir), public_dir, gpus, name))
        except docker.errors.ImageNotFound:
            raise SandboxUnavailableError(
                f"sandbox image '{self.image}' not found: " + BUILD_HINT.format(image=self.image)
            ) from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot create a container from '{self.image}': {exc}") from exc

    # ------------------------------------------------------------------ execution

    def execute(self, code: str, workdir: Path, public_dir: Path, timeout: float) -> ExecutionResult:
        """Run ``code`` as ``/workspace/solution.py`` in a fresh container, at most ``timeout`` s.

        The node directory gets ``solution.py``, ``working/``, ``submission/``, an empty
        ``input/`` mount point, and ``stdout.txt``/``stderr.txt`` from the container's logs.
        The container is removed whatever happens (timeout, OOM, interruption).

        Raises:
            SandboxUnavailableError: the image is missing or the host has no NVIDIA runtime for
                the GPU request (the message names the fix).
            SandboxError: the daemon failed otherwise.
        """
        workdir = Path(workdir).resolve()
        prepare_workdir(code, workdir, public_dir, link_input=False)
        mount_point(workdir / INPUT_DIR)
        owner = hand_over_workdir(workdir, NOBODY_UID, NOBODY_GID) if os.getuid() == 0 else None
        try:
            with self.devices.lease() as gpus:
                container = self.create_container(workdir, public_dir, gpus)
                try:
                    return self._run(container, workdir, timeout, gpus, owner)
                finally:
                    with suppress(Exception):
                        container.remove(force=True, v=True)  # anonymous volumes of the image too
        finally:
            if owner is not None:
                take_back_workdir(workdir, owner, NOBODY_UID)
            remove_escaping_links(workdir)

    def _run(self, container, workdir: Path, timeout: float, gpus: DeviceGroup | GpuSpec, owner=None) -> ExecutionResult:
        docker = _docker()
        import requests

        timed_out = False
        out, err = OutputCapture(self.max_log_bytes), OutputCapture(self.max_log_bytes)
        reader = attach_streams(container, out, err)

        init = ContainerInit()

        def stop_at_disk_limit() -> None:
            # SIGKILL from this host first (immediate), then the daemon's kill (~0.1 s, any host)
            if not init.kill():
                init.open(container)  # tripped before the run looked the init up
                init.kill()
            with suppress(Exception):
                container.kill()

        # Made before the start: it measures what the directory holds already. Watching from
        # before the start: the program may write hundreds of MB before start() returns.
        watcher = DiskWatcher(workdir, self.disk_limit_mb * 1024 * 1024, on_exceed=stop_at_disk_limit)
        with closing(init), watcher:
            try:
                container.start()
            except docker.errors.APIError as exc:
                text = str(exc)
                if gpus is not None and ("device driver" in text or "nvidia" in text.lower() or "gpu" in text.lower()):
                    raise SandboxUnavailableError(
                        f"the Docker host cannot give containers GPUs ({as_group(gpus).describe()} requested; "
                        f"daemon said: {exc.explanation or text}): {NVIDIA_FIX}"
                    ) from None
                raise SandboxError(f"cannot start the sandbox container: {exc}") from exc
            start = time.monotonic()
            init.open(container)  # ready before the program can fill much
            try:
                status = container.wait(timeout=max(0.01, float(timeout)))
                exit_code = status.get("StatusCode")
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
                if time.monotonic() - start < float(timeout) - 1:  # the daemon went away, not our timeout
                    with suppress(Exception):
                        container.kill()
                    raise SandboxError(f"lost the Docker daemon while waiting for the program: {exc}") from exc
                timed_out = True
                with suppress(docker.errors.APIError):
                    container.kill()
                exit_code = container.wait(timeout=60).get("StatusCode")
            except BaseException:
                with suppress(Exception):
                    container.kill()
                raise
        exec_time = time.monotonic() - start
        container.reload()
        oom_killed = bool(container.attrs.get("State", {}).get("OOMKilled"))
        if reader is not None:
            reader.join(timeout=30)
        if reader is None or reader.is_alive() or getattr(reader, "failed", False):
            out, err = logs_capture(container, self.max_log_bytes)
        result = result_from_captures(
            workdir,
            out,
            err,
            exit_code=exit_code,
            exec_time=exec_time,
            timed_out=timed_out,
            timeout=timeout,
            max_output_bytes=self.max_output_bytes,
            oom_killed=oom_killed and not timed_out,
            owner=owner,
        )
        return classify_disk_limit(result, self.disk_limit_mb, watcher, deadline=start + float(timeout))
