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
    """Model name (litellm), optional api_base, API key (SecretStr), sampling and retry settings,
    the review and evolution models, reply and context limits, tool-call mode and custom
    pricing (the ``model`` keys of swarm_evo/config/model.py; unset fields keep the config's values)."""

    _block_type_name = "swarm-evo LLM settings"
    _description = "Model, API base and API key for swarm-evo runs (the key is stored as a secret)."

    model: str = Field("offline", description="litellm model name, or 'offline'.")
    api_base: str | None = Field(None, description="Base URL, e.g. http://localhost:11434 for Ollama.")
    api_key: SecretStr | None = Field(None, description="API key; stored encrypted by Prefect.")
    temperature: float = Field(0.5, ge=0, le=2)
    timeout: float = Field(600, gt=0, description="Seconds per call.")
    num_retries: int = Field(2, ge=0)
    review_model: str | None = Field(None, description="litellm model that reviews (default: model).")
    evolution_model: str | None = Field(None, description="litellm model that rewrites agents (default: model).")
    max_tokens: int | None = Field(None, ge=16, description="Upper bound on a reply's tokens.")
    context_window: int | None = Field(None, ge=1024, description="Context window in tokens (default: litellm's).")
    tool_calls: str | None = Field(None, description="Reviews as tool calls: auto, on or off.")
    input_cost_per_token: float | None = Field(None, ge=0, description="USD per prompt token (local models).")
    output_cost_per_token: float | None = Field(None, ge=0, description="USD per completion token.")

    def overrides(self) -> dict[str, Any]:
        """Dotted config overrides for RunConfig.with_overrides (the key is not part of them)."""
        return {
            "model.name": self.model,
            "model.api_base": self.api_base,
            "model.temperature": self.temperature,
            "model.timeout": self.timeout,
            "model.num_retries": self.num_retries,
            "model.review_name": self.review_model,
            "model.evolution_name": self.evolution_model,
            "model.max_tokens": self.max_tokens,
            "model.context_window": self.context_window,
            "model.tool_calls": self.tool_calls,
            "model.input_cost_per_token": self.input_cost_per_token,
            "model.output_cost_per_token": self.output_cost_per_token,
        }
