"""LLMSettings block: which model a run calls, with the API key kept as a Prefect secret.

Save once, then name it in a deployment run (``--param llm_block=my-model``) so the key lives
in Prefect, never in flow parameters or logs::

    from blocks import LLMSettings
    LLMSettings(model="openai/gpt-4o-mini", api_key="sk-...").save("my-model")
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import Field, SecretStr


class LLMSettings(Block):
    """Model name (litellm), optional api_base, API key (SecretStr), sampling and retry settings."""

    _block_type_name = "swarm-evo LLM settings"
    _description = "Model, API base and API key for swarm-evo runs (the key is stored as a secret)."

    model: str = Field("offline", description="litellm model name, or 'offline'.")
    api_base: str | None = Field(None, description="Base URL, e.g. http://localhost:11434 for Ollama.")
    api_key: SecretStr | None = Field(None, description="API key; stored encrypted by Prefect.")
    temperature: float = Field(0.5, ge=0, le=2)
    timeout: float = Field(600, gt=0, description="Seconds per call.")
    num_retries: int = Field(2, ge=0)

    def overrides(self) -> dict[str, Any]:
        """Dotted config overrides for RunConfig.with_overrides (the key is not part of them)."""
        return {
            "model.name": self.model,
            "model.api_base": self.api_base,
            "model.temperature": self.temperature,
            "model.timeout": self.timeout,
            "model.num_retries": self.num_retries,
        }
