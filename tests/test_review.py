"""Tests for the review rules (SPEC §6 "Review")."""

from __future__ import annotations

import math

from swarm_evo.llm.json_reply import parse_tool_arguments
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.search.review import (
    REVIEW_TOOL,
    REVIEW_TOOL_CHOICE,
    ReviewOutcome,
    decide_review,
    parse_metric,
)


def ok_result(stdout: str = "training...\nValidation metric: 0.8123\n", **kw) -> ExecutionResult:
    base = dict(stdout=stdout, stderr="", term_out=stdout, exit_code=0, exec_time=1.0)
    base.update(kw)
    return ExecutionResult(**base)


def review(**kw):
    r = {"is_bug": False, "has_csv_submission": True, "summary": "Trained a GBM.",
         "approach_tag": "LightGBM + 5-fold CV", "metric": 0.8123, "metric_name": "accuracy",
         "key_change": "k", "insight": "i", "bottleneck": "b", "suggested_direction": "s"}
    r.update(kw)
    return r


def test_parse_metric_last_line_wins():
    assert parse_metric("Validation metric: 0.1\nfold 2\nValidation metric: 0.3\nbye\n") == 0.3


def test_parse_metric_ignores_partial_lines():
    out = "Validation metric: 0.9 (fold 1)\nmy Validation metric: 0.8\nValidation metric: 0.5\nValidation metric: 0.7 extra\n"
    assert parse_metric(out) == 0.5
    assert parse_metric("Validation metric: 0.9 (fold 1)\n") is None
    assert parse_metric("") is None


def test_parse_metric_formats():
    assert parse_metric("Validation metric: -1.5e-3   \n") == -1.5e-3
    assert parse_metric("validation metric:.25\r\n") == 0.25
    assert parse_metric("Validation metric: 3\n") == 3.0
    assert math.isnan(parse_metric("Validation metric: nan\n"))
    assert parse_metric("Validation metric: -inf\n") == -math.inf
    assert parse_metric("Validation metric: inf\n") == math.inf


def test_review_tool_schema():
    fn = REVIEW_TOOL["function"]
    assert REVIEW_TOOL["type"] == "function" and fn["name"] == "submit_review"
    props = fn["parameters"]["properties"]
    for name in ("is_bug", "has_csv_submission", "summary", "key_change", "insight", "bottleneck",
                 "suggested_direction", "approach_tag", "metric", "metric_name"):
        assert name in props
    assert set(fn["parameters"]["required"]) == {"is_bug", "has_csv_submission", "summary", "approach_tag", "metric"}
    assert REVIEW_TOOL_CHOICE["function"]["name"] == "submit_review"


def test_clean_node():
    out = decide_review(ok_result(), review(), [])
    assert isinstance(out, ReviewOutcome)
    assert out.metric_value == 0.8123 and not out.is_buggy and out.reasons == []
    assert out.approach_tag == "LightGBM + 5-fold CV" and out.analysis == "Trained a GBM."
    assert out.details["metric_name"] == "accuracy" and out.details["bottleneck"] == "b"
    assert out.metric_disagreement is None


def test_metric_on_non_last_line_overridden():
    out = decide_review(ok_result("Validation metric: 0.1\nValidation metric: 0.2\n"), review(metric=0.2), [])
    assert out.metric_value == 0.2 and out.metric_disagreement is None


def test_exception_is_buggy():
    res = ok_result(exit_code=1, exc_type="KeyError", exc_info="KeyError: 'y'")
    out = decide_review(res, review(), [])
    assert out.is_buggy and any("KeyError" in r for r in out.reasons)


def test_timeout_is_buggy():
    res = ok_result(exit_code=-9, exc_type="TimeoutError", exc_info="limit", timed_out=True)
    assert decide_review(res, review(), []).is_buggy


def test_submission_errors_are_buggy():
    out = decide_review(ok_result(), review(), ["missing ./submission/submission.csv"])
    assert out.is_buggy and any("submission.csv" in r for r in out.reasons)
    assert out.metric_value == 0.8123


def test_no_metric_is_buggy_even_if_llm_reports_one():
    out = decide_review(ok_result("done\nValidation metric: 0.8 roughly\n"), review(metric=0.8), [])
    assert out.is_buggy and out.metric_value is None
    assert any("Validation metric" in r for r in out.reasons)
    assert out.metric_disagreement == {"parsed": None, "llm": 0.8, "rel_diff": None}


def test_llm_says_bug():
    out = decide_review(ok_result(), review(is_bug=True, summary="target leakage"), [])
    assert out.is_buggy and any("leakage" in r for r in out.reasons)


def test_nonfinite_metric_is_buggy():
    out = decide_review(ok_result("Validation metric: nan\n"), review(metric=None), [])
    assert out.is_buggy and out.metric_value is None
    assert any("not finite" in r for r in out.reasons)
    out = decide_review(ok_result("Validation metric: inf\n"), review(metric=None), [])
    assert out.is_buggy


def test_metric_disagreement_parsed_wins():
    out = decide_review(ok_result(), review(metric=0.95), [])
    assert out.metric_value == 0.8123 and not out.is_buggy
    d = out.metric_disagreement
    assert d["parsed"] == 0.8123 and d["llm"] == 0.95 and d["rel_diff"] > 0.1


def test_metric_within_tolerance_agrees():
    out = decide_review(ok_result("Validation metric: 1000000\n"), review(metric=1000000.5), [])
    assert out.metric_disagreement is None
    out = decide_review(ok_result(), review(metric="0.8123"), [])
    assert out.metric_disagreement is None


def test_missing_llm_review_tolerated():
    out = decide_review(ok_result(), None, [])
    assert not out.is_buggy and out.metric_value == 0.8123
    assert out.approach_tag == "unknown" and out.analysis == ""
    assert any(r.startswith("note:") for r in out.reasons)


def test_garbled_llm_review_tolerated():
    out = decide_review(ok_result(), {"summary": 3, "approach_tag": "a\nb", "metric": "n/a"}, [])
    assert not out.is_buggy and out.approach_tag == "a" and out.metric_disagreement is None
    assert any("is_bug" in r for r in out.reasons)
    out = decide_review(ok_result(), "not a dict", [])  # type: ignore[arg-type]
    assert not out.is_buggy


def test_parse_tool_arguments():
    assert parse_tool_arguments('{"is_bug": false}') == {"is_bug": False}
    assert parse_tool_arguments('```json\n{"is_bug": true}\n```') == {"is_bug": True}
    assert parse_tool_arguments("{broken") is None
    assert parse_tool_arguments("[1]") is None
    assert parse_tool_arguments(None) is None
