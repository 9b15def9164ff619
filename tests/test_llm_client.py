"""The litellm client: code extraction, key checks before any work, review tool calls."""

from __future__ import annotations

import json

import litellm
import pytest

from swarm_evo.llm import client, review_completion
from swarm_evo.llm.endpoint import ModelEndpoint, endpoint_for
from swarm_evo.llm.errors import GenerationError, ModelAccessError, transient_errors
from swarm_evo.llm.probe import check_model_access
from swarm_evo.llm.replies import extract_code
from swarm_evo.search.review import REVIEW_TOOL


def test_extract_code_skips_other_languages_and_keeps_the_plan():
    text = "Plan: use trees.\n```text\nnot code\n```\n```python\nprint(1)\n```\n```python\nprint(22)\n```"
    plan, code = extract_code(text)
    assert code == "print(22)\n", "no markers: the longest block that compiles (issue 13)"
    assert plan.startswith("Plan: use trees.") and "print(1)" in plan
    assert extract_code("no code here") is None


def test_missing_key_fails_naming_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelAccessError, match="OPENAI_API_KEY"):
        check_model_access(ModelEndpoint(name="openai/gpt-4o-mini"))


def test_key_from_block_is_enough(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    check_model_access(ModelEndpoint(name="anthropic/claude-3-5-sonnet-latest", api_key="x"))


def test_unknown_model_is_named():
    with pytest.raises(ModelAccessError, match="unknown model 'nosuchprovider/foo'"):
        check_model_access(ModelEndpoint(name="nosuchprovider/foo"))


def test_secret_key_never_in_repr():
    endpoint = ModelEndpoint(name="openai/gpt-4o-mini", api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(endpoint) and "sk-very-secret" not in endpoint.model_dump_json()


def test_complete_code_with_mock_response_records_usage(monkeypatch):
    real = litellm.completion

    def mocked(**kwargs):
        assert "metadata" not in kwargs, "structured context goes only to the offline model"
        assert kwargs["num_retries"] == 2 and kwargs["timeout"] == 600
        return real(mock_response="Plan.\n```python\nprint('hi')\n```", **kwargs)

    monkeypatch.setattr(litellm, "completion", mocked)
    reply = client.complete_code(ModelEndpoint(name="openai/gpt-4o-mini", api_key="x"), "prompt", {"purpose": "draft"})
    assert reply.code == "print('hi')\n" and reply.plan == "Plan."
    assert reply.usage.calls == 1 and reply.usage.completion_tokens > 0


def test_no_code_block_is_a_generation_error(monkeypatch):
    real = litellm.completion
    monkeypatch.setattr(litellm, "completion", lambda **kw: real(mock_response="sorry", **kw))
    with pytest.raises(GenerationError):
        client.complete_code(ModelEndpoint(name="openai/gpt-4o-mini", api_key="x"), "prompt")


def test_review_tool_call_is_parsed(monkeypatch):
    real = litellm.completion
    args = {"is_bug": False, "has_csv_submission": True, "summary": "ok", "approach_tag": "RF", "metric": 0.8}

    def mocked(**kwargs):
        assert kwargs["tool_choice"]["function"]["name"] == "submit_review"
        return real(
            mock_tool_calls=[{"id": "1", "type": "function",
                              "function": {"name": "submit_review", "arguments": json.dumps(args)}}],
            **kwargs,
        )

    monkeypatch.setattr(litellm, "completion", mocked)
    reply = review_completion.complete_review(ModelEndpoint(name="openai/gpt-4o-mini", api_key="x"), "p", REVIEW_TOOL)
    assert reply.arguments == args and reply.error is None and reply.usage.calls == 1
    assert reply.mode == "tool_call" and reply.source == "tool_call" and not reply.tools_rejected


# --------------------------------------------------------------------------- failing models (issue 7)
_REAL_COMPLETION = litellm.completion


def _scripted(monkeypatch, kinds):
    """Make the offline model's failure injector follow ``kinds`` (None = answer), one per call."""
    from swarm_evo.llm.offline import failures

    calls = []

    def decide(ctx, tool_call):
        calls.append(ctx.get("call_key"))
        kind = kinds[len(calls) - 1] if len(calls) <= len(kinds) else None
        return failures.Injection(kind, ctx.get("call_key", ""), len(calls)) if kind else None

    monkeypatch.setattr(failures.INJECTOR, "decide", decide)
    return calls


TRANSIENT = [("timeout", litellm.Timeout, 408), ("rate_limit", litellm.RateLimitError, 429),
             ("server_error:500", litellm.InternalServerError, 500),
             ("server_error:503", litellm.ServiceUnavailableError, 503)]


@pytest.mark.parametrize("kind,cls,status", TRANSIENT)
def test_litellm_num_retries_recalls_the_offline_provider_at_once(monkeypatch, kind, cls, status):
    """Checked behaviour of litellm 1.106.2: ``num_retries=N`` re-calls a custom provider up to N
    more times on its transient exceptions, without waiting; then the real class propagates."""
    import time

    from swarm_evo.search.review import REVIEW_TOOL

    endpoint = ModelEndpoint(name="offline", num_retries=2)
    calls = _scripted(monkeypatch, [kind, kind, None])
    started = time.perf_counter()
    reply = review_completion.complete_review(endpoint, "p", REVIEW_TOOL, {"purpose": "review", "seed": 0,
                                                               "call_key": "r", "term_out": ""})
    assert len(calls) == 3 and reply.error is None and isinstance(reply.arguments, dict)
    assert reply.usage.calls == 1, "litellm's own re-calls are one call for the caller"
    assert time.perf_counter() - started < 2.0, "litellm's constant_retry does not wait"

    calls = _scripted(monkeypatch, [kind, kind, kind])
    with pytest.raises(cls) as info:
        review_completion.complete_review(ModelEndpoint(name="offline", num_retries=1), "p", REVIEW_TOOL,
                               {"purpose": "review", "seed": 0, "call_key": "r"})
    assert len(calls) == 2 and info.value.status_code == status
    assert isinstance(info.value, transient_errors())


def _sequence(monkeypatch, replies):
    """litellm.completion answering with mock replies in turn; returns the prompts it got."""
    real = _REAL_COMPLETION
    prompts = []

    def mocked(**kwargs):
        prompts.append(kwargs["messages"][-1]["content"])
        reply = replies[len(prompts) - 1]
        if isinstance(reply, dict):
            return real(mock_tool_calls=[{"id": "1", "type": "function", "function": reply}], **kwargs)
        if not reply:  # mock_response="" would not mock: litellm would call the real API
            return litellm.ModelResponse(
                model="mock", choices=[{"index": 0, "message": {"role": "assistant", "content": ""},
                                        "finish_reason": "stop"}])
        return real(mock_response=reply, **kwargs)

    monkeypatch.setattr(litellm, "completion", mocked)
    return prompts


def test_bad_code_reply_is_asked_again_once(monkeypatch):
    endpoint = ModelEndpoint(name="openai/gpt-4o-mini", api_key="x")
    prompts = _sequence(monkeypatch, ["I would use trees.", "Plan.\n```python\nprint(1)\n```"])
    reply = client.complete_code(endpoint, "PROMPT")
    assert reply.code == "print(1)\n" and reply.usage.calls == 2
    assert prompts[0] == "PROMPT" and prompts[1].startswith("PROMPT") and "```python" in prompts[1]

    _sequence(monkeypatch, ["", "still no code", "never asked"])
    with pytest.raises(GenerationError, match=r"in 2 replies: the reply was empty; the reply had no "
                                                     r"fenced code block") as info:
        client.complete_code(endpoint, "PROMPT")
    assert info.value.usage.calls == 2


def test_bad_tool_call_is_asked_again_once(monkeypatch):
    endpoint = ModelEndpoint(name="openai/gpt-4o-mini", api_key="x")
    good = {"name": "submit_review", "arguments": json.dumps({"is_bug": False})}
    bad = {"name": "submit_review", "arguments": '{"is_bug": fal'}
    prompts = _sequence(monkeypatch, [bad, good])
    reply = review_completion.complete_review(endpoint, "p", REVIEW_TOOL)
    assert reply.arguments == {"is_bug": False} and reply.error is None and reply.usage.calls == 2
    assert "submit_review" in prompts[1] and "reply with ONLY a JSON object" in prompts[1]

    _sequence(monkeypatch, [bad, "plain text", "never asked"])
    reply = review_completion.complete_review(endpoint, "p", REVIEW_TOOL)
    assert reply.arguments is None and reply.usage.calls == 2
    assert "not JSON" in reply.error and "no tool call" in reply.error and "re-ask" in reply.error


def test_injected_failure_rate_goes_to_the_offline_ctx_only(monkeypatch):
    from swarm_evo.config import ModelConfig

    endpoint = endpoint_for(ModelConfig(injected_failure_rate=0.3))
    assert endpoint.injected_failure_rate == 0.3
    seen = []
    real = litellm.completion

    def spy(**kwargs):
        seen.append(kwargs.get("metadata"))
        return real(mock_response="```python\nprint(1)\n```", **kwargs)

    monkeypatch.setattr(litellm, "completion", spy)
    ctx = {"purpose": "draft", "call_key": "k"}
    client.complete_code(endpoint, "p", ctx)
    assert seen[-1]["swarm_evo"]["injected_failure_rate"] == 0.3
    assert "injected_failure_rate" not in ctx, "the caller's ctx is not modified"
    client.complete_code(endpoint_for(ModelConfig()), "p", ctx)
    assert "injected_failure_rate" not in seen[-1]["swarm_evo"]


def test_the_flows_load_without_litellm_until_the_first_model_call():
    """Importing the flows (what a sweep driver, ``prefect deploy`` and Prefect's crash-hook runner
    do) leaves litellm out (≈ 2.5 s of CPU, more than half the flows' import); until a model is
    called ``transient_errors()`` is empty (nothing of litellm's can have been raised), and after
    the first call (litellm's mock response) it is litellm's six."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        import flows.two_phase_evo, flows.benchmark_sweep
        from swarm_evo.llm.client import call_model
        from swarm_evo.llm.endpoint import ModelEndpoint
        from swarm_evo.llm.errors import transient_errors
        print('litellm' in sys.modules, transient_errors())
        call_model(ModelEndpoint(name='openai/gpt-4o-mini', api_key='x'), [{'role': 'user', 'content': 'Hi.'}], {},
                   mock_response='Hello.')
        print('litellm' in sys.modules, sorted(e.__name__ for e in transient_errors()))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "False ()",
        "True ['APIConnectionError', 'BadGatewayError', 'InternalServerError', 'RateLimitError', "
        "'ServiceUnavailableError', 'Timeout']"], done.stdout
