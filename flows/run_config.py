"""The run's configuration from its sources (SPEC §13): a config file (or the defaults, or a
resumed run's saved config), the saved Prefect blocks, then explicit parameters.

Light on purpose: Prefect is imported only when a block is named, so ``swarm-evo run`` checks
its input (config, objective, model, sandbox) before it imports the flows.
"""

from __future__ import annotations

import os
from pathlib import Path

from swarm_evo.config import ConfigError, RunConfig, config_from_mapping, load_config
from swarm_evo.store.location import STORE_ENV


def resolve_config(
    config_path: str | None = None,
    *,
    base: RunConfig | None = None,
    model: str | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    parallel_workers: int | None = None,
    time_limit: float | None = None,
    executor: str | None = None,
    image: str | None = None,
    gpus: str | int | list[str] | None = None,
    llm_block: str | None = None,
    sandbox_block: str | None = None,
    policy: str | None = None,
    mlebench_repo: str | None = None,
    python: str | None = None,
    instance: str | None = None,
    max_consecutive_failures: int | None = None,
    store: str | None = None,
    config_data: dict | None = None,
) -> tuple[RunConfig, object]:
    """The run's config: file, or ``config_data`` (a config file's contents, sent by a sweep on
    a deployment: the worker need not see the file), or the defaults, or ``base`` (a resumed
    run's) <- saved blocks <- explicit parameters; a ``store`` still unset then comes from
    ``$SWARM_EVO_STORE``.

    Returns ``(config, api_key)``; the key comes only from the LLM settings block.

    Raises:
        ConfigError: a value (from any source) is invalid, the message names the key; or both
            ``config_path`` and ``config_data`` are given.
    """
    if config_path and config_data is not None:
        raise ConfigError("config_path and config_data both given: pass the file's path or its contents, not both")
    if base is not None:
        config = base
    elif config_data is not None:
        config = config_from_mapping(config_data, source="config_data")
    else:
        config = load_config(Path(config_path) if config_path else None)
    api_key = None
    overrides: dict = {}
    if llm_block:
        from blocks.llm_settings import LLMSettings

        block = LLMSettings.load(llm_block)
        overrides.update(block.overrides())
        api_key = block.api_key
    if sandbox_block:
        from blocks.sandbox_settings import SandboxSettings

        overrides.update(SandboxSettings.load(sandbox_block).overrides())
    explicit = {
        "model.name": model,
        "search.max_steps": max_steps,
        "seed": seed,
        "search.parallel_workers": parallel_workers,
        "search.time_limit": time_limit,
        "sandbox.backend": executor,
        "sandbox.image": image,
        "sandbox.gpus": gpus,
        "sandbox.python": python,
        "search.policy": policy,
        "mlebench_repo": mlebench_repo,
        "problem.instance": instance,
        "model.max_consecutive_failures": max_consecutive_failures,
        "store.url": store,
    }
    overrides.update({key: value for key, value in explicit.items() if value is not None})
    if overrides.get("store.url") is None and config.store.url is None and os.environ.get(STORE_ENV):
        overrides["store.url"] = os.environ[STORE_ENV]
    return config.with_overrides(overrides), api_key
