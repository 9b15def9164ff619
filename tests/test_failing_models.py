"""Failing models (issue 7): timeouts, 429s, 5xx, a reply without code, invalid tool-call JSON,
an empty reply. Transient errors are retried (litellm ``num_retries`` at once, then Prefect
task retries with backoff); what still fails becomes a dead ``GenerationError`` node counted in
the budget (a step), a failed attempt (debug), a review on the facts alone, or an agent that
keeps its texts; the run goes on.

Failures come from the offline model's injector (swarm_evo/llm/offline/failures.py): either
at random (``model.injected_failure_rate``) or, for exact call counts, scripted per call key.
Prefect's retry delays are set to 0 here (``task.with_options``); the production delays are
tasks._policy.RETRY_DELAYS.
"""

from __future__ import annotations

import json
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

import litellm
import pandas as pd
import pytest
import yaml
from prefect import flow

from swarm_evo.config import ConfigError, RunConfig, load_config
from swarm_evo.llm import client, replies
from swarm_evo.llm.endpoint import ModelEndpoint, endpoint_for
from swarm_evo.llm.errors import GenerationError, transient_errors
from swarm_evo.llm.offline import failures
from swarm_evo.search.review import parse_metric

TRANSIENT = {
    "timeout": (litellm.Timeout, 408),
    "rate_limit": (litellm.RateLimitError, 429),
    "server_error:500": (litellm.InternalServerError, 500),
    "server_error:503": (litellm.ServiceUnavailableError, 503),
}
NUM_RETRIES = 1
"""litellm re-calls per Prefect attempt in these tests: each task attempt makes 2 calls."""
PREFECT_ATTEMPTS = 4
"""1 + len(RETRY_DELAYS): a transient error that persists costs 2 × 4 = 8 calls."""


# --------------------------------------------------------------------------- helpers
class Script:
    """Replace the injector's decision for scripted call keys: ``plans[key]`` lists the kind of
    each call in turn (None = answer; past the end = answer); keys are fnmatch patterns.
    Other keys go to the real injector (``injected_failure_rate``)."""

    def __init__(self, real):
        self.real = real
        self.plans: dict[str, list] = {}
        self.calls: Counter = Counter()

    def plan(self, key: str):
        return next((kinds for pattern, kinds in self.plans.items() if fnmatchcase(key, pattern)), None)

    def decide(self, ctx, tool_call):
        key = str(ctx.get("call_key"))
        kinds = self.plan(key)
        if kinds is None:
            return self.real(ctx, tool_call)
        self.calls[key] += 1
        n = self.calls[key]
        kind = kinds[n - 1] if n <= len(kinds) else None
        return failures.Injection(kind, key, n) if kind else None


@pytest.fixture()
def script(monkeypatch):
    failures.reset()
    s = Script(failures.INJECTOR.decide)
    monkeypatch.setattr(failures.INJECTOR, "decide", s.decide)
    return s


@pytest.fixture()
def fast_retries(monkeypatch):
    """Every LLM task with the same retries and condition, but no delay between attempts."""
    import flows._step
    import flows.debug_attempt
    import tasks.agents
    import tasks.review

    for module, name in [(flows._step, "generate"), (flows.debug_attempt, "generate_debug"),
                         (tasks.review, "review"), (tasks.agents, "ask_agent_texts")]:
        task = getattr(module, name)
        assert task.retries == PREFECT_ATTEMPTS - 1 and task.retry_condition_fn is not None
        monkeypatch.setattr(module, name, task.with_options(retry_delay_seconds=0))


# --------------------------------------------------------------------------- the injector
@pytest.mark.parametrize("kind", sorted(TRANSIENT))
def test_transient_kinds_raise_real_litellm_errors(kind):
    cls, status = TRANSIENT[kind]
    with pytest.raises(cls) as info:
        failures.apply(failures.Injection(kind, "slot1:draft", 1), "swarm-evo", None)
    assert info.value.status_code == status and isinstance(info.value, transient_errors())
    assert "injected failure on call slot1:draft" in str(info.value)


def test_transient_errors_are_timeouts_rate_limits_connection_errors_and_5xx():
    where = dict(llm_provider="openai", model="gpt")
    transient = [litellm.Timeout("t", **where), litellm.RateLimitError("r", **where),
                 litellm.APIConnectionError("c", **where), litellm.InternalServerError("i", **where),
                 litellm.BadGatewayError("b", **where), litellm.ServiceUnavailableError("u", **where)]
    assert [e.status_code for e in transient] == [408, 429, 500, 500, 502, 503]
    assert all(isinstance(e, transient_errors()) for e in transient)
    permanent = [litellm.AuthenticationError("a", **where), litellm.BadRequestError("b", **where),
                 litellm.ContextWindowExceededError("w", **where), GenerationError("no code")]
    assert not any(isinstance(e, transient_errors()) for e in permanent)


def test_bad_reply_kinds():
    assert replies.extract_code(failures.apply(failures.Injection("no_code_block", "k", 1), "m", None).content) is None
    empty = failures.apply(failures.Injection("empty", "k", 1), "m", "submit_review")
    assert empty.content == "" and empty.tool_name is None
    bad = failures.apply(failures.Injection("invalid_tool_json", "k", 1), "m", "submit_review")
    assert bad.tool_name == "submit_review"
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad.tool_arguments_text)


def test_injector_rate_kinds_and_fresh_decisions_per_try():
    injector = failures.FailureInjector()
    code = [injector.decide({"injected_failure_rate": 0.2, "seed": 1, "call_key": f"c{i}"}, False) for i in range(3000)]
    tool = [injector.decide({"injected_failure_rate": 0.2, "seed": 1, "call_key": f"t{i}"}, True) for i in range(3000)]
    for decisions, allowed in ((code, failures.CODE_KINDS), (tool, failures.TOOL_KINDS)):
        hits = [d.kind.split(":")[0] for d in decisions if d is not None]
        assert 0.17 < len(hits) / len(decisions) < 0.23
        counts = Counter(hits)
        assert set(counts) == set(allowed), "kinds the call can take, and only those"
        assert all(abs(n / len(hits) - 1 / len(allowed)) < 0.06 for n in counts.values()), counts
    # a retried call decides afresh (a retry can succeed), the same way in a fresh process
    tries = [injector.decide({"injected_failure_rate": 0.5, "seed": 1, "call_key": "again"}, False) for _ in range(40)]
    assert any(t is None for t in tries) and any(t is not None for t in tries)
    fresh = failures.FailureInjector()
    assert [fresh.decide({"injected_failure_rate": 0.5, "seed": 1, "call_key": "again"}, False) for _ in range(40)] == tries
    stats = injector.stats()
    assert stats["calls"] == 6040 and sum(stats["injected"].values()) == sum(t is not None for t in code + tool + tries)
    assert sum(stats["recovered"].values()) > 0
    assert failures.FailureInjector().decide({"seed": 1, "call_key": "x"}, False) is None, "rate 0: no injection"


def test_reply_does_not_depend_on_the_injection(data_dir):
    """The failure decision has its own generator: when a call answers, it answers as without
    injection (the offline model's reply depends on seed and call key only)."""
    from swarm_evo.competition import load_competition
    from swarm_evo.llm.offline import respond
    from swarm_evo.objective.competition import CompetitionObjective

    view = CompetitionObjective(load_competition("spaceship-titanic", data_dir)).offline_view()
    ctx = {"purpose": "draft", "seed": 3, "call_key": "slot1:draft", "fault_rate": 0.0, "repair_rate": 1.0, **view}
    endpoint = ModelEndpoint(name="offline", num_retries=3, injected_failure_rate=0.5)
    failures.reset()
    reply = client.complete_code(endpoint, "p", ctx)
    assert "```python\n" + reply.code in respond(ctx).content


def test_config_allows_injection_only_for_the_offline_model(tmp_path):
    assert RunConfig().model.injected_failure_rate == 0.0
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  name: openai/gpt-4o-mini\n  injected_failure_rate: 0.2\n")
    with pytest.raises(ConfigError, match=r"'model': injected_failure_rate applies to the offline model only.*"
                                          r"set model.injected_failure_rate to 0, or model.name to offline"):
        load_config(path)
    path.write_text("model:\n  injected_failure_rate: 1.5\n")
    with pytest.raises(ConfigError, match="model.injected_failure_rate"):
        load_config(path)
    config = RunConfig().with_overrides({"model.injected_failure_rate": 0.2})
    with pytest.raises(ConfigError, match="offline model only"):
        config.with_overrides({"model.name": "anthropic/claude-3-5-sonnet-latest"})


# --------------------------------------------------------------------------- steps through Prefect
@pytest.fixture(scope="module")
def wine(prefect_server, tmp_path_factory):
    """A run session on sklearn-wine (no Prefect run around it: each test starts real step
    subflows and tasks): litellm num_retries 1, debug chain of 2, two agents."""
    from swarm_evo.competition import prepare_competition
    from swarm_evo.run.session import open_session

    tmp = tmp_path_factory.mktemp("failing")
    prepare_competition("sklearn-wine", None, tmp / "data")
    config = RunConfig().with_overrides({
        "search.max_steps": 200, "search.debug_max_attempts": 2, "search.parallel_workers": 1,
        "model.fault_rate": 0.0, "model.repair_rate": 1.0, "model.num_retries": NUM_RETRIES,
        "agents.num_agents": 2, "agents.evolution_interval": 1, "agents.evolution_min_records": 0,
    })
    return open_session(competition_id="sklearn-wine", data_dir=tmp / "data", run_dir=tmp / "run",
                        config=config, endpoint=endpoint_for(config.model))


def _step(session, script, plans: dict[str, list]):
    """One real draft_step subflow with ``plans`` (keys relative to the slot, e.g. "draft");
    returns the node it appended and the calls per plan key."""
    from flows.draft_step import draft_step

    slot = session.budget.reserve()
    script.plans = {f"slot{slot}:{key}": kinds for key, kinds in plans.items()}
    before, used = len(session.journal), session.budget.used
    draft_step(run_dir=str(session.run_dir), slot=slot, epoch=1, return_state=True)  # a dead node's run ends Failed
    assert len(session.journal) == before + 1 and session.budget.used == used + 1, "one node, counted"
    return session.journal.nodes[-1], {key: script.calls[f"slot{slot}:{key}"] for key in plans}


@pytest.mark.parametrize("kind", sorted(TRANSIENT))
def test_transient_error_is_retried_by_litellm_then_by_prefect(wine, script, fast_retries, kind):
    # attempt 1: call + litellm re-call fail; attempt 2 (Prefect retry): fails once, then answers
    node, calls = _step(wine, script, {"draft": [kind, kind, kind, None]})
    assert calls == {"draft": 4}
    assert not node.dead and node.exc_type is None and node.metric_value is not None


@pytest.mark.parametrize("kind", sorted(TRANSIENT))
def test_transient_error_that_persists_gives_a_dead_generation_node(wine, script, fast_retries, kind):
    cls, _ = TRANSIENT[kind]
    node, calls = _step(wine, script, {"draft": [kind] * 20})
    assert calls == {"draft": 2 * PREFECT_ATTEMPTS}
    assert node.dead and node.is_buggy and node.exc_type == "GenerationError"
    assert node.exc_info.startswith(f"{cls.__name__}: ") and "injected failure on call" in node.exc_info
    assert node.metadata["generation_error"] == {"type": cls.__name__, "transient": True}


@pytest.mark.parametrize("kind", ["rate_limit", "server_error:503"])
def test_transient_error_near_the_deadline_ends_the_step_without_a_node(wine, script, fast_retries, monkeypatch, kind):
    """Issue 31 item 6: with less than the retry horizon left, a 429/5xx ends the step as the
    deadline does: no dead node, the slot back, no failure stop (the run ends cleanly)."""
    import time

    from flows.draft_step import draft_step
    from swarm_evo.step import limits

    left = client.RETRY_HORIZON / 2
    monkeypatch.setattr(wine.budget, "time_limit", wine.budget.elapsed() + left)
    monkeypatch.setattr(wine, "endpoint", wine.endpoint.model_copy(update={"deadline": time.time() + left}))
    monkeypatch.setattr(wine, "stop_reason", None)  # restored after the test: the module's session goes on
    monkeypatch.setattr(wine, "stop_is_failure", False)
    slot = wine.budget.reserve()
    script.plans = {f"slot{slot}:draft": [kind] * 20}
    before, used = len(wine.journal), wine.budget.used
    draft_step(run_dir=str(wine.run_dir), slot=slot, epoch=1)
    assert script.calls[f"slot{slot}:draft"] == 1, "not retried: no retry fits before the deadline"
    assert len(wine.journal) == before, "no dead node"
    assert wine.budget.used == used and wine.budget.in_flight == 0, "the slot went back to the budget"
    assert wine.finished and not wine.stop_is_failure, "no new step starts; the run is no failure"
    assert "time limit" in limits.check_limits(wine)


@pytest.mark.parametrize("kind", ["no_code_block", "empty"])
def test_bad_reply_is_asked_again_once(wine, script, fast_retries, kind):
    node, calls = _step(wine, script, {"draft": [kind, None]})
    assert calls == {"draft": 2} and not node.dead and node.metric_value is not None


@pytest.mark.parametrize("kind", ["no_code_block", "empty"])
def test_bad_reply_twice_gives_a_dead_generation_node_without_prefect_retry(wine, script, fast_retries, kind):
    node, calls = _step(wine, script, {"draft": [kind, kind, None]})
    assert calls == {"draft": 2}, "a GenerationError is not retried by Prefect"
    assert node.dead and node.exc_type == "GenerationError"
    assert node.exc_info.startswith("GenerationError: no usable program in 2 replies: the reply ")
    assert node.llm_usage.calls == 2 and node.metadata["generation_error"]["transient"] is False


SELF_FIX_FAILURES = {
    "400": lambda: litellm.BadRequestError(message="context window exceeded", model="swarm-evo", llm_provider="offline"),
    "content-policy": lambda: litellm.ContentPolicyViolationError(message="flagged", model="swarm-evo",
                                                                  llm_provider="offline"),
    "429-for-good": None,  # the injector's rate limit on every try: litellm's retry, then the error
}


@pytest.mark.parametrize("failure", sorted(SELF_FIX_FAILURES))
def test_a_failed_self_fix_runs_the_original_program(wine, script, fast_retries, monkeypatch, failure):
    """Issue 31 item 4: a model error on the optional self-fix call runs the program it was
    fixing; the task is not retried, so the draft is paid once; the failed call counts in the
    node's usage."""
    from swarm_evo.step import generation

    monkeypatch.setattr(wine.objective, "static_check", lambda code: ["planted: the check always fails"])
    replies, complete_code = [], generation.complete_code
    monkeypatch.setattr(generation, "complete_code", lambda *a, **k: replies.append(complete_code(*a, **k)) or replies[-1])
    make = SELF_FIX_FAILURES[failure]
    if make is None:
        plans, error = {"draft": [], "fix": ["rate_limit"] * 20}, "RateLimitError"
    else:
        plans, refused, real = {"draft": []}, make(), litellm.completion

        def completion(**kwargs):
            if ((kwargs.get("metadata") or {}).get("swarm_evo") or {}).get("purpose") == "fix":
                raise refused
            return real(**kwargs)

        monkeypatch.setattr(litellm, "completion", completion)
        error = type(refused).__name__
    node, calls = _step(wine, script, plans)
    assert calls["draft"] == 1, "the draft is paid once: no Prefect retry of generate"
    assert not node.dead and node.exc_type is None and node.metric_value is not None, "the original program ran"
    record = node.metadata["prevalidation"]
    assert record["fixed"] is False and record["errors_after"] is None
    assert record["fix_error"].startswith(f"{error}: "), record
    assert len(replies) == 1 and node.code == replies[0].code, "the program it was fixing ran"
    assert node.llm_usage.calls == 3, "draft, the failed self-fix, review"


@pytest.mark.parametrize("plans,calls", [
    ({"draft": ["rate_limit", "rate_limit", None], "review": ["rate_limit"] * 20}, 2 + PREFECT_ATTEMPTS),
    ({"draft": ["rate_limit"] * 20}, PREFECT_ATTEMPTS),
], ids=["retried-draft-and-failed-review", "dead-generation"])
def test_a_nodes_usage_counts_every_call_made_for_it(wine, script, fast_retries, plans, calls):
    """Issue 31 item 4: ``llm_usage`` holds the failed calls too, those of Prefect task
    attempts that were retried and those of a generation or review that failed for good: the
    same calls the ledger has for the node."""
    node, _ = _step(wine, script, plans)
    lines = (wine.run_dir / "llm_calls.jsonl").read_text().splitlines()
    own = [e for e in map(json.loads, lines) if str(e.get("scope") or "").startswith(f"{node.id}/")]
    assert node.llm_usage.calls == calls and len(own) == calls, (node.llm_usage, own)
    assert node.llm_usage.seconds == pytest.approx(sum(e["seconds"] for e in own), abs=1e-6)
    assert node.dead == ("review" not in plans)


@pytest.mark.parametrize("kinds", [["invalid_tool_json", "invalid_tool_json"], ["empty", "invalid_tool_json"],
                                   ["rate_limit"] * 20], ids=["invalid-json", "empty", "429-for-good"])
def test_review_without_usable_model_falls_back_to_the_metric_line(wine, script, fast_retries, kinds):
    node, calls = _step(wine, script, {"review": kinds})
    assert calls["review"] == min(len(kinds), 2 * PREFECT_ATTEMPTS)
    assert not node.dead and not node.is_buggy, "the node is kept and judged on the facts"
    assert node.metric_value is not None and node.metric_value == parse_metric(node.term_out)
    reasons = node.metadata["review"]["reasons"]
    assert any(r.startswith("review call:") for r in reasons), reasons
    from swarm_evo.search.approach_tag import derive_approach_tag

    assert node.approach_tag == derive_approach_tag(node.code) != "unknown", "issue 13: the tag comes from the code"


@pytest.mark.parametrize("kinds", [["empty", "no_code_block"], ["server_error:503"] * 20], ids=["no-code", "503"])
def test_debug_attempt_without_program_fails_and_the_chain_goes_on(wine, script, fast_retries, monkeypatch, kinds):
    monkeypatch.setattr(wine.config.model, "fault_rate", 1.0)  # every draft has a planted bug
    node, calls = _step(wine, script, {"draft": [], "debug1": kinds, "debug2": []})
    assert calls["debug1"] == min(len(kinds), 2 * PREFECT_ATTEMPTS) and calls["debug2"] == 1
    history = node.metadata["debug_history"]
    assert [h["attempt"] for h in history] == [0, 1, 2]
    assert history[1]["exc_type"] == "GenerationError" and "produced no program" in history[1]["term_out"]
    assert history[1]["code"] == history[0]["code"], "a failed generation keeps the previous program"
    debug2 = (wine.run_dir / "nodes" / node.id / "prompt-debug2.md").read_text()
    assert "produced no program" not in debug2, "attempt 2 works on the program that ran, not on attempt 1"
    assert node.debug_attempts == 2 and not node.dead and node.metric_value is not None


@pytest.mark.parametrize("kinds,rewritten", [(["rate_limit"] * 20, False), (["invalid_tool_json"] * 2, False),
                                             (["timeout", "timeout", None], True)],
                         ids=["429-for-good", "invalid-json", "timeout-then-ok"])
def test_agent_evolution_survives_a_failing_model(wine, script, fast_retries, kinds, rewritten):
    import tasks.agents
    from swarm_evo.learning.agent_evolution import load_evolutions

    if len(wine.experience) < 2:
        _step(wine, script, {})
    script.plans = {"evolution*": kinds}
    before = {a: wine.agents.get(a).texts for a in wine.agents.ids}

    @flow
    def evolve():
        return tasks.agents.evolve_agents(str(wine.run_dir), 1)

    summary = evolve()
    record = load_evolutions(wine.run_dir)[-1]
    (rewrite,) = record.rewrites
    assert sum(script.calls.values()) == min(len(kinds), 2 * PREFECT_ATTEMPTS)
    assert summary["index"] == record.index
    if rewritten:
        assert rewrite.error is None and summary["rewritten"] == [rewrite.agent_id]
    else:
        assert rewrite.error and summary["failed"] == {rewrite.agent_id: rewrite.error}
        assert wine.agents.get(rewrite.agent_id).texts == before[rewrite.agent_id], "texts kept"
        expected = "the model failed: RateLimitError" if "rate_limit" in kinds else "not JSON"
        assert expected in rewrite.error


def test_auxiliary_metrics_writer_survives_a_failing_model(prefect_server, tmp_path, script):
    from swarm_evo.run.session import open_session
    from swarm_evo.step import problem_setup

    config = RunConfig().with_overrides({"model.num_retries": NUM_RETRIES, "search.max_steps": 1})
    session = open_session(problem=str(Path(__file__).parent / "fixtures" / "problems" / "sum-squares"),
                           run_dir=tmp_path / "run", config=config, endpoint=endpoint_for(config.model))
    problem_setup.evaluate_initial_program(session)
    script.plans = {"auxiliary_metrics": ["rate_limit", "rate_limit"]}
    with pytest.raises(litellm.RateLimitError):  # transient: for the Prefect task's retries
        problem_setup.write_auxiliary_metrics(session)
    script.plans, script.calls = {"auxiliary_metrics": ["no_code_block", "empty"]}, Counter()
    record = problem_setup.write_auxiliary_metrics(session)
    assert record["written"] is False and record["error"].startswith("GenerationError: no usable program")
    assert not session.objective.auxiliary_path.exists()
    assert json.loads((session.run_dir / problem_setup.AUXILIARY_RECORD).read_text())["error"] == record["error"]


# --------------------------------------------------------------------------- a whole run
@pytest.fixture(scope="module")
def faulty_run(prefect_server, tmp_path_factory):
    """two-phase-evo on sklearn-wine, 10 nodes, planted bugs (fault_rate 0.5) and injected
    model failures at rate 0.5 on every call, with a few calls scripted so that every path
    runs whatever the random draws: a draft without code twice, a draft rate-limited for good,
    a review with invalid tool JSON twice, a debug attempt without program, an evolution whose
    calls time out for good."""
    import flows._step
    import flows.debug_attempt
    import tasks.agents
    import tasks.review
    from flows.two_phase_evo import two_phase_evo

    mp = pytest.MonkeyPatch()
    for module, name in [(flows._step, "generate"), (flows.debug_attempt, "generate_debug"),
                         (tasks.review, "review"), (tasks.agents, "ask_agent_texts")]:
        mp.setattr(module, name, getattr(module, name).with_options(retry_delay_seconds=0))
    failures.reset()
    script = Script(failures.INJECTOR.decide)
    script.plans = {"slot1:draft": ["no_code_block", "empty"], "slot2:draft": ["rate_limit"] * 20,
                    "slot3:review": ["invalid_tool_json", "invalid_tool_json"], "slot*:debug1": ["empty", "empty"],
                    "evolution1:*": ["timeout"] * 20}
    mp.setattr(failures.INJECTOR, "decide", script.decide)

    tmp = tmp_path_factory.mktemp("faulty")
    from swarm_evo.competition import prepare_competition

    prepare_competition("sklearn-wine", None, tmp / "data")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({
        "search": {"steps_per_epoch": 5, "phase1_target_nodes": 3, "debug_max_attempts": 2},
        "model": {"fault_rate": 0.5, "repair_rate": 0.8, "injected_failure_rate": 0.5, "num_retries": NUM_RETRIES},
        "agents": {"num_agents": 2, "evolution_interval": 1, "evolution_min_records": 0},
        "sandbox": {"exec_timeout": 19},  # the offline model writes quick-tier programs for a 19 s limit
    }))
    try:
        summary = two_phase_evo(competition_id="sklearn-wine", data_dir=str(tmp / "data"), run_dir=str(tmp / "run"),
                                model="offline", max_steps=10, seed=4, parallel_workers=2, config_path=str(config))
    finally:
        mp.undo()
    return summary, tmp / "run", tmp / "data", script, failures.stats()


def test_run_with_failing_model_fills_its_budget(faulty_run):
    summary, run_dir, _, script, stats = faulty_run
    nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
    assert len(nodes) == 10, "every step, dead or alive, counts in the budget"
    dead_generation = [n for n in nodes if n["exc_type"] == "GenerationError" and not n["code"]]
    assert len(dead_generation) >= 2 and all(n["dead"] for n in dead_generation)
    texts = [n["exc_info"] for n in dead_generation]
    assert any(t.startswith("GenerationError: no usable program in 2 replies") for t in texts), texts
    assert any(t.startswith("RateLimitError: ") and "injected failure" in t for t in texts), texts
    # random injections on the other calls, many of them recovered by a retry or a re-ask
    assert sum(stats["injected"].values()) >= 10 and sum(stats["recovered"].values()) >= 5, stats
    assert script.calls["slot2:draft"] == 2 * PREFECT_ATTEMPTS and script.calls["slot1:draft"] == 2


def test_run_with_failing_model_writes_a_valid_submission(faulty_run):
    from swarm_evo.competition import load_competition
    from swarm_evo.competition.submission import validate_submission

    summary, run_dir, data_dir, _, _ = faulty_run
    submission = run_dir / "submission" / "submission.csv"
    assert submission.is_file() and not validate_submission(submission, load_competition("sklearn-wine", data_dir))
    assert len(pd.read_csv(submission)) > 0
    grade = json.loads((run_dir / "grade_report.json").read_text())
    assert grade["submission_exists"] and grade["valid_submission"] and grade["score"] is not None


def test_run_with_failing_model_keeps_reviews_debugs_and_evolutions(faulty_run):
    _, run_dir, _, script, _ = faulty_run
    nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
    if script.calls["slot3:review"]:
        reviewed = [n for n in nodes
                    if any(r.startswith("review call:") for r in n["metadata"].get("review", {}).get("reasons", []))]
        assert reviewed, "a review without a usable tool call decides on the facts"
    debugged = [n for n in nodes if any(h["exc_type"] == "GenerationError" for h in n["metadata"].get("debug_history", []))]
    assert debugged, "fault_rate 0.5 needs a debug chain, whose first attempt had no program"
    evolutions = sorted((run_dir / "agent_evolutions").glob("evolution-*.json"))
    first = json.loads(evolutions[0].read_text())
    assert all("the model failed: Timeout" in (r["error"] or "") for r in first["rewrites"])
