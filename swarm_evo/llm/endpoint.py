"""Which model a role calls and how: :class:`ModelEndpoint` (name, API base and key, limits) and
:func:`endpoint_for` (from the run's model configuration)."""

from __future__ import annotations

import time

import litellm
from pydantic import BaseModel, ConfigDict, Field, SecretStr


OFFLINE = "offline"


class ModelEndpoint(BaseModel):
    """Which model to call and how. ``api_key`` is a SecretStr: it never appears in logs or reprs.

    ``role`` names what the endpoint is for (``code``, ``review``, ``evolution``: AIDE's code
    and feedback models; :meth:`for_role`). ``deadline`` (Unix time, s) is the run's end: a
    call's timeout and retries are cut to it and no call starts after it (:func:`~swarm_evo.llm.client.call_model`).
    ``ledger_path`` is the run's ``llm_calls.jsonl`` (:mod:`swarm_evo.llm.ledger`);
    ``max_cost_usd`` (``model.max_cost_usd``) stops calls once the ledger's cost reaches it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = OFFLINE
    role: str = "code"
    api_base: str | None = None
    api_key: SecretStr | None = None
    temperature: float = 0.5
    max_tokens: int | None = None
    drop_params: bool = True
    timeout: float = 600.0
    num_retries: int = 2
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    tool_calls: str = "auto"
    deadline: float | None = None
    ledger_path: str | None = None
    max_cost_usd: float | None = None
    injected_failure_rate: float = Field(0.0, ge=0, le=1)
    """Offline model only: chance that a call fails on purpose (swarm_evo/llm/offline/failures.py)."""

    @property
    def is_offline(self) -> bool:
        """True for the built-in offline model (``offline`` or ``offline/<name>``)."""
        return self.name == OFFLINE or self.name.startswith(OFFLINE + "/")

    @property
    def litellm_model(self) -> str:
        """The model string litellm routes on."""
        return f"{OFFLINE}/swarm-evo" if self.name == OFFLINE else self.name

    @property
    def where(self) -> str:
        """The endpoint as messages name it: the api_base, or the provider's default one."""
        return self.api_base or "the provider's default endpoint"

    def for_role(self, role: str, name: str | None) -> "ModelEndpoint":
        """The same endpoint for another role (``review``, ``evolution``), calling model ``name``
        (None: this endpoint's model)."""
        return self.model_copy(update={"role": role, "name": name or self.name})

    def time_left(self) -> float | None:
        """Seconds until :attr:`deadline` (may be ≤ 0), or None without a deadline."""
        return None if self.deadline is None else self.deadline - time.time()


def endpoint_for(model, api_key: SecretStr | str | None = None) -> ModelEndpoint:
    """The code-writing endpoint for a run's ``model`` config section
    (swarm_evo.config.ModelConfig), with an optional API key (from a Prefect block; never from
    the config file). The review and evolution endpoints derive from it
    (:meth:`ModelEndpoint.for_role` with ``model.review_name`` / ``model.evolution_name``)."""
    if isinstance(api_key, str):
        api_key = SecretStr(api_key)
    return ModelEndpoint(
        name=model.name,
        api_base=model.api_base,
        api_key=api_key,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        drop_params=model.drop_params,
        timeout=model.timeout,
        num_retries=model.num_retries,
        input_cost_per_token=model.input_cost_per_token,
        output_cost_per_token=model.output_cost_per_token,
        tool_calls=model.tool_calls,
        injected_failure_rate=getattr(model, "injected_failure_rate", 0.0),
    )
