"""Issue 13, bounded time and nothing lost: the call ledger (cost), deadline-cut model calls,
the preflight probe, the cost and failing-model stops, the hand-in fallback for a strict
reviewer, the reviewer-flagged debug, and the best work on disk before the run ends."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import litellm
import pytest
from factories import make_node

from swarm_evo.search.debug_chain import Attempt, debug_flagged, run_debug_chain
from swarm_evo.population.journal import Journal
from swarm_evo.llm import client
from swarm_evo.llm.endpoint import ModelEndpoint, endpoint_for
from swarm_evo.llm.errors import CostLimitReached, DeadlineReached, GenerationError, ModelAccessError, transient_errors
from swarm_evo.llm.ledger import CallLedger, ledger_for
from swarm_evo.llm.probe import probe_model
from swarm_evo.population.node import LLMUsage
from swarm_evo.search.review import decide_review
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.step import assembly, limits, persistence
from swarm_evo.step.generation import same_program
from swarm_evo.step.request import OperationRequest
from swarm_evo.step.review_call import flagged_by_reviewer, reviewer_reasons
from factories import make_node

OPENAI = dict(name="openai/gpt-4o-mini", api_key="x")


# ------------------------------------------------------------------ ledger and cost
def test_ledger_counts_every_call_and_survives_a_half_written_line(tmp_path):
    path = tmp_path / "llm_calls.jsonl"
    ledger = CallLedger(path)
    ledger.record(role="code", operation="draft", model="m", ok=True, prompt_tokens=100, completion_tokens=40,
                  cost_usd=0.01, seconds=1.5)
    ledger.record(role="review", operation="review", model="m", ok=False, error="Timeout: no answer\nsecond line")
    ledger.record(role="code", operation="draft", model="m", ok=True, prompt_tokens=10, completion_tokens=4,
                  cost_usd=0.002)
    with path.open("a") as fh:
        fh.write('{"role": "code", "ok": tr')  # a killed process's last line
    again = CallLedger(path).summary()
    assert again.totals.calls == 3 and again.totals.failed_calls == 1
    assert (again.totals.prompt_tokens, again.totals.completion_tokens) == (110, 44)
    assert again.totals.cost_usd == pytest.approx(0.012) and again.totals.unpriced_calls == 0
    assert again.by_operation["draft"].calls == 2 and again.by_role["review"].failed_calls == 1
    report = again.report()
    assert report["by_operation"]["review"]["failed_calls"] == 1
    assert json.loads(path.read_text().splitlines()[1])["error"] == "Timeout: no answer"


def test_custom_pricing_reaches_the_ledger_to_the_cent(tmp_path):
    path = tmp_path / "calls.jsonl"
    endpoint = ModelEndpoint(**OPENAI, input_cost_per_token=0.001, output_cost_per_token=0.002,
                                    ledger_path=str(path))
    client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": "draft"}, mock_response="hello")
    totals = ledger_for(path).totals()
    expected = totals.prompt_tokens * 0.001 + totals.completion_tokens * 0.002
    assert totals.calls == 1 and totals.prompt_tokens > 0 and totals.completion_tokens > 0
    assert totals.cost_usd == pytest.approx(expected, abs=0.005)


def test_a_failed_call_is_in_the_ledger(tmp_path):
    path = tmp_path / "calls.jsonl"
    endpoint = ModelEndpoint(**OPENAI, num_retries=0, ledger_path=str(path))
    error = litellm.BadRequestError(message="context window exceeded", model="gpt-4o-mini", llm_provider="openai")
    with pytest.raises(litellm.BadRequestError):
        client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": "debug"}, mock_response=error)
    totals = ledger_for(path).summary()
    assert totals.totals.failed_calls == 1 and totals.by_operation["debug"].calls == 1


def test_a_call_without_a_price_makes_the_cost_unknown_never_smaller(tmp_path):
    """Issue 31 item 3: one unpriced call among priced ones makes ``cost_usd`` null, with
    ``unpriced_calls``, instead of a sum that leaves it out; a failed call has no tokens to
    price; the offline model is free (0, known)."""
    path = tmp_path / "llm_calls.jsonl"
    unpriced = ModelEndpoint(name="openai/swarm-evo-unpriced-a", api_key="x", ledger_path=str(path))
    _, usage = client.call_model(unpriced, [{"role": "user", "content": "hi"}], {"purpose": "draft"},
                                 mock_response="hello")
    assert usage.cost is None and usage.completion_tokens > 0, "litellm has no price for it"
    ledger = ledger_for(path)
    ledger.record(role="review", operation="review", model="openai/gpt-4o-mini", ok=True, cost_usd=0.01)
    ledger.record(role="review", operation="review", model="openai/gpt-4o-mini", ok=False, error="Timeout")
    report = ledger.summary().report()
    assert report["cost_usd"] is None and report["unpriced_calls"] == 1, report
    assert report["known_cost_usd"] == pytest.approx(0.01) and report["calls"] == 3
    assert report["by_role"]["review"]["cost_usd"] == pytest.approx(0.01), "the review calls are all priced"
    assert report["by_role"]["code"]["cost_usd"] is None
    assert CallLedger(path).summary().report() == report, "the same after a resume"

    offline = tmp_path / "offline.jsonl"
    endpoint = ModelEndpoint(name="offline", ledger_path=str(offline))
    _, usage = client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": "probe"},
                                 mock_response="OK")
    assert usage.cost == 0.0
    assert ledger_for(offline).summary().report()["cost_usd"] == 0.0


def test_each_role_is_charged_at_its_own_price(tmp_path):
    """Issue 31 item 3: the custom price is model.name's; a review model litellm prices is
    charged at litellm's price, a review model it does not price at the custom one."""
    code = ModelEndpoint(name="openai/swarm-evo-unpriced-b", api_key="x", input_cost_per_token=1e-3,
                         output_cost_per_token=2e-3)
    review = code.for_role("review", "openai/gpt-4.1-nano")
    local = code.for_role("evolution", "openai/swarm-evo-unpriced-c")
    prompt_price, completion_price = litellm.get_model_info("openai/gpt-4.1-nano")["input_cost_per_token"], \
        litellm.get_model_info("openai/gpt-4.1-nano")["output_cost_per_token"]
    assert prompt_price < 1e-5, "litellm's own price, far from the custom one"
    for endpoint, prices in ((code, (1e-3, 2e-3)), (review, (prompt_price, completion_price)), (local, (1e-3, 2e-3))):
        _, usage = client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": endpoint.role},
                                     mock_response="hello there")
        expected = usage.prompt_tokens * prices[0] + usage.completion_tokens * prices[1]
        assert usage.cost == pytest.approx(expected, rel=1e-6), (endpoint.role, usage.cost, expected)


def test_a_cost_limit_needs_a_price_for_every_model():
    """Issue 31 item 3: with ``max_cost_usd``, a model litellm does not price and no custom
    price is refused before any call (ConfigError: exit 2, one line naming the keys)."""
    from swarm_evo.config import ConfigError
    from swarm_evo.llm.probe import check_model_access

    unpriced = ModelEndpoint(name="openai/swarm-evo-unpriced-d", api_key="x", max_cost_usd=0.5)
    with pytest.raises(ConfigError, match=r"model\.max_cost_usd is 0\.5 but litellm has no price for the code model "
                                          r"'openai/swarm-evo-unpriced-d'.*model\.input_cost_per_token and "
                                          r"model\.output_cost_per_token"):
        check_model_access(unpriced)
    check_model_access(unpriced.model_copy(update={"max_cost_usd": None}))  # no limit: no price needed
    check_model_access(unpriced.model_copy(update={"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}))
    check_model_access(ModelEndpoint(**OPENAI, max_cost_usd=0.5))  # litellm prices it
    check_model_access(ModelEndpoint(name="offline", max_cost_usd=0.5))  # free
    with pytest.raises(ConfigError, match=r"the review model 'openai/swarm-evo-unpriced-e'"):
        check_model_access(ModelEndpoint(**OPENAI, max_cost_usd=0.5).for_role("review", "openai/swarm-evo-unpriced-e"))


def test_a_run_with_a_cost_limit_and_no_price_is_exit_2(tmp_path, capsys, monkeypatch):
    """Issue 31 item 3, seen: ``max_cost_usd: 0.5`` with an unpriced ``openai/...`` model ran to
    the end with "cost unknown". Now ``swarm-evo run`` ends at start with exit 2 and one line."""
    from swarm_evo.cli.commands import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["prepare", "sklearn-diabetes", "--data-dir", str(tmp_path)]) == 0
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  name: openai/swarm-evo-unpriced-f\n  max_cost_usd: 0.5\n")
    args = ["run", "--competition-id", "sklearn-diabetes", "--data-dir", str(tmp_path), "--config", str(config),
            "--run-dir", str(tmp_path / "run")]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("swarm-evo: error: "), err
    assert "model.input_cost_per_token" in err and "output_cost_per_token" in err and "max_cost_usd" in err, err
    assert not (tmp_path / "run").exists()
    config.write_text(config.read_text() + "  input_cost_per_token: 0.0\n  output_cost_per_token: 0.0\n")
    assert main(args) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err, "priced now: the next check (the key) speaks"


# ------------------------------------------------------------------ the deadline
def test_no_call_starts_after_the_deadline(monkeypatch):
    sent = []
    monkeypatch.setattr(litellm, "completion", lambda **kw: sent.append(kw))
    endpoint = ModelEndpoint(**OPENAI, deadline=time.time() - 1)
    with pytest.raises(DeadlineReached):
        client.call_model(endpoint, [{"role": "user", "content": "hi"}], None)
    assert sent == []


def test_timeout_and_retries_are_cut_to_the_time_left(monkeypatch):
    sent, real = [], litellm.completion

    def spy(**kwargs):
        sent.append(kwargs)
        return real(**kwargs, mock_response="ok")

    monkeypatch.setattr(litellm, "completion", spy)
    endpoint = ModelEndpoint(**OPENAI, timeout=600, num_retries=3, deadline=time.time() + 25)
    client.call_model(endpoint, [{"role": "user", "content": "hi"}], None)
    assert sent[0]["timeout"] <= 25 and sent[0]["num_retries"] == 0
    roomy = ModelEndpoint(**OPENAI, timeout=10, num_retries=3, deadline=time.time() + 1000)
    client.call_model(roomy, [{"role": "user", "content": "hi"}], None)
    assert sent[1]["timeout"] == 10 and sent[1]["num_retries"] == 3  # (2·3+1)·10 s + 3 s fit in 1000 s


def test_no_call_starts_once_the_cost_limit_is_reached(monkeypatch, tmp_path):
    sent, real = [], litellm.completion

    def spy(**kwargs):
        sent.append(kwargs)
        return real(**kwargs, mock_response="ok")

    monkeypatch.setattr(litellm, "completion", spy)
    ledger_path = tmp_path / "llm_calls.jsonl"
    endpoint = ModelEndpoint(**OPENAI, ledger_path=str(ledger_path), max_cost_usd=0.05,
                                    input_cost_per_token=1e-3, output_cost_per_token=1e-3)
    client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": "draft"})
    ledger_for(ledger_path).record(role="code", operation="draft", model="m", ok=True, cost_usd=0.06)
    with pytest.raises(CostLimitReached, match=r"max_cost_usd reached") as info:
        client.call_model(endpoint, [{"role": "user", "content": "hi"}], {"purpose": "review"})
    assert len(sent) == 1, "the second call was not sent"
    assert isinstance(info.value, DeadlineReached), "steps end as they do at the deadline"


def test_a_transient_error_near_the_deadline_is_not_retried():
    endpoint = ModelEndpoint(**OPENAI, num_retries=0, deadline=time.time() + client.RETRY_HORIZON / 2)
    error = litellm.InternalServerError(message="busy", model="gpt-4o-mini", llm_provider="openai")
    with pytest.raises(DeadlineReached) as info:
        client.call_model(endpoint, [{"role": "user", "content": "hi"}], None, mock_response=error)
    assert isinstance(info.value.__cause__, litellm.InternalServerError)
    assert not isinstance(info.value, transient_errors())


# ------------------------------------------------------------------ the preflight probe
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name,suffix", [("openai/stand-in", "/v1"), ("hosted_vllm/stand-in", "/v1"),
                                         ("ollama_chat/stand-in", "")])
def test_probe_names_an_unreachable_endpoint_and_the_fix(name, suffix):
    base = f"http://127.0.0.1:{_closed_port()}{suffix}"
    started = time.perf_counter()
    with pytest.raises(ModelAccessError) as info:
        probe_model(ModelEndpoint(name=name, api_base=base, api_key="x", timeout=20))
    message = str(info.value)
    assert base in message and name in message and "start the server or fix model.api_base" in message
    assert "\n" not in message and time.perf_counter() - started < 10


def test_probe_of_the_offline_model_costs_nothing():
    assert probe_model(ModelEndpoint()).usage.calls == 0


# ------------------------------------------------------------------ strict reviewers
def _passing_attempt(code: str = "print('Validation metric: 0.8')\n", attempt: int = 0) -> Attempt:
    result = ExecutionResult(stdout="Validation metric: 0.8\n", term_out="Validation metric: 0.8\n", exit_code=0,
                             exec_time=1.0)
    return Attempt(attempt=attempt, code=code, result=result)


def test_a_reviewer_only_bug_is_debugged_with_the_reviewers_reason():
    final = _passing_attempt()
    outcome = decide_review(final.result, {"is_bug": True, "summary": "target leakage in the features",
                                           "approach_tag": "x", "has_csv_submission": True, "metric": None}, [])
    assert outcome.is_buggy and flagged_by_reviewer(outcome, final)
    reasons = reviewer_reasons(outcome)
    assert any("target leakage" in r for r in reasons)
    seen = []

    def fixed(n, previous):
        seen.append((n, previous.problems))
        return _passing_attempt("print('Validation metric: 0.79')\n", attempt=n)

    chain = run_debug_chain(final, 2, fixed)
    assert chain.attempts == 0  # nothing failed deterministically
    chain = debug_flagged(chain, reasons, 2, fixed)
    assert seen == [(1, reasons)] and chain.attempts == 1 and not chain.dead
    assert "0.79" in chain.final.code


def test_a_flagged_program_is_kept_when_its_debug_breaks_it():
    final = _passing_attempt()

    def broken(n, previous):
        result = ExecutionResult(stdout="", term_out="NameError", exit_code=1, exc_type="NameError", exec_time=1.0)
        return Attempt(attempt=n, code="boom\n", result=result, problems=["NameError"],
                       usage=LLMUsage(calls=1, prompt_tokens=5))

    chain = run_debug_chain(final, 2, broken)
    kept = debug_flagged(chain, ["the reviewer judged it buggy"], 2, broken)
    assert kept.final.code == final.code and not kept.dead
    assert kept.attempts == 2 and kept.usage.calls == 2 and len(kept.history) == 3


def test_a_strict_reviewer_still_leaves_a_submission_candidate(tmp_path):
    journal = Journal(None)
    failed = make_node(metric=None, is_buggy=True, dead=True)
    flagged_good = make_node(metric=0.81, is_buggy=True)
    flagged_good.metadata.update(facts_passed=True, review={"reasons": ["LLM review reports a bug: leakage"]})
    flagged_worse = make_node(metric=0.70, is_buggy=True)
    flagged_worse.metadata.update(facts_passed=True, review={"reasons": ["LLM review reports a bug"]})
    for node in (failed, flagged_worse, flagged_good):
        journal.append(node)
    node, why = journal.submission_candidate()
    assert node is flagged_good
    assert "passed every deterministic check" in why and "leakage" in why
    valid = make_node(metric=0.5)
    journal.append(valid)
    node, why = journal.submission_candidate()
    assert node is valid and "valid node" in why


def test_unchanged_debug_fix_is_recognised():
    assert same_program("a = 1\n\nb = 2\n", "a = 1   \nb = 2")
    assert not same_program("a = 1\nb = 2\n", "a = 1\nb = 3\n")


# ------------------------------------------------------------------ nothing lost on a kill
@pytest.mark.slow  # a `swarm-evo run` process
def test_a_run_killed_after_its_first_valid_node_has_a_valid_submission(tmp_path, prefect_api_url):
    from swarm_evo.competition import load_competition, prepare_competition, validate_submission

    data = tmp_path / "data"
    prepare_competition("sklearn-breast-cancer", None, data)
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PREFECT_LOGGING_LEVEL="WARNING", PREFECT_API_URL=prefect_api_url)
    cmd = [sys.executable, "-m", "swarm_evo.cli", "run", "--competition-id", "sklearn-breast-cancer",
           "--data-dir", str(data), "--max-steps", "20", "--seed", "1", "--run-dir", str(run_dir),
           "--python", sys.executable]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            journal = run_dir / "journal.json"
            if journal.exists():
                nodes = json.loads(journal.read_text())["nodes"]
                if any(not n["is_buggy"] and not n["dead"] for n in nodes):
                    break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    submission = run_dir / "submission" / "submission.csv"
    assert submission.exists(), "the best submission is written when the best improves, not at the end"
    assert validate_submission(submission, load_competition("sklearn-breast-cancer", data)) == []
    assert (run_dir / "best_solution.py").read_text().count("# [SECTION:") == 7


# ------------------------------------------------------------------ stops: cost, a failing model
def _session(tmp_path, **model):
    from swarm_evo.competition import prepare_competition
    from swarm_evo.config import RunConfig
    from swarm_evo.run.session import open_session

    prepare_competition("sklearn-wine", None, tmp_path / "data")
    config = RunConfig().with_overrides({"search.max_steps": 50, **{f"model.{k}": v for k, v in model.items()}})
    return open_session(competition_id="sklearn-wine", data_dir=tmp_path / "data", run_dir=tmp_path / "run",
                        config=config, endpoint=endpoint_for(config.model))


def _failed_generation(session, error: Exception):
    slot = session.budget.reserve()
    request = OperationRequest(operation="draft", phase=1, slot=slot, template="draft.j2", prompt="p", ctx={})
    node = assembly.failed_generation_node(session, f"n{slot}", request, error, epoch=1, wall_seconds=0.1)
    return persistence.append_node(session, node, request)


def test_a_new_best_is_handed_in_before_the_journal_file_records_it(tmp_path):
    """A kill between the two writes must not leave a valid node on disk without its
    submission (the SIGKILL test above hits that window only now and then)."""
    session = _session(tmp_path)
    on_disk_at_hand_in: list[list[str]] = []

    def hand_in(run_dir, node):
        on_disk_at_hand_in.append([n["id"] for n in json.loads((run_dir / "journal.json").read_text())["nodes"]])

    session.objective.publish_best = hand_in
    for i, metric in enumerate((0.5, 0.4, 0.7)):  # the second is no improvement: nothing handed in
        slot = session.budget.reserve()
        request = OperationRequest(operation="draft", phase=1, slot=slot, template="draft.j2", prompt="p", ctx={})
        persistence.append_node(session, make_node(metric=metric, id=f"n{i}"), request)
    assert on_disk_at_hand_in == [[], ["n0", "n1"]], "handed in before the journal file has the node"
    assert [n["id"] for n in json.loads((session.run_dir / "journal.json").read_text())["nodes"]] == ["n0", "n1", "n2"]


def test_a_model_failing_again_and_again_stops_the_run_as_a_failure(tmp_path):
    session = _session(tmp_path, max_consecutive_failures=3)
    for _ in range(2):
        _failed_generation(session, litellm.InternalServerError(message="down", model="m", llm_provider="openai"))
    assert limits.check_limits(session) is None and not session.finished
    _failed_generation(session, GenerationError("no usable program in 2 replies"))
    reason = limits.check_limits(session)
    assert session.finished and session.stop_is_failure
    assert "failed 3 times in a row" in reason and f"swarm-evo resume {session.run_dir}" in reason
    assert "no usable program" in reason


def test_max_cost_stops_the_run_cleanly(tmp_path):
    session = _session(tmp_path, max_cost_usd=0.05)
    session.ledger.record(role="code", operation="draft", model="m", ok=True, cost_usd=0.03)
    assert limits.check_limits(session) is None
    session.ledger.record(role="review", operation="review", model="m", ok=True, cost_usd=0.025)
    reason = limits.check_limits(session)
    assert "max_cost_usd reached" in reason and "$0.0550" in reason
    assert session.finished and not session.stop_is_failure
