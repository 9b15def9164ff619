"""SandboxSettings block: where and with which limits generated programs run (SPEC §10).

Save once, then name it in a deployment run (``--param sandbox_block=gpu-box``)::

    from blocks import SandboxSettings
    SandboxSettings(backend="docker", gpus="all", memory_limit_mb=32_000).save("gpu-box")

Its fields are ``SandboxConfig``'s (swarm_evo/config/sandbox.py), taken from it (issue 43): a key
added there is a field here, with the same type, default, bounds and description, and the
backends are those of :mod:`swarm_evo.sandbox.backends`.
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import create_model, field_validator

from swarm_evo.config import SandboxConfig
from swarm_evo.sandbox import backends, parse_gpus


class _SandboxBlock(Block):
    """The block's behaviour; its fields come from SandboxConfig (below)."""

    _block_type_name = "swarm-evo sandbox settings"
    _description = f"Execution backend ({', '.join(backends.NAMES)}), image, GPUs and limits for swarm-evo runs."

    @field_validator("gpus", mode="before", check_fields=False)
    @classmethod
    def _normalise_gpus(cls, value: object) -> object:
        spec = parse_gpus(value)
        return list(spec) if isinstance(spec, tuple) else spec

    def overrides(self) -> dict[str, Any]:
        """Dotted config overrides (``{"sandbox.backend": "docker", ...}``) for RunConfig.with_overrides."""
        return {f"sandbox.{name}": getattr(self, name) for name in SandboxConfig.model_fields}


SandboxSettings = create_model(
    "SandboxSettings",
    __base__=_SandboxBlock,
    __module__=__name__,
    __doc__="Backend, image, GPUs and limits; the fields and their meaning are those of SandboxConfig.",
    **{name: (field.annotation, field) for name, field in SandboxConfig.model_fields.items()},
)
