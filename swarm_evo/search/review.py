"""Review rules: deterministic facts first, the LLM's review second (SPEC §6 "Review").

Pure functions, no LLM calls. The caller (tasks/review) makes the forced ``submit_review``
tool call with :data:`REVIEW_TOOL`, parses its arguments with
:func:`swarm_evo.llm.json_reply.parse_tool_arguments` and hands them, with the execution
result and the submission check, to :func:`decide_review`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swarm_evo.search.approach_tag import APPROACH_TAG_MAX, derive_approach_tag
from swarm_evo.sandbox.base import ExecutionResult


_FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf(?:inity)?"
METRIC_LINE = re.compile(rf"^Validation metric:\s*({_FLOAT})\s*$", re.I)
"""A whole stdout line ``Validation metric: <float>`` (SPEC §6); NaN and inf included."""

METRIC_REL_TOL = 1e-6
"""Relative tolerance under which the LLM's metric agrees with the parsed one."""


PARSE_STDOUT = object()
"""``decide_review(..., metric=PARSE_STDOUT)``: take the metric from the program's stdout
(competitions); problems pass the evaluator's score instead."""


def parse_metric(stdout: str) -> float | None:
    """The validation metric printed by a program (SPEC §6).

    Returns the number on the LAST line of ``stdout`` that matches
    ``^Validation metric:\\s*<float>\\s*$`` as a whole (case-insensitive label; lines with
    any other text, e.g. ``Validation metric: 0.5 (fold 1)``, are ignored). ``nan``/``inf``
    parse to the float values so that the caller can flag non-finite metrics; None when no
    line matches.
    """
    value: float | None = None
    for line in (stdout or "").splitlines():
        m = METRIC_LINE.match(line)
        if m:
            value = float(m.group(1))
    return value


REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": (
            "Submit the review of one executed solution program: whether it is buggy, whether "
            "it wrote a CSV submission, what it did and what to try next."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "is_bug": {
                    "type": "boolean",
                    "description": "True if the run failed or its output shows a bug "
                    "(exception, leakage, wrong target, nonsensical metric, ...).",
                },
                "has_csv_submission": {
                    "type": "boolean",
                    "description": "True if the program saved predictions to "
                    "./submission/submission.csv.",
                },
                "summary": {
                    "type": "string",
                    "description": "2-4 sentences: what the program did and how it went.",
                },
                "key_change": {
                    "type": "string",
                    "description": "The main change relative to its parent (or the approach, for a draft).",
                },
                "insight": {"type": "string", "description": "What this result teaches about the problem."},
                "bottleneck": {"type": "string", "description": "What most limits the score now."},
                "suggested_direction": {"type": "string", "description": "The most promising next change."},
                "approach_tag": {
                    "type": "string",
                    "description": "One line naming the approach, e.g. "
                    "'LightGBM + 5-fold CV + log1p target'.",
                },
                "metric": {
                    "type": ["number", "null"],
                    "description": "The validation metric reported in the output, or null if none.",
                },
                "metric_name": {"type": "string", "description": "Name of the metric, e.g. 'RMSE'."},
            },
            "required": ["is_bug", "has_csv_submission", "summary", "approach_tag", "metric"],
        },
    },
}
"""litellm/OpenAI tool schema of the forced review call ``submit_review`` (SPEC §6)."""

REVIEW_TOOL_CHOICE: dict[str, Any] = {"type": "function", "function": {"name": "submit_review"}}
"""``tool_choice`` that forces the ``submit_review`` call."""

DETAIL_FIELDS = ("key_change", "insight", "bottleneck", "suggested_direction", "metric_name")


class ReviewOutcome(BaseModel):
    """The decided review of one node (SPEC §6); maps onto Node fields.

    Fields:
        metric_value: the parsed metric when finite, else None (never the LLM's number).
        is_buggy: see :func:`decide_review`.
        approach_tag: one line from the LLM; when it gave none, one derived from the code
            (:func:`derive_approach_tag`), ``"unknown"`` when that finds nothing either.
        analysis: the LLM's summary ("" when none).
        details: key_change, insight, bottleneck, suggested_direction, metric_name (str or None).
        reasons: why the node is buggy, one string each; entries starting with ``"note:"``
            are remarks (e.g. a missing LLM review) and do not by themselves make it buggy.
        metric_disagreement: ``{"parsed", "llm", "rel_diff"}`` when the LLM reported a
            different metric than the one parsed from stdout, else None.
    """

    model_config = ConfigDict(extra="forbid")

    metric_value: float | None = None
    is_buggy: bool = True
    approach_tag: str = "unknown"
    analysis: str = ""
    details: dict[str, str | None] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    metric_disagreement: dict[str, Any] | None = None


_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}


def _as_bool(value: Any) -> bool | None:
    """A boolean from a review field: a bool, 0/1, or "true"/"false"/"yes"/"no" (any case,
    a trailing period or explanation after the word allowed: "yes, the metric is NaN");
    None otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = re.split(r"[\s,.;:()]+", value.strip().lower(), maxsplit=1)[0]
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]|-[A-Za-z])")


def _as_float(value: Any) -> float | None:
    """A number from a review field: an int or float, a numeric string, or the first number
    in a string ("0.81 (accuracy)", "RMSE = 0.81"; a count such as "5-fold" is skipped);
    None otherwise (issue 13: models give metrics as strings)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            m = _NUMBER_IN_TEXT.search(value)
            return float(m.group(0)) if m else None
    return None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _metrics_agree(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=METRIC_REL_TOL, abs_tol=1e-12)


def decide_review(
    exec_result: ExecutionResult,
    llm_review: dict[str, Any] | None,
    submission_errors: list[str],
    metric: float | None | object = PARSE_STDOUT,
    code: str = "",
) -> ReviewOutcome:
    """Combine deterministic checks with the LLM's review; facts win (SPEC §6 "Review").

    ``metric_value`` = :func:`parse_metric` of ``exec_result.stdout``. ``is_buggy`` when any of:
    the execution raised (``exc_type`` not None: exception, timeout, OOM), the submission is
    missing or invalid (``submission_errors`` non-empty), no metric line was parsed, the
    parsed metric is not finite, or the LLM says ``is_bug``. When the LLM's ``metric``
    differs from the parsed one (relative tolerance 1e-6, or the LLM gives a number where
    none was parsed), the parsed one stands and the disagreement is recorded. A missing or
    garbled ``llm_review`` (None, not a dict, fields missing or of the wrong type) is treated
    as no opinion and noted in ``reasons``.

    Args:
        exec_result: the execution of the (last debug attempt of the) program.
        llm_review: the ``submit_review`` arguments (see :func:`swarm_evo.llm.json_reply.parse_tool_arguments`) or None.
        submission_errors: problems found by the submission/format check (problems: the
            evaluation's error); empty = valid.
        metric: :data:`PARSE_STDOUT` (default) to parse the metric line of stdout, or the
            score an evaluator computed (None when the evaluation did not pass).
        code: the program; when the review gives no approach tag (no review, an empty or
            "unknown" tag), the tag is :func:`derive_approach_tag` of it (issue 13), and a
            note says so.
    """
    reasons: list[str] = []
    review = llm_review if isinstance(llm_review, dict) else None
    if review is None:
        reasons.append("note: no usable LLM review; decided on deterministic checks only")

    if exec_result.exc_type is not None:
        info = f": {exec_result.exc_info}" if exec_result.exc_info else ""
        reasons.append(f"execution failed with {exec_result.exc_type}{info}")
    for err in submission_errors:
        reasons.append(f"invalid submission: {err}")

    from_stdout = metric is PARSE_STDOUT
    parsed = parse_metric(exec_result.stdout) if from_stdout else metric
    metric_value: float | None = parsed
    if parsed is None:
        reasons.append("no line `Validation metric: <float>` in stdout" if from_stdout
                       else "no score: the evaluation did not pass")
    elif not math.isfinite(parsed):
        reasons.append(f"validation metric is not finite ({parsed})")
        metric_value = None

    llm_bug: bool | None = None
    approach_tag = "unknown"
    analysis = ""
    details: dict[str, str | None] = {name: None for name in DETAIL_FIELDS}
    disagreement: dict[str, Any] | None = None
    if review is not None:
        llm_bug = _as_bool(review.get("is_bug"))
        if llm_bug is None:
            reasons.append("note: LLM review has no valid `is_bug`; treated as no opinion")
        elif llm_bug:
            summary = _as_text(review.get("summary"))
            reasons.append("LLM review reports a bug" + (f": {summary}" if summary else ""))
        tag = _as_text(review.get("approach_tag"))
        if tag:
            approach_tag = tag.splitlines()[0].strip()[:APPROACH_TAG_MAX] or "unknown"
        analysis = _as_text(review.get("summary")) or ""
        for name in DETAIL_FIELDS:
            details[name] = _as_text(review.get(name))
        llm_metric = _as_float(review.get("metric"))
        if llm_metric is not None and (parsed is None or not _metrics_agree(parsed, llm_metric)):
            rel = None
            if parsed is not None and math.isfinite(parsed) and math.isfinite(llm_metric):
                rel = abs(parsed - llm_metric) / max(abs(parsed), abs(llm_metric), 1e-12)
            disagreement = {"parsed": parsed, "llm": llm_metric, "rel_diff": rel}

    if approach_tag.lower() == "unknown" and code.strip():
        derived = derive_approach_tag(code)
        if derived != "unknown":
            approach_tag = derived
            reasons.append("note: approach tag derived from the code (the review gave none)")

    is_buggy = (
        exec_result.exc_type is not None
        or bool(submission_errors)
        or parsed is None
        or not math.isfinite(parsed)
        or llm_bug is True
    )
    return ReviewOutcome(
        metric_value=metric_value,
        is_buggy=is_buggy,
        approach_tag=approach_tag,
        analysis=analysis,
        details=details,
        reasons=reasons,
        metric_disagreement=disagreement,
    )
