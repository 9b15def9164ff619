"""Real models over HTTP (issue 13, "done when"): real ``swarm-evo run`` processes drive a
stand-in OpenAI/Ollama-compatible server on 127.0.0.1 through litellm (no ``mock_response``).

The server (``tests/llm_server``) answers with real, runnable programs written by the offline
model, in the shapes real models use (reasoning blocks, ```py fences, a snippet before the
program, no markers, prose after the code, cut-off replies, quoted lines before a debug fix,
reviews as tool calls or JSON text, string metrics) and fails the way real endpoints fail
(HTTP 500s, hangs, 401s, no tool support). Each test selects a scenario
(``tests/llm_server/scenarios.py``) and checks what a new user would check: the exit code, the
wall time, journal.json, ``RUN_DIR/submission/submission.csv``, grade_report.json,
run_report.json and the saved prompts.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from llm_server import API_KEY, SCENARIOS, StandInServer, closed_port, run_swarm
from llm_server.brain import FAULT_TAG
from llm_server.scenarios import EVERYTHING, Scenario
from swarm_evo.population.genes import LOCI
from swarm_evo.prompting.text_bounds import PromptLimits

MODEL = "openai/stand-in"
FAST = {"steps_per_epoch": 4, "phase1_target_nodes": 4}
"""Search settings that reach Phase 2 (merges and mutates) within a few steps."""


SESSION_API: dict[str, str] = {}
"""``{"url": ...}``: the session Prefect API the runs report to (set for every test)."""


@pytest.fixture(autouse=True)
def _runs_report_to_the_session_api(prefect_api_url):
    SESSION_API["url"] = prefect_api_url


def _run(server, tmp_path: Path, data_dir: Path, *, model: str = MODEL, work: str = "work", **kwargs):
    kwargs.setdefault("api_base", server.api_base_for(model))
    kwargs.setdefault("prefect_api_url", SESSION_API["url"])
    return run_swarm(tmp_path / work, data_dir, model=model, **kwargs)


def _in_parallel(*jobs):
    """Run the callables at once (independent runs, each against its own server); their
    results in order. Saves wall time: a run spends much of it starting its Python process."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


def _has_markers(code: str) -> bool:
    return all(f"# [SECTION: {locus}]" in code for locus in LOCI)


def _submission_ok(result) -> None:
    assert (result.run_dir / "submission" / "submission.csv").exists(), result.describe()
    grade = result.grade_report
    assert grade is not None and grade["valid_submission"] is True, result.describe()


# ---------------------------------------------------------------------------------- smoke
def test_tidy_replies_over_http_complete_a_run(stand_in, data_dir, tmp_path):
    """The plumbing: tidy replies, 2 steps, every node alive, a graded valid submission, and
    every call the run made is a request the server answered."""
    result = _run(stand_in, tmp_path, data_dir, max_steps=2)
    assert result.returncode == 0, result.describe()
    nodes = result.nodes
    assert len(nodes) == 2 and all(not n["dead"] and not n["is_buggy"] for n in nodes), result.describe()
    _submission_ok(result)
    purposes = {r.purpose for r in stand_in.log}
    assert {"probe", "draft", "review"} <= purposes
    assert all(r.model == "stand-in" and r.api == "openai" for r in stand_in.log)
    assert all(n["approach_tag"] and n["approach_tag"] != "unknown" for n in nodes)


# ------------------------------------------------------------------- 1. every imperfection
def test_every_reply_imperfection_still_ends_alive_with_a_valid_submission(stand_in, data_dir, tmp_path):
    """10 steps with reasoning blocks, ```py and bare fences, a snippet before the program, no
    markers, prose after the code, a cut-off reply, a quoted faulty line before each debug fix,
    reviews as fenced tool arguments / string metrics / JSON text, an HTTP 500 and two planted
    faults (2 MB of output then a crash; a NameError): every node is fixable, so every node
    ends alive, and the run hands in a valid submission."""
    stand_in.use(EVERYTHING)
    result = _run(stand_in, tmp_path, data_dir, max_steps=10, search_config=FAST)
    assert result.returncode == 0, result.describe()
    nodes = result.nodes
    assert len(nodes) == 10, result.describe()
    broken = [(n["step"], n["operation"], n["exc_type"], n["analysis"]) for n in nodes if n["dead"] or n["is_buggy"]]
    assert not broken, f"nodes that should have been fixed: {broken}\n{result.describe()}"
    for n in nodes:
        assert _has_markers(n["code"]) and FAULT_TAG not in n["code"], n["step"]
        assert n["approach_tag"] and n["approach_tag"] != "unknown", n["step"]
    debugged = [n for n in nodes if n["debug_attempts"] > 0]
    assert len(debugged) >= 2, "both planted faults go through the debug chain"
    _submission_ok(result)
    # the schedule really played: every shape was sent at least once, and the HTTP 500
    shapes = {r.shape for r in stand_in.log}
    expected = set(EVERYTHING.code_shapes) | set(EVERYTHING.debug_shapes) | set(EVERYTHING.review_shapes)
    assert expected <= shapes, f"shapes never sent: {expected - shapes}"
    assert any(r.status == 500 for r in stand_in.log)
    assert any(r.finish_reason == "length" for r in stand_in.log)
    assert any(n["phase"] == 2 for n in nodes), "Phase 2 ran (merge/mutate replies were shaped too)"


# -------------------------------------------------------------------------- 2. no tools
def test_a_server_without_tools_gives_real_approach_tags_and_a_warning(stand_in, data_dir, tmp_path):
    """A server that answers 400 "tools are not supported": reviews fall back to a JSON object in
    the text; approach tags are real (not "unknown") and the run says so in a warning."""
    stand_in.use("no_tools")
    result = _run(stand_in, tmp_path, data_dir, max_steps=4)
    assert result.returncode == 0, result.describe()
    tags = [n["approach_tag"] for n in result.nodes]
    assert tags and all(t and t.strip() and t != "unknown" for t in tags), tags
    assert all(not n["is_buggy"] for n in result.nodes), result.describe()
    rejected = [r for r in stand_in.log if r.status == 400]
    assert 1 <= len(rejected) <= 2, "after the first 400s (one per parallel worker) no call sends tools"
    assert all(not r.tools_sent for r in stand_in.log[rejected[-1].index + 1:])
    warning = [line for line in result.output.splitlines()
               if re.search(r"(?i)json", line) and re.search(r"(?i)review", line) and re.search(r"(?i)tool", line)]
    assert warning, f"no warning that reviews fall back to JSON text\n{result.describe()}"
    _submission_ok(result)


# ------------------------------------------------------------------------------ 3. hangs
def test_a_hanging_server_cannot_stretch_the_time_limit(stand_in, data_dir, tmp_path):
    """Every request after the probe hangs: ``--time-limit 20`` ends the run within
    20 s + model.timeout + 15 s."""
    stand_in.use(SCENARIOS["hangs"].with_(hang_from_request=1))
    timeout = 5
    result = _run(stand_in, tmp_path, data_dir, max_steps=6, time_limit=20,
                  model_config={"timeout": timeout, "num_retries": 2}, timeout=180)
    assert not result.timed_out, result.describe()
    assert result.seconds <= 20 + timeout + 15, result.describe()
    assert any(r.hung for r in stand_in.log), "the run reached the hanging server"


# ---------------------------------------------------------------------- 4. fail fast
@pytest.mark.parametrize("failure", ["endpoint_down", "key_refused"])
def test_unreachable_endpoint_or_refused_key_exits_2_at_once(failure, stand_in, data_dir, tmp_path):
    """Endpoint down (a closed port) or the key refused (401): exit 2 in under 30 s, one stderr
    line that names the endpoint and the fix."""
    if failure == "endpoint_down":
        api_base = f"http://127.0.0.1:{closed_port()}/v1"
        fix = r"(?i)start the server|model\.api_base"
    else:
        stand_in.use("bad_key")
        api_base = stand_in.openai_base
        fix = r"(?i)OPENAI_API_KEY|api.key"
    result = _run(stand_in, tmp_path, data_dir, api_base=api_base, max_steps=4, timeout=120)
    assert result.returncode == 2, result.describe()
    assert result.seconds < 30, result.describe()
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{result.stderr[-3000:]}"
    assert api_base in lines[0] and re.search(fix, lines[0]), lines[0]
    assert not (result.run_dir / "journal.json").exists() or not result.nodes
    if failure == "key_refused":
        assert 1 <= len(stand_in.log) <= 3 and all(r.status == 401 for r in stand_in.log)


# --------------------------------------------------------------------- 5. strict reviewer
def test_a_reviewer_that_always_says_bug_still_hands_in_a_valid_submission(stand_in, data_dir, tmp_path):
    """Every review says is_bug with no metric, although the programs ran and wrote valid
    submissions: the run still ends with a valid submission, and the report says which node
    was handed in and why."""
    stand_in.use("strict_reviewer")
    result = _run(stand_in, tmp_path, data_dir, max_steps=2, search_config={"debug_max_attempts": 1})
    assert result.returncode == 0, result.describe()
    _submission_ok(result)
    report = result.run_report or {}
    hand_in = report.get("hand_in") or {}
    ids = {n["id"] for n in result.nodes}
    assert hand_in.get("node_id") in ids, f"run_report.json has no hand_in naming a node: {sorted(report)}"
    assert re.search(r"(?i)review", hand_in.get("reason") or ""), hand_in
    report_md = (result.run_dir / "report.md").read_text()
    assert re.search(r"(?i)handed in", report_md), "report.md says which node was handed in"
    assert any(r.purpose == "debug" for r in stand_in.log), "review-flagged nodes go through the debug chain"


# ---------------------------------------------------------------------------- 6. cost
IN_COST, OUT_COST = 1.5e-6, 4.0e-6
MAX_COST_PRICE, MAX_COST = 1e-5, 0.05


def test_llm_totals_equal_the_servers_counts_cost_is_right_and_max_cost_stops(stand_in, data_dir, tmp_path):
    """run_report.json ``llm`` totals equal the server's own token counts (an HTTP 500 counted
    as a failed attempt, not as tokens); with ``input_cost_per_token`` / ``output_cost_per_token``
    set, ``cost_usd`` is right to the cent. Next to it, on its own server, a run with
    ``model.max_cost_usd`` stops cleanly before its budget."""
    stand_in.use(SCENARIOS["tidy"].with_(http_500_requests=[2]))
    with StandInServer(data_dir) as capped:
        capped.use("tidy")
        result, stopped = _in_parallel(
            lambda: _run(stand_in, tmp_path, data_dir, max_steps=4, work="totals",
                         model_config={"input_cost_per_token": IN_COST, "output_cost_per_token": OUT_COST}),
            lambda: _run(capped, tmp_path, data_dir, max_steps=10, work="max-cost",
                         model_config={"input_cost_per_token": MAX_COST_PRICE, "output_cost_per_token": MAX_COST_PRICE,
                                       "max_cost_usd": MAX_COST}),
        )
        capped_totals = capped.totals()
        call_costs = sorted((r.prompt_tokens + r.completion_tokens) * MAX_COST_PRICE for r in capped.log)

    assert result.returncode == 0, result.describe()
    llm = result.llm()
    assert llm is not None, f"run_report.json has no llm section\n{result.describe()}"
    server = stand_in.totals()
    assert llm["prompt_tokens"] == server["prompt_tokens"]
    assert llm["completion_tokens"] == server["completion_tokens"]
    assert llm["calls"] - llm["failed_calls"] == server["answered"]
    assert server["requests"] >= llm["calls"] >= server["answered"]
    expected = server["prompt_tokens"] * IN_COST + server["completion_tokens"] * OUT_COST
    assert llm["cost_usd"] is not None and abs(llm["cost_usd"] - expected) < 0.005, (llm["cost_usd"], expected)
    for op in ("draft", "review"):
        assert op in llm.get("by_operation", {}), llm.get("by_operation")
    assert re.search(r"(?i)tokens", result.stdout) and "$" in result.stdout, "the final output shows tokens and dollars"

    assert stopped.returncode in (0, 1), stopped.describe()
    assert len(stopped.nodes) < 10, f"the budget ran out instead: {len(stopped.nodes)} nodes"
    spent = (capped_totals["prompt_tokens"] + capped_totals["completion_tokens"]) * MAX_COST_PRICE
    # no call starts once the limit is reached: at most the calls in flight (one per step in flight:
    # 2 slots + 2 proposals written ahead, search.proposal_backlog's default) end after it
    assert spent <= MAX_COST + sum(call_costs[-4:]) + 1e-9, (spent, call_costs[-4:])
    stop = str((stopped.run_report or {}).get("stop_reason") or "")
    assert re.search(r"(?i)max_cost|cost", stop + stopped.stdout), stopped.describe()
    assert stopped.llm() is not None and stopped.llm()["cost_usd"] >= MAX_COST


# -------------------------------------------------------------------- 7. 2 MB of output
def test_a_program_printing_2mb_before_crashing_gets_a_bounded_debug_prompt(stand_in, data_dir, tmp_path):
    """The first draft prints 2 MB and then raises: its debug prompt stays under the prompt
    bound (the output cut with a marker), journal.json stays small, and the debug fixes it."""
    stand_in.use("chatty")
    result = _run(stand_in, tmp_path, data_dir, max_steps=2)
    assert result.returncode == 0, result.describe()
    debugged = [n for n in result.nodes if n["debug_attempts"] > 0]
    assert debugged, result.describe()
    node = debugged[0]
    assert not node["dead"] and not node["is_buggy"] and FAULT_TAG not in node["code"], node["analysis"]
    prompts = sorted((result.run_dir / "nodes" / node["id"]).glob("prompt-debug*.md"))
    assert prompts, "the debug prompt is saved"
    limits = PromptLimits.for_context_window(32_768)
    text = prompts[0].read_text()
    assert len(text) <= limits.prompt_chars, (len(text), limits.prompt_chars)
    assert "characters of output cut" in text
    debug_requests = [r for r in stand_in.log if r.purpose == "debug"]
    assert debug_requests and max(r.prompt_chars for r in debug_requests) <= limits.prompt_chars
    assert (result.run_dir / "journal.json").stat().st_size < 400_000, "debug_history keeps the output bounded"


# ----------------------------------------------------------------------- 8. model names
def test_other_provider_prefixes_work_over_http(data_dir, tmp_path):
    """``hosted_vllm/`` (OpenAI API, its own key variable ``HOSTED_VLLM_API_KEY``, checked by the
    server) and ``ollama_chat/`` (Ollama's /api/chat, usage in prompt_eval_count/eval_count,
    /api/show without tool support, reasoning in ``thinking``) run end to end, each against its
    own server, at the same time; token totals match the servers' counts."""
    vllm_scenario = Scenario(name="vllm", code_shapes=["reasoning", "tidy"],
                             review_shapes=["tool_call", "tool_json_fenced"], expected_key="sk-vllm-key")
    ollama_scenario = Scenario(name="ollama", tools="ignored", code_shapes=["reasoning", "think", "tidy"],
                               review_shapes=["json_fenced", "think_json"])
    with StandInServer(data_dir, vllm_scenario) as vllm, StandInServer(data_dir, ollama_scenario) as ollama:
        vllm.use(vllm_scenario)
        ollama.use(ollama_scenario)
        runs = _in_parallel(
            lambda: _run(vllm, tmp_path, data_dir, model="hosted_vllm/stand-in", max_steps=2, work="vllm",
                         env_extra={"HOSTED_VLLM_API_KEY": "sk-vllm-key"}),
            lambda: _run(ollama, tmp_path, data_dir, model="ollama_chat/stand-in", max_steps=2, work="ollama"),
        )
        for (server, api), result in zip(((vllm, "openai"), (ollama, "ollama")), runs):
            assert result.returncode == 0, result.describe()
            assert all(not n["dead"] and not n["is_buggy"] for n in result.nodes), result.describe()
            assert all(n["approach_tag"] and n["approach_tag"] != "unknown" for n in result.nodes)
            _submission_ok(result)
            log = server.log
            assert log and all(r.api == api and r.model == "stand-in" and r.status == 200 for r in log), \
                [(r.api, r.model, r.status) for r in log]
            llm = result.llm()
            assert llm is not None, result.describe()
            assert llm["prompt_tokens"] == server.totals()["prompt_tokens"]
            assert llm["completion_tokens"] == server.totals()["completion_tokens"]
        assert any(r.purpose == "probe" for r in ollama.log)


# ------------------------------------------------------------- the server itself, in process
def test_the_stand_in_server_speaks_openai_and_ollama_as_litellm_reads_them(data_dir):
    """The server as litellm sees it (no swarm-evo run): usage equals the server's counts,
    reasoning reaches ``reasoning_content``, a cut-off reply ends with ``length``, tool calls
    parse on both APIs, a refused key is a 401 and an unsupported tool call a 400."""
    import litellm

    prompt = "Reply with the single word OK."
    review = ("You are reviewing one run of a machine-learning program written for the competition\n"
              "Spaceship Titanic (`spaceship-titanic`, metric accuracy, higher is better).\n\n## Program\n"
              "```python\nprint('hi')\n```\n\n## Execution output\n```\nValidation metric: 0.79\n```\n")
    tool = {"type": "function", "function": {"name": "submit_review", "parameters": {
        "type": "object", "properties": {"is_bug": {"type": "boolean"}, "metric": {"type": "number"}}}}}
    with StandInServer(data_dir) as server:
        for model in ("openai/stand-in", "hosted_vllm/stand-in", "ollama_chat/stand-in"):
            server.use(Scenario(code_shapes=["reasoning"], review_shapes=["string_metric"]))
            base = server.api_base_for(model)
            kwargs = dict(api_base=base, api_key="k", num_retries=0, timeout=30)
            reply = litellm.completion(model=model, messages=[{"role": "user", "content": prompt}], **kwargs)
            assert reply.choices[0].message.content == "OK"
            assert reply.usage.prompt_tokens == server.log[-1].prompt_tokens
            assert reply.usage.completion_tokens == server.log[-1].completion_tokens == 1
            reply = litellm.completion(model=model, messages=[{"role": "user", "content": review}], tools=[tool],
                                       tool_choice={"type": "function", "function": {"name": "submit_review"}},
                                       **kwargs)
            call = reply.choices[0].message.tool_calls[0]
            assert call.function.name == "submit_review"
            assert json.loads(call.function.arguments)["metric"] == "0.79"  # the string-metric shape
            assert server.log[-1].tools_sent and server.log[-1].purpose == "review"

            server.use(Scenario(tools="rejected", expected_key="right"))
            with pytest.raises(litellm.AuthenticationError):
                litellm.completion(model=model, messages=[{"role": "user", "content": prompt}],
                                   **{**kwargs, "api_key": "wrong"})
            with pytest.raises(litellm.BadRequestError, match="(?i)tools"):
                litellm.completion(model=model, messages=[{"role": "user", "content": review}], tools=[tool],
                                   **{**kwargs, "api_key": "right"})
            assert [r.status for r in server.log] == [401, 400]

        # shapes of code replies, through the brain: a draft prompt rendered by swarm-evo itself
        from llm_server.brain import Brain, purpose_of
        from llm_server.voice import shape_code

        draft_prompt = _rendered_draft_prompt(data_dir)
        assert purpose_of(draft_prompt) == "draft"
        answer = Brain(data_dir, Scenario()).answer(draft_prompt)
        assert answer.kind == "code" and _has_markers(answer.code)
        compile(answer.code, "solution.py", "exec")
        cut = shape_code(answer, "cut_off")
        assert cut.finish_reason == "length" and cut.content.count("```") % 2 == 1
        server.use(Scenario(code_shapes=["reasoning"]))
        reply = litellm.completion(model="openai/stand-in", messages=[{"role": "user", "content": draft_prompt}],
                                   api_base=server.openai_base, api_key="k", num_retries=0, timeout=60)
        assert reply.choices[0].message.reasoning_content
        assert "```python" in reply.choices[0].message.content


def _rendered_draft_prompt(data_dir: Path) -> str:
    """A draft prompt as swarm-evo renders it (draft.j2 through the real session code, offline
    model, a temporary run directory)."""
    import tempfile

    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session
    from swarm_evo.step.operations import prepare_draft

    config = RunConfig()
    with tempfile.TemporaryDirectory() as run_dir:
        session = open_session(competition_id="spaceship-titanic", data_dir=data_dir, run_dir=Path(run_dir),
                               config=config, endpoint=endpoint_for(config.model))
        try:
            return prepare_draft(session, 1).prompt
        finally:
            close_session(run_dir)


# ------------------------------------------------------------------- what litellm retries
@pytest.mark.parametrize("scenario, error", [("no_tools", "BadRequestError"), ("bad_key", "AuthenticationError")])
def test_a_request_the_server_calls_wrong_is_sent_once(stand_in, scenario, error):
    """litellm re-sends any ``openai.APIError`` at once when ``num_retries`` > 0; a 400 ("tools
    are not supported") or a 401 cannot pass on a second try, so ``call_model``'s retry policy
    sends it once (a transient error still gets its retries: tests/test_failing_models.py)."""
    import litellm

    from swarm_evo.llm.client import call_model
    from swarm_evo.llm.endpoint import ModelEndpoint
    from swarm_evo.search.review import REVIEW_TOOL

    stand_in.use(scenario)
    endpoint = ModelEndpoint(name=MODEL, role="review", api_base=stand_in.openai_base, api_key=API_KEY,
                             num_retries=2, timeout=30)
    with pytest.raises((litellm.BadRequestError, litellm.AuthenticationError)) as raised:
        call_model(endpoint, [{"role": "user", "content": "Review this program."}], None, tools=[REVIEW_TOOL],
                   tool_choice={"type": "function", "function": {"name": REVIEW_TOOL["function"]["name"]}})
    assert type(raised.value).__name__ == error
    assert len(stand_in.log) == 1, [(r.index, r.status) for r in stand_in.log]
