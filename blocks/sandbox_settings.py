"""SandboxSettings block: where and with which limits generated programs run (SPEC §10).

Save once, then name it in a deployment run (``--param sandbox_block=gpu-box``)::

    from blocks import SandboxSettings
    SandboxSettings(backend="docker", gpus="all", memory_limit_mb=32_000).save("gpu-box")
"""

from __future__ import annotations

from typing import Any, Literal

from prefect.blocks.core import Block
from pydantic import Field, field_validator

from swarm_evo.config import SandboxConfig
from swarm_evo.sandbox import DEFAULT_IMAGE, parse_gpus


class SandboxSettings(Block):
    """Backend, image, GPUs and limits; the fields and their meaning are those of SandboxConfig."""

    _block_type_name = "swarm-evo sandbox settings"
    _description = "Execution backend (local or Docker), image, GPUs and limits for swarm-evo runs."

    backend: Literal["local", "docker"] = "local"
    exec_timeout: float = Field(3600, gt=0, description="Seconds per execution.")
    max_output_bytes: int = Field(1_000_000, ge=1000)
    memory_limit_mb: int | None = Field(None, ge=64, description="Per execution (local: a memory cgroup) / container, MiB.")
    python: str | None = Field(
        None, description="(local) interpreter or virtual environment that runs programs (default: .venv-programs)."
    )
    image: str = Field(DEFAULT_IMAGE, description="(docker) sandbox runtime image.")
    gpus: Literal["all"] | int | list[str] | None = Field(
        None, description="(docker) none, all, a count N, or device ids such as [\"0\", \"1\"]."
    )
    cpus: float | None = Field(None, gt=0, description="(docker) CPUs per container.")
    pids_limit: int = Field(512, ge=16, description="(docker) processes and threads per container.")
    shm_size_mb: int = Field(1024, ge=16, description="(docker) size of /dev/shm, MiB.")
    disk_limit_mb: int = Field(
        SandboxConfig.model_fields["disk_limit_mb"].default, ge=16,
        description="MiB one execution may fill in its node directory (and the largest file).",
    )
    network: bool = Field(
        False, description="Give programs the host's network (default: none; they reach nothing, not even localhost)."
    )
    allow_unconfined: bool = Field(
        False, description="(local) Run programs unconfined where namespaces cannot be made, instead of refusing."
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _normalise_gpus(cls, value: object) -> object:
        spec = parse_gpus(value)
        return list(spec) if isinstance(spec, tuple) else spec

    def overrides(self) -> dict[str, Any]:
        """Dotted config overrides (``{"sandbox.backend": "docker", ...}``) for RunConfig.with_overrides."""
        return {f"sandbox.{name}": getattr(self, name) for name in SandboxConfig.model_fields}
