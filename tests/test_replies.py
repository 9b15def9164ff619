"""Reading real model replies (issue 13, items 1 and 3): the program in a code reply, cut-off
replies, reviews as tool calls or as JSON text, string fields, approach tags from the code."""

from __future__ import annotations

import json

import litellm
import pytest

from swarm_evo.population.genes import LOCI, marker
from swarm_evo.llm import client, review_completion
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm.errors import GenerationError
from swarm_evo.llm.review_completion import supports_tool_calls
from swarm_evo.llm.json_reply import json_instruction, json_object_in_text
from swarm_evo.llm.replies import (
    PLAN_MAX_CHARS,
    choose_program,
    cut_off_reason,
    fenced_blocks,
    read_code_reply,
    strip_reasoning,
)
from swarm_evo.search.approach_tag import derive_approach_tag
from swarm_evo.llm.json_reply import parse_tool_arguments
from swarm_evo.search.review import REVIEW_TOOL, _as_bool, _as_float, decide_review
from swarm_evo.sandbox.base import ExecutionResult

_REAL_COMPLETION = litellm.completion


def program(tag: str = "v1") -> str:
    """A whole program with the 7 section markers (compiles, writes the submission)."""
    body = "import pandas as pd\nfrom sklearn.ensemble import RandomForestClassifier\n"
    for locus in LOCI:
        body += f"{marker(locus)}\n"
        if locus == "DATA":
            body += "train = pd.read_csv('./input/train.csv')\n"
        elif locus == "MODEL":
            body += f"model = RandomForestClassifier(n_estimators=100)  # {tag}\n"
        else:
            body += f"# {locus.lower()}: nothing to do\n"
    body += "pd.DataFrame({'id': [1]}).to_csv('./submission/submission.csv', index=False)\n"
    body += "print('Validation metric: 0.8')\n"
    return body


FULL = program()
FIXED = program("fixed")
SNIPPET = "model.fit(X, y)\n"
QUOTED = "train['Age'] = train['age'].fillna(0)\n"


def fence(code: str, lang: str = "python", mark: str = "```") -> str:
    return f"{mark}{lang}\n{code}{mark}\n"


# --------------------------------------------------------------------------- choosing the program
CHOOSER_CASES = [
    pytest.param(
        "<think>\nThe user wants a model. Maybe:\n" + fence("import xgboost\n") + "No, keep it simple.\n</think>\n"
        "Plan: a random forest. First fit like this:\n" + fence(SNIPPET) + "Full program:\n" + fence(FULL)
        + "\nThis should score about 0.8.\n",
        FULL, "markers", "Plan: a random forest", "id='reasoning + snippet + full program'",
        id="reasoning-snippet-program"),
    pytest.param(
        "The failing line is\n" + fence(QUOTED) + "It uses `age` instead of `Age`. Fixed program:\n" + fence(FIXED),
        FIXED, "markers", "The failing line is", None, id="quoted-line-then-fix"),
    pytest.param(
        "Plan: forest.\n" + fence(FULL, "py") + "\nNotes: the forest uses 100 trees.\n```\npip install x\n",
        FULL, "markers", "Plan: forest.", "Notes", id="py-fence-prose-after"),
    pytest.param(
        "Plan.\n" + fence(FULL, "python3", "~~~"), FULL, "markers", "Plan.", None, id="tilde-fence-python3"),
    pytest.param(
        "Two tries:\n" + fence("x = 1\nprint(x)\n") + fence("def f(:\n    return 1 + 2 + 3 + 4\n"),
        "x = 1\nprint(x)\n", "compiles", "Two tries:", None, id="no-markers-compiling-beats-longer"),
    pytest.param(
        "Broken both:\n" + fence("def f(:\n") + fence("def g(:\n    pass pass\n"),
        "def g(:\n    pass pass\n", "longest", "Broken both:", None, id="no-markers-none-compile-longest"),
    pytest.param(
        "Setup:\n" + fence("pip install lightgbm\n", "bash") + fence('{"a": 1}\n', "json") + fence(FULL, ""),
        FULL, "markers", "Setup:", None, id="bash-json-ignored-bare-fence"),
    pytest.param(
        "Original:\n" + fence(FULL) + "Corrected:\n" + fence(FIXED), FIXED, "markers", "Original:", None,
        id="tie-later-wins"),
    pytest.param(
        "Reasoning without an opening tag (the template opened it)\n```python\nimport os\n```\n</think>\n"
        "Plan: forest.\n" + fence(FULL), FULL, "markers", "Plan: forest.", "template", id="lone-close-think"),
    pytest.param(
        "1. Plan:\n   ```python\n" + "".join("   " + line + "\n" for line in FULL.splitlines()) + "   ```\n",
        FULL, "markers", "1. Plan:", None, id="indented-fence-dedented"),
    pytest.param(FULL, FULL, "unfenced", "", None, id="unfenced-whole-program"),
]


@pytest.mark.parametrize("text,code,rule,plan_start,plan_lacks", CHOOSER_CASES)
def test_choose_program(text, code, rule, plan_start, plan_lacks):
    choice = choose_program(text, LOCI)
    assert choice is not None
    assert choice.code == code and choice.rule == rule
    assert choice.plan.startswith(plan_start)
    assert "<think>" not in choice.plan and "The user wants" not in choice.plan
    if plan_lacks:
        assert plan_lacks not in choice.plan
    assert read_code_reply(text, "stop", LOCI).usable


def test_choose_program_without_loci_counts_any_marker():
    text = "Snippet:\n" + fence(SNIPPET) + "Program:\n" + fence("# [SECTION: DATA]\nx = 1\n")
    assert choose_program(text).code == "# [SECTION: DATA]\nx = 1\n"


def test_no_program():
    assert choose_program("I would use gradient boosting.") is None
    assert choose_program("") is None
    assert choose_program(fence("ls -la\n", "bash")) is None
    assert choose_program(fence("   \n")) is None
    reading = read_code_reply("   ", "stop", LOCI)
    assert not reading.usable and reading.problem == "was empty"
    reading = read_code_reply("Use trees.", "stop", LOCI)
    assert reading.problem == "had no fenced code block (10 characters)"


def test_plan_is_bounded():
    text = "x" * (PLAN_MAX_CHARS + 500) + "\n" + fence(FULL)
    plan = choose_program(text, LOCI).plan
    assert len(plan) < PLAN_MAX_CHARS + 100 and plan.endswith("[... plan cut: 500 more characters]")


def test_unclosed_think_at_start():
    # the reasoning never ended: the reply was cut inside it
    text = "<think>\nLet me think about features... " + "a" * 200
    assert strip_reasoning(text) == ""
    assert choose_program(text, LOCI) is None
    assert cut_off_reason(text, "stop") == "it ended inside its reasoning"
    # a program written only inside an unclosed reasoning block is still found
    text = "<think>\nHere is the program:\n" + fence(FULL)
    assert choose_program(text, LOCI).code == FULL


def test_reasoning_content_is_ignored(monkeypatch):
    """``message.reasoning_content`` (DeepSeek, vLLM reasoning parsers) holds drafts: never read."""
    response = litellm.ModelResponse(model="m", choices=[{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Plan.\n" + fence(FULL),
        "reasoning_content": "Draft:\n" + fence(program("draft") + "# longer draft\n" * 50)}}])
    monkeypatch.setattr(litellm, "completion", lambda **kw: _REAL_COMPLETION(mock_response=response, **kw))
    reply = client.complete_code(ModelEndpoint(name="openai/gpt-4o-mini", api_key="x"), "p", loci=LOCI)
    assert reply.code == FULL and reply.plan == "Plan."


# --------------------------------------------------------------------------- cut-off replies
def test_cut_off_reason():
    assert cut_off_reason("Plan.\n" + fence(FULL), "stop") is None
    assert cut_off_reason("Plan.\n" + fence(FULL), "length") == "the output limit was reached"
    assert cut_off_reason("Plan.\n```python\nimport pandas as pd\nx = (", None) == "its last code block was never closed"
    assert cut_off_reason("<think>```python\nx=1\n</think>\nPlan.\n" + fence(FULL), "stop") is None


def test_unclosed_fence():
    cut = "```python\n" + FULL[: len(FULL) // 2] + "model = RandomForestClassifier(n_est"
    # the program being written was lost: the snippet before it is not taken as the program
    reading = read_code_reply("Fit:\n" + fence(SNIPPET) + "Program:\n" + cut, "length", LOCI)
    assert reading.cut_off == "the output limit was reached" and not reading.usable
    assert reading.choice.code == SNIPPET and reading.choice.followed_by_cut and not reading.choice.complete
    assert reading.problem.startswith("was cut off (the output limit was reached;")
    # only the closing fence is missing: the program compiles and holds every marker → used
    reading = read_code_reply("Plan.\n```python\n" + FULL, "stop", LOCI)
    assert reading.cut_off == "its last code block was never closed"
    assert reading.usable and reading.choice.code == FULL and not reading.choice.closed
    # without loci an unclosed block that compiles is used unless the output limit was hit
    assert read_code_reply("```python\nprint(1)\n", "stop").usable
    assert read_code_reply("```python\nprint(1)\n", "length").choice is None
    # cut in the prose after a complete program: nothing lost
    reading = read_code_reply("Plan.\n" + fence(FULL) + "This program first reads the da", "length", LOCI)
    assert reading.usable and reading.choice.code == FULL


def _responses(monkeypatch, replies):
    """litellm.completion answering with ``(content, finish_reason)`` or a tool-call dict in
    turn (through litellm's mock path); returns the kwargs of each call."""
    calls = []

    def mocked(**kwargs):
        calls.append(kwargs)
        reply = replies[len(calls) - 1]
        if isinstance(reply, BaseException):
            return _REAL_COMPLETION(mock_response=reply, **kwargs)
        if isinstance(reply, dict):
            return _REAL_COMPLETION(mock_tool_calls=[{"id": "1", "type": "function", "function": reply}], **kwargs)
        content, finish = reply if isinstance(reply, tuple) else (reply, "stop")
        response = litellm.ModelResponse(model="mock", choices=[{
            "index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}])
        return _REAL_COMPLETION(mock_response=response, **kwargs)

    monkeypatch.setattr(litellm, "completion", mocked)
    return calls


ENDPOINT = ModelEndpoint(name="openai/gpt-4o-mini", api_key="x")


def test_cut_off_reply_is_asked_again_shorter(monkeypatch):
    long_reply = "A long plan. " * 300 + "\n" + fence(SNIPPET) + "```python\n" + FULL[:200]
    calls = _responses(monkeypatch, [(long_reply, "length"), ("Short plan.\n" + fence(FULL), "stop")])
    reply = client.complete_code(ENDPOINT, "PROMPT", loci=LOCI)
    assert reply.code == FULL and reply.plan == "Short plan." and reply.usage.calls == 2
    second = calls[1]["messages"][-1]["content"]
    assert second.startswith("PROMPT") and f"after {len(long_reply)} characters" in second
    assert "much shorter plan (2-3 sentences)" in second and "no long comments" in second
    assert reply.problems and "cut off" in reply.problems[0]


def test_still_cut_off_is_a_generation_error(monkeypatch):
    cut = ("Plan.\n```python\n" + FULL[:150], "length")
    _responses(monkeypatch, [cut, cut, cut])
    with pytest.raises(GenerationError, match=r"in 2 replies: the reply was cut off \(the output limit "
                                                     r"was reached; \d+ characters\) with no complete program") as info:
        client.complete_code(ENDPOINT, "PROMPT", loci=LOCI)
    assert info.value.usage.calls == 2


def test_last_cut_off_reply_with_a_closed_program_is_taken(monkeypatch):
    """The last reply hit the limit after a closed block lacking a marker: the static check and
    its self-fix judge it (a GenerationError would lose the node)."""
    partial = FULL.replace(marker("TRAINING_TRICKS") + "\n", "")
    cut = ("Plan.\n" + fence(partial) + "Notes: the", "length")
    _responses(monkeypatch, [cut, cut])
    reply = client.complete_code(ENDPOINT, "PROMPT", loci=LOCI)
    assert reply.code == partial and reply.usage.calls == 2 and len(reply.problems) == 2


def test_cut_off_after_a_complete_program_is_not_asked_again(monkeypatch):
    calls = _responses(monkeypatch, [("Plan.\n" + fence(FULL) + "Why: the forest", "length")])
    assert client.complete_code(ENDPOINT, "PROMPT", loci=LOCI).code == FULL and len(calls) == 1


def test_fenced_blocks_closing_rules():
    blocks = fenced_blocks("````python\n```\ninner\n```\n````\n~~~\nx\n```\n~~~\n")
    assert [(b.lang, b.body, b.closed) for b in blocks] == [("python", "```\ninner\n```\n", True), ("", "x\n```\n", True)]
    assert fenced_blocks("use ```python``` fences") == []
    assert fenced_blocks("```python title=main.py\nx\n```")[0].lang == "python"


# --------------------------------------------------------------------------- JSON reviews in text
REVIEW = {"is_bug": False, "has_csv_submission": True, "summary": "ran fine", "approach_tag": "RF + 5-fold",
          "metric": 0.81}
KEYS = list(REVIEW_TOOL["function"]["parameters"]["properties"])


@pytest.mark.parametrize("text", [
    pytest.param("```json\n" + json.dumps(REVIEW, indent=2) + "\n```", id="fenced"),
    pytest.param(json.dumps(REVIEW), id="bare"),
    pytest.param("<think>The output shows {\"metric\": 0.5}? no.</think>\n" + json.dumps(REVIEW), id="think"),
    pytest.param("Here is my review:\n" + json.dumps(REVIEW) + "\nLet me know if you need more.", id="prose"),
    pytest.param("```\n" + json.dumps(REVIEW)[:-1] + ",}\n```", id="trailing-comma"),
    pytest.param(json.dumps({"name": "submit_review", "arguments": json.dumps(REVIEW)}), id="imitated-tool-call"),
    pytest.param(json.dumps({"review": REVIEW}), id="wrapped"),
])
def test_json_review_in_text(text):
    assert json_object_in_text(text, KEYS) == REVIEW


def test_json_object_in_text_rejects_non_reviews():
    assert json_object_in_text("no json here", KEYS) is None
    assert json_object_in_text("[1, 2]", KEYS) is None
    assert json_object_in_text('{"n_estimators": 100}', KEYS) is None, "an object without any review key"
    assert json_object_in_text('{"a": {"b": 1}} then {"c": 2}') == {"c": 2}
    assert json_object_in_text('{"a": {"b": 1}}') == {"a": {"b": 1}}


def test_parse_tool_arguments_tolerates_wrapping():
    wrapped = "```json\n" + json.dumps(REVIEW) + "\n```"
    assert parse_tool_arguments(wrapped) == REVIEW
    assert parse_tool_arguments("Sure! " + json.dumps(REVIEW) + " Done.") == REVIEW
    assert parse_tool_arguments("<think>hmm</think>" + json.dumps(REVIEW)) == REVIEW
    assert parse_tool_arguments('{"is_bug": fal') is None


def test_review_tool_arguments_wrapped_in_json_fence(monkeypatch):
    _responses(monkeypatch, [{"name": "submit_review", "arguments": "```json\n" + json.dumps(REVIEW) + "\n```"}])
    reply = review_completion.complete_review(ENDPOINT, "p", REVIEW_TOOL)
    assert reply.arguments == REVIEW and reply.source == "tool_call" and reply.usage.calls == 1


def test_review_without_tool_call_uses_json_in_text(monkeypatch):
    calls = _responses(monkeypatch, ["<think>checking</think>\nReview:\n```json\n" + json.dumps(REVIEW) + "\n```\n"])
    reply = review_completion.complete_review(ENDPOINT, "p", REVIEW_TOOL)
    assert reply.arguments == REVIEW and reply.mode == "tool_call" and reply.source == "text"
    assert calls[0]["tools"] and reply.error is None


def test_review_in_json_text_mode(monkeypatch):
    calls = _responses(monkeypatch, ["Review:\n" + json.dumps({**REVIEW, "metric": "0.81 (accuracy)"})])
    reply = review_completion.complete_review(ENDPOINT, "PROMPT", REVIEW_TOOL, use_tools=False)
    assert "tools" not in calls[0] and "tool_choice" not in calls[0]
    prompt = calls[0]["messages"][-1]["content"]
    assert prompt.startswith("PROMPT") and "Reply with ONLY a JSON object with these keys: \"is_bug\"" in prompt
    assert '- "metric" (number or null, required): The validation metric' in prompt
    assert reply.mode == "json_text" and reply.source == "text" and reply.arguments["metric"] == "0.81 (accuracy)"


def test_json_instruction_lists_every_key():
    text = json_instruction(REVIEW_TOOL)
    for key in KEYS:
        assert f'- "{key}" (' in text
    assert '"is_bug" (boolean, required)' in text and '"insight" (string, optional)' in text


def test_provider_rejecting_tools_falls_back_to_json_text(monkeypatch):
    monkeypatch.setattr(review_completion, "_TOOLS_REJECTED", set())
    endpoint = ModelEndpoint(name="openai/local-model", api_key="x", api_base="http://127.0.0.1:9")
    rejection = litellm.BadRequestError(
        message='"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        model="local-model", llm_provider="openai")
    calls = _responses(monkeypatch, [rejection, json.dumps(REVIEW)])
    assert supports_tool_calls(endpoint) is None, "litellm does not know the model: try tools first"
    reply = review_completion.complete_review(endpoint, "p", REVIEW_TOOL)
    assert reply.arguments == REVIEW and reply.tools_rejected and reply.mode == "json_text"
    assert reply.usage.calls == 1 and "tools" in calls[0] and "tools" not in calls[1]
    assert "Reply with ONLY a JSON object" in calls[1]["messages"][-1]["content"]
    assert supports_tool_calls(endpoint) is False, "the process remembers the rejection"
    calls = _responses(monkeypatch, [json.dumps(REVIEW)])
    assert review_completion.complete_review(endpoint, "p", REVIEW_TOOL).mode == "json_text" and "tools" not in calls[0]


def test_other_bad_requests_still_raise(monkeypatch):
    monkeypatch.setattr(review_completion, "_TOOLS_REJECTED", set())
    error = litellm.BadRequestError(message="maximum context length is 8192 tokens", model="m",
                                           llm_provider="openai")
    _responses(monkeypatch, [error])
    with pytest.raises(litellm.BadRequestError, match="context length"):
        review_completion.complete_review(ENDPOINT, "p", REVIEW_TOOL)


def test_supports_tool_calls():
    assert supports_tool_calls(ModelEndpoint(name="offline")) is True
    assert supports_tool_calls(ModelEndpoint(name="openai/gpt-4o-mini")) is True
    assert supports_tool_calls(ModelEndpoint(name="deepseek/deepseek-reasoner")) is False
    assert supports_tool_calls(ModelEndpoint(name="ollama_chat/llama3")) is None
    assert supports_tool_calls(ModelEndpoint(name="ollama_chat/llama3", tool_calls="on")) is True
    assert supports_tool_calls(ModelEndpoint(name="openai/gpt-4o-mini", tool_calls="off")) is False


# --------------------------------------------------------------------------- string fields
@pytest.mark.parametrize("value,expected", [
    (0.81, 0.81), (1, 1.0), ("0.81", 0.81), (" 0.81 (accuracy)", 0.81), ("RMSE = 0.1234", 0.1234),
    ("5-fold CV AUC: 0.93", 0.93), ("1e-3", 0.001), ("-0.5 log loss", -0.5), ("n/a", None), ("banana", None),
    ("nan", None if False else float("nan")), (True, None), (None, None),
])
def test_as_float(value, expected):
    got = _as_float(value)
    if isinstance(expected, float) and expected != expected:
        assert got != got
    else:
        assert got == expected


@pytest.mark.parametrize("value,expected", [
    (True, True), ("yes", True), ("Yes.", True), ("true", True), ("TRUE", True), ("no", False), ("No, it ran", False),
    ("false", False), (1, True), (0, False), ("maybe", None), ("not sure", None), (None, None), (2, None),
])
def test_as_bool(value, expected):
    assert _as_bool(value) is expected


def test_decide_review_with_string_fields():
    result = ExecutionResult(stdout="Validation metric: 0.81\n")
    out = decide_review(result, {"is_bug": "no", "metric": "0.81 (accuracy)", "approach_tag": "RF"}, [])
    assert not out.is_buggy and out.metric_disagreement is None and out.approach_tag == "RF"
    out = decide_review(result, {"is_bug": "yes", "summary": "leak", "metric": "0.81"}, [])
    assert out.is_buggy and "LLM review reports a bug: leak" in out.reasons


# --------------------------------------------------------------------------- approach tags from code
LGBM = """import lightgbm as lgb
import numpy as np
from sklearn.model_selection import StratifiedKFold
# [SECTION: MODEL]
skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=42)
for tr, va in skf.split(X, y):
    clf = lgb.LGBMClassifier(n_estimators=1000, learning_rate=0.05)  # XGBClassifier was slower
    clf.fit(X[tr], y[tr])
print("RandomForestClassifier( is not used")
"""
TFIDF_RF = """from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.ensemble import RandomForestRegressor
vec = TfidfVectorizer(max_features=20000, ngram_range=(1, 2))
X = vec.fit_transform(train.text)
model = RandomForestRegressor(n_estimators=300, n_jobs=-1)
"""
TORCH = """import torch
import torch.nn as nn
class TabularNet(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 1))
"""
LGB_TRAIN = """import lightgbm as lgb
from sklearn.model_selection import KFold
kf = KFold(n_splits=5)
booster = lgb.train(params, lgb.Dataset(X, y), num_boost_round=500)
"""
PIPELINE = """from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.linear_model import LogisticRegression
pipe = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=1000))
"""
BY_NAME = """from sklearn.ensemble import ExtraTreesClassifier, HistGradientBoostingClassifier
CANDIDATES = {"et": ExtraTreesClassifier, "hgb": HistGradientBoostingClassifier}
model = CANDIDATES[name](**params)
"""
ENSEMBLE = """from xgboost import XGBRegressor
from catboost import CatBoostRegressor
from sklearn.linear_model import Ridge
from sklearn.ensemble import StackingRegressor
from sklearn.model_selection import GroupKFold
stack = StackingRegressor([("x", XGBRegressor()), ("c", CatBoostRegressor(verbose=0))], final_estimator=Ridge())
cv = GroupKFold(n_splits=5)
"""


@pytest.mark.parametrize("code,tag", [
    (LGBM, "LGBMClassifier + StratifiedKFold"),
    (TFIDF_RF, "RandomForestRegressor + TF-IDF"),
    (TORCH, "PyTorch NN"),
    (LGB_TRAIN, "LightGBM + KFold"),
    (PIPELINE, "LogisticRegression"),
    (BY_NAME, "ExtraTreesClassifier + HistGradientBoostingClassifier"),
    (ENSEMBLE, "StackingRegressor + XGBRegressor + CatBoostRegressor + GroupKFold"),
    ("import lightgbm as lgb\nmodel = build(lgb)\n", "LightGBM"),
    ("import pandas as pd\nprint(pd.__version__)\n", "unknown"),
    ("from sklearn.linear_model import Ridge\nm = Ridge(alpha=1.0\n", "Ridge"),  # does not tokenize
])
def test_derive_approach_tag(code, tag):
    assert derive_approach_tag(code) == tag


def test_decide_review_derives_the_tag_when_the_review_gave_none():
    result = ExecutionResult(stdout="Validation metric: 0.8\n")
    out = decide_review(result, None, [], code=LGBM)
    assert out.approach_tag == "LGBMClassifier + StratifiedKFold"
    assert "note: approach tag derived from the code (the review gave none)" in out.reasons
    out = decide_review(result, {"is_bug": False, "approach_tag": "unknown"}, [], code=TFIDF_RF)
    assert out.approach_tag == "RandomForestRegressor + TF-IDF"
    out = decide_review(result, {"is_bug": False, "approach_tag": "LightGBM + 5-fold CV"}, [], code=TFIDF_RF)
    assert out.approach_tag == "LightGBM + 5-fold CV", "the review's own tag wins"
    assert decide_review(result, None, []).approach_tag == "unknown"


def test_program_in_closed_reasoning_is_never_chosen():
    text = "<think>\nDraft:\n" + fence(FULL) + "</think>\nPlan: forest.\n```python\n" + FULL[:100]
    reading = read_code_reply(text, "length", LOCI)
    assert reading.choice is None and not reading.usable and reading.cut_off == "the output limit was reached"
