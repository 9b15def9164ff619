"""``sandbox``: where generated programs run (SPEC §10); its backends come from
:mod:`swarm_evo.sandbox.backends`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from swarm_evo.config.base import Section
from swarm_evo.sandbox import backends
from swarm_evo.sandbox.disk_limit import DEFAULT_DISK_LIMIT_MB
from swarm_evo.sandbox.docker_sandbox import DEFAULT_IMAGE
from swarm_evo.sandbox.gpus import parse_gpus
from swarm_evo.sandbox.preload import DEFAULT_PRELOAD


BackendName = Literal[backends.NAMES]
"""A sandbox backend's name (:mod:`swarm_evo.sandbox.backends`)."""


class SandboxConfig(Section):
    """Where generated programs run (SPEC §10). A key that only some backends read has their names
    before its description, e.g. ``(docker)``, taken from :data:`swarm_evo.sandbox.backends.BACKENDS`
    (``Backend.keys``) when the class is made: never written by hand (issue 55, item 4)."""

    backend: BackendName = Field(backends.NAMES[0], description="The backend that runs programs: "
                                 + backends.help_text() + ".")
    exec_timeout: float = Field(3_600, gt=0, description="Seconds per execution (capped by the time limit).")
    max_output_bytes: int = Field(1_000_000, ge=1_000, description="Captured stdout+stderr cap.")
    memory_limit_mb: int | None = Field(
        None, ge=64,
        description="Memory of one execution, swap included: local: a memory cgroup for its processes and "
        "its /tmp, /var/tmp, /dev/shm files together (without one: RLIMIT_DATA per process, with a warning); "
        "docker: the container's limit (default for both: 80 % of host memory / parallel_workers).",
    )
    python: str | None = Field(
        None, min_length=1,
        description="Interpreter, or virtual environment directory, that runs programs (default: the "
        "program environment `swarm-evo env build` made, .venv-programs, else the project's own interpreter).",
    )
    preload: list[str] = Field(
        list(DEFAULT_PRELOAD),
        description="Modules a program server imports once; each execution is forked from it, confined "
        "as a new interpreter would be, and finds them already imported (≈ 1.3 s of CPU saved per program that "
        "imports pandas and scikit-learn). Modules the interpreter lacks are skipped; [] starts a new "
        "interpreter per execution.",
    )
    image: str = Field(DEFAULT_IMAGE, min_length=1, description="Sandbox runtime image.")
    gpus: Literal["all"] | int | list[str] | None = Field(
        None, description="GPUs for programs: none, all, a count N (the first N), or device ids [0, 1] / '0,1' / "
        "GPU-<uuid>. Each GPU is a device group; an execution sees only its group's GPUs (CUDA_VISIBLE_DEVICES; local: "
        "only its /dev/nvidia* nodes; docker: a device request). With GPUs the run's execution slots are GPUs x "
        "slots_per_gpu (in place of search.parallel_workers). Without GPUs, local programs see no /dev/nvidia*."
    )
    slots_per_gpu: int = Field(
        1, ge=1,
        description="Executions that share one GPU at once (with gpus). GPU memory is not divided: they share it.",
    )
    cpus: float | None = Field(None, gt=0, description="CPUs per container (default: cores / parallel_workers).")
    pids_limit: int = Field(
        512, ge=16,
        description="Processes and threads per execution (docker: per container; local: a pids cgroup per "
        "execution, else RLIMIT_NPROC on top of what the program's user already runs, shared by the programs "
        "running at once, not enforced for root; the confinement line says which).",
    )
    shm_size_mb: int = Field(1024, ge=16, description="Size of /dev/shm (docker; local when run as root: a private tmpfs).")
    disk_limit_mb: int = Field(
        DEFAULT_DISK_LIMIT_MB, ge=16,
        description="Disk space (MiB) one execution may fill in its node directory, and the largest file it may "
        "write (local: RLIMIT_FSIZE; docker: fsize ulimit). Past it the program is stopped: DiskLimitError.",
    )
    network: bool = Field(
        False,
        description="Give programs the host's network (local: no network namespace; docker: network_mode host), "
        "for programs that must download; by default they reach nothing, not even the host's loopback services.",
    )
    allow_unconfined: bool = Field(
        False,
        description="Where programs cannot be confined (no PID/user namespaces: a container without "
        "CAP_SYS_ADMIN, a kernel that refuses user namespaces), run them anyway, able to read the answers and "
        "host files and reach the network, with a warning in the run's first lines and its report; by default "
        "such a setup refuses to start.",
    )

    work_pool: str | None = Field(
        None, min_length=1,
        description="The Prefect work pool whose workers run the programs, each execution a flow run of its "
        "execute-program deployment (docs/sandbox.md, the pool backend); needs a run store (store.url).",
    )
    pool_wait: float = Field(
        600, gt=0,
        description="Seconds an execution may wait for a worker of sandbox.work_pool while nothing of the run "
        "moves on the pool (no execution starts, beats or ends: busy workers are not missing ones); past it "
        "the step ends with an error and the run stops (resumable).",
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _normalise_gpus(cls, value: object) -> object:
        spec = parse_gpus(value)
        return list(spec) if isinstance(spec, tuple) else spec

    @model_validator(mode="after")
    def _slots_need_gpus(self) -> "SandboxConfig":
        if self.slots_per_gpu != 1 and self.gpus is None:
            raise ValueError(
                f"slots_per_gpu={self.slots_per_gpu} shares GPUs, but sandbox.gpus is none: give the GPUs "
                "(sandbox.gpus: all, a count or device ids; --gpus) or leave slots_per_gpu at 1"
            )
        return self



def _mark_backend_keys() -> None:
    """Put the backends that read a key before its description, ``(docker) CPUs per container``,
    where not every backend reads it (:func:`swarm_evo.sandbox.backends.readers`)."""
    for name, field in SandboxConfig.model_fields.items():
        readers = backends.readers(name)
        if readers != backends.NAMES and field.description:
            field.description = f"({', '.join(readers)}) {field.description}"
    SandboxConfig.model_rebuild(force=True)


_mark_backend_keys()
