"""Prefect wiring: retries only for transient model errors; blocks carry settings and keys."""

from __future__ import annotations

import litellm
import pytest
from prefect import flow, task

from swarm_evo.llm.errors import GenerationError
from tasks._policy import retry_on_transient


def _flaky(error: Exception):
    calls = {"n": 0}

    @task(retries=2, retry_delay_seconds=0, retry_condition_fn=retry_on_transient)
    def call():
        calls["n"] += 1
        if calls["n"] == 1:
            raise error
        return "ok"

    return call, calls


def test_transient_model_error_is_retried(prefect_server):
    call, calls = _flaky(litellm.RateLimitError("slow down", llm_provider="openai", model="gpt"))

    @flow
    def parent():
        return call()

    assert parent() == "ok" and calls["n"] == 2


def test_bad_reply_is_not_retried(prefect_server):
    call, calls = _flaky(GenerationError("no code block"))

    @flow
    def parent():
        return call()

    with pytest.raises(GenerationError):
        parent()
    assert calls["n"] == 1


def test_llm_block_sets_model_and_secret_key(prefect_server):
    from blocks import LLMSettings, SandboxSettings
    from flows.run_config import resolve_config

    LLMSettings(model="openai/gpt-4o-mini", api_key="sk-test-secret", temperature=0.2, review_model="openai/gpt-4o",
                input_cost_per_token=1e-6, output_cost_per_token=4e-6).save("test-llm", overwrite=True)
    SandboxSettings(exec_timeout=120).save("test-sandbox", overwrite=True)
    config, api_key = resolve_config(None, llm_block="test-llm", sandbox_block="test-sandbox", max_steps=7)
    assert config.model.name == "openai/gpt-4o-mini" and config.model.temperature == 0.2
    assert config.model.review_name == "openai/gpt-4o" and config.model.evolution_name is None
    assert (config.model.input_cost_per_token, config.model.output_cost_per_token) == (1e-6, 4e-6)
    assert api_key.get_secret_value() == "sk-test-secret"
    assert "sk-test-secret" not in config.model_dump_json(), "the key never enters the run config / journal"
    assert config.sandbox.exec_timeout == 120 and config.search.max_steps == 7
    # an explicit model parameter still wins over the block
    config, _ = resolve_config(None, llm_block="test-llm", model="offline")
    assert config.model.name == "offline"
