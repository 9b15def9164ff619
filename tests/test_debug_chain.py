"""The chained debug (SPEC §6, seed 000 §8): attempt n gets attempt n−1's code and error."""

from __future__ import annotations

from swarm_evo.population.node import LLMUsage
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.search.debug_chain import Attempt, run_debug_chain


def _attempt(n: int, code: str, error: str | None) -> Attempt:
    result = ExecutionResult(
        stdout="", stderr=error or "", term_out=error or "ok", exit_code=1 if error else 0,
        exc_type="KeyError" if error else None, exc_info=error, exec_time=0.5, timed_out=False,
        output_truncated=False,
    )
    return Attempt(attempt=n, code=code, result=result, problems=[error] if error else [],
                   usage=LLMUsage(calls=1, seconds=0.1))


def test_success_needs_no_attempt():
    outcome = run_debug_chain(_attempt(0, "v0", None), 2, lambda n, prev: (_ for _ in ()).throw(AssertionError))
    assert outcome.attempts == 0 and not outcome.dead and outcome.history == []


def test_attempt_n_receives_attempt_n_minus_1_code_and_error():
    seen = []

    def attempt_fn(n, previous):
        seen.append((n, previous.code, previous.result.term_out))
        return _attempt(n, f"v{n}", f"error of v{n}")

    outcome = run_debug_chain(_attempt(0, "v0", "error of v0"), 2, attempt_fn)
    assert seen == [(1, "v0", "error of v0"), (2, "v1", "error of v1")]
    assert outcome.dead and outcome.attempts == 2
    assert outcome.final.code == "v2"
    assert [h["code"] for h in outcome.history] == ["v0", "v1", "v2"]
    assert [h["term_out"] for h in outcome.history] == ["error of v0", "error of v1", "error of v2"]
    assert outcome.usage.calls == 2


def test_chain_stops_at_first_fix_and_node_lives():
    outcome = run_debug_chain(
        _attempt(0, "v0", "boom"), 2, lambda n, prev: _attempt(n, f"v{n}", None)
    )
    assert outcome.attempts == 1 and not outcome.dead and outcome.final.code == "v1"


def test_zero_attempts_leaves_a_failed_node_dead():
    outcome = run_debug_chain(_attempt(0, "v0", "boom"), 0, lambda n, prev: None)
    assert outcome.dead and outcome.attempts == 0
