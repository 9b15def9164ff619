"""``model``: the LLM roles, their endpoint, limits and prices (SPEC §7)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from swarm_evo.config.base import Section


class ModelConfig(Section):
    """The LLM (SPEC §7). ``name`` is a litellm model name or ``offline``."""

    name: str = Field("offline", description="litellm model that writes code, e.g. openai/gpt-4o-mini, or 'offline'.")
    review_name: str | None = Field(
        None, description="litellm model that reviews executed programs (default: name); AIDE's feedback model."
    )
    evolution_name: str | None = Field(None, description="litellm model that rewrites agents (default: name).")
    api_base: str | None = Field(None, description="Base URL for vLLM/Ollama/proxies (all roles).")
    temperature: float = Field(0.5, ge=0, le=2, description="Sampling temperature of the model calls (left out where a model rejects it, with drop_params).")
    max_tokens: int | None = Field(
        None, ge=16, description="Upper bound on a reply's tokens (None: the provider's default)."
    )
    drop_params: bool = Field(
        True, description="litellm drop_params: leave out parameters a model rejects (e.g. temperature "
        "for reasoning models) instead of failing the call.",
    )
    context_window: int | None = Field(
        None, ge=1024, description="The model's context window in tokens; None: litellm's number for "
        "the model, else 32768. Prompts are bounded to fit it.",
    )
    tool_calls: Literal["auto", "on", "off"] = Field(
        "auto", description="Reviews as forced tool calls: on, off (a JSON object in the reply text) or "
        "auto (JSON text where litellm says the model has no tool calls, else tool calls first; a server "
        "that rejects tools switches the run to JSON text, with a warning).",
    )
    timeout: float = Field(600, gt=0, description="Seconds per LLM call (cut to the run's remaining time).")
    num_retries: int = Field(2, ge=0, description="litellm retries for transient errors (cut to the remaining time).")
    max_concurrent_calls: int | None = Field(
        None, ge=1, description="Model calls of a run at once, all roles (a call waits for a free one; issue 52): None = "
        "no limit beyond the scheduler's, one call per step in flight (execution slots + search.proposal_backlog) "
        "and the agent evolution's; a local server that serves one request at a time wants 1.")
    max_consecutive_failures: int = Field(
        5, ge=1, description="Generation failures in a row (model errors after their retries, replies "
        "without a program) after which the run stops with exit 1; resume it once the model works "
        "(a resumed run counts only the failures since it resumed).",
    )
    max_cost_usd: float | None = Field(
        None, gt=0, description="Stop starting steps once the run's LLM cost reaches this many USD "
        "(every call counts, failed and preflight ones too); None: no limit. Every model of the run must "
        "have a price (litellm's, or input_cost_per_token/output_cost_per_token): a run refuses to start otherwise.",
    )
    input_cost_per_token: float | None = Field(
        None, ge=0, description="USD per prompt token (litellm custom pricing): the price of model.name, "
        "and of a review_name/evolution_name model litellm has no price for (local models); a model litellm "
        "prices keeps litellm's price.",
    )
    output_cost_per_token: float | None = Field(None, ge=0, description="USD per completion token (see input_cost_per_token).")
    fault_rate: float = Field(0.2, ge=0, le=1, description="Offline model: chance of a planted bug.")
    repair_rate: float = Field(0.8, ge=0, le=1, description="Offline model: chance a debug repairs it.")
    injected_failure_rate: float = Field(
        0.0, ge=0, le=1,
        description="Offline model only, for reliability testing: chance that a call fails on purpose "
        "(timeout, 429, 5xx, a reply without code, invalid tool-call JSON or an empty reply; "
        "swarm_evo/llm/offline/failures.py).",
    )

    @model_validator(mode="after")
    def _pricing_pairs(self) -> "ModelConfig":
        if (self.input_cost_per_token is None) != (self.output_cost_per_token is None):
            raise ValueError(
                "input_cost_per_token and output_cost_per_token go together: set both (USD per token), or neither"
            )
        return self

    @model_validator(mode="after")
    def _injection_needs_offline(self) -> "ModelConfig":
        if self.injected_failure_rate and not (self.name == "offline" or self.name.startswith("offline/")):
            raise ValueError(
                f"injected_failure_rate applies to the offline model only (model.name is {self.name!r}): "
                "set model.injected_failure_rate to 0, or model.name to offline"
            )
        return self

