"""Which model a role calls and how: :class:`ModelEndpoint` (name, API base and key, price,
limits) and :func:`endpoint_for` (from the run's model configuration).

Prices (issue 31): the code model (``model.name``) is charged at ``model.input_cost_per_token``
/ ``output_cost_per_token`` when they are given, else at litellm's price. The review and
evolution models have their own price: litellm's when its cost map has one (a priced
``review_name`` is never charged at the code model's custom price), else the custom price,
which is the price of every model litellm does not price. The built-in offline model is free.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from swarm_evo.llm import import_litellm


OFFLINE = "offline"


class ModelEndpoint(BaseModel):
    """Which model to call and how. ``api_key`` is a SecretStr: it never appears in logs or reprs.

    ``role`` names what the endpoint is for (``code``, ``review``, ``evolution``: AIDE's code
    and feedback models; :meth:`for_role`). ``deadline`` (Unix time, s) is the run's end: a
    call's timeout and retries are cut to it and no call starts after it (:func:`~swarm_evo.llm.client.call_model`).
    ``ledger_path`` is the run's ``llm_calls.jsonl`` (:mod:`swarm_evo.llm.ledger`);
    ``max_cost_usd`` (``model.max_cost_usd``) stops calls once the ledger's priced calls cost
    that much (every model must have a price then: :attr:`price_known`, checked at start).
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
    max_concurrent_calls: int | None = Field(None, ge=1)
    """Calls through endpoints of one ledger (one run, every role) at once (``model.max_concurrent_calls``);
    None: no limit (:func:`swarm_evo.llm.client.call_model` waits for a free one; issue 52)."""

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

    @property
    def has_custom_price(self) -> bool:
        """True when calls are charged at ``input_cost_per_token`` / ``output_cost_per_token``."""
        return self.input_cost_per_token is not None and self.output_cost_per_token is not None

    @property
    def price_known(self) -> bool:
        """True when this endpoint's calls have a price: the offline model (free), a custom
        price, or litellm's cost map (:func:`litellm_price`)."""
        return self.is_offline or self.has_custom_price or litellm_price(self.litellm_model) is not None

    def for_role(self, role: str, name: str | None) -> "ModelEndpoint":
        """The same endpoint for another role (``review``, ``evolution``), calling model ``name``
        (None: this endpoint's model). Another model that litellm prices is charged at
        litellm's price, not at this endpoint's custom one (module docstring)."""
        update: dict = {"role": role, "name": name or self.name}
        if update["name"] != self.name and litellm_price(update["name"]) is not None:
            update.update(input_cost_per_token=None, output_cost_per_token=None)
        return self.model_copy(update=update)

    def time_left(self) -> float | None:
        """Seconds until :attr:`deadline` (may be ≤ 0), or None without a deadline."""
        return None if self.deadline is None else self.deadline - time.time()


def litellm_price(model: str) -> tuple[float, float] | None:
    """litellm's own price of ``model`` as ``(USD per prompt token, USD per completion token)``,
    or None when its cost map has none (litellm 1.106.2: ``get_model_info`` raises for a model
    it has not mapped, e.g. ``openai/<a local model>``; the map is the local copy when
    ``LITELLM_LOCAL_MODEL_COST_MAP=True``). A price of 0 is a price."""
    try:
        info = import_litellm().get_model_info(model)
    except Exception:
        return None
    prompt, completion = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return float(prompt), float(completion)


def endpoint_for(model, api_key: SecretStr | str | None = None) -> ModelEndpoint:
    """The code-writing endpoint for a run's ``model`` config section
    (swarm_evo.config.ModelConfig), with an optional API key (from a Prefect block; never from
    the config file). The review and evolution endpoints derive from it
    (:meth:`ModelEndpoint.for_role` with ``model.review_name`` / ``model.evolution_name``).
    ``max_cost_usd`` is set so that :func:`swarm_evo.llm.probe.check_model_access` can refuse a
    cost limit on a model without a price; calls are stopped by it only once the run's session
    gives the endpoint its ledger."""
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
        max_cost_usd=getattr(model, "max_cost_usd", None),
        injected_failure_rate=getattr(model, "injected_failure_rate", 0.0),
    )
