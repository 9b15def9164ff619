"""Deterministic answers to the ``submit_review`` tool call, from CTX facts only."""

from __future__ import annotations

import math
import random
import re

from .programs import approach_tag, constants

REVIEW_FIELDS = ("is_bug", "has_csv_submission", "summary", "key_change", "insight", "bottleneck",
                 "suggested_direction", "approach_tag", "metric", "metric_name")

_DIRECTIONS = {
    "tree": ["add interaction and ratio features to DATA", "tune MIN_SAMPLES_LEAF and MAX_DEPTH",
             "lower LEARNING_RATE with more N_ESTIMATORS"],
    "linear": ["add engineered features (log transforms, groups) to DATA",
               "tune REG_STRENGTH", "try a tree ensemble such as HistGradientBoosting"],
    "nonneg": ["tune the TF-IDF vocabulary (TFIDF_MAX_FEATURES, n-grams)", "tune NB_ALPHA",
               "try a calibrated linear model"],
}


def _fold_scores(term_out: str) -> list[float]:
    return [float(v) for v in re.findall(r"^fold \d+/\d+: [\w-]+ = ([-0-9.eE]+)\s*$", term_out or "", re.M)]


def _error_line(term_out: str) -> str:
    lines = [ln.strip() for ln in (term_out or "").split("\n") if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^\w+(\.\w+)*(Error|Exception|Interrupt)\b", ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def review(ctx: dict, rng: random.Random) -> dict:
    """The ``submit_review`` arguments for a review CTX."""
    comp = ctx.get("competition") or {}
    grader = comp.get("grader") or "metric"
    code = ctx.get("code") or ""
    term_out = ctx.get("term_out") or ""
    exc = ctx.get("exc_type")
    metric = ctx.get("parsed_metric")
    sub_errors = list(ctx.get("submission_errors") or [])
    finite = isinstance(metric, (int, float)) and not isinstance(metric, bool) and math.isfinite(metric)
    tag = approach_tag(code) if code else "unknown approach"
    missing_file = any(re.search(r"missing|not found|no such|does not exist|not written|no submission", e, re.I)
                       for e in sub_errors)
    has_csv = not missing_file and (exc is None or "wrote ./submission" in term_out)
    is_bug = bool(exc) or not finite or bool(sub_errors)
    lower = bool(comp.get("is_lower_better", False))
    kind = constants(code).get("PREPROCESS_KIND", "'tree'").strip("'\"")
    folds = _fold_scores(term_out)
    if exc:
        err = _error_line(term_out)
        summary = f"The program failed with {exc}: {err}" if err else f"The program failed with {exc}."
        bottleneck = f"runtime error ({exc})"
        direction = f"fix the {exc} with a minimal change, keeping all 7 section markers"
    elif sub_errors:
        summary = "The program ran but the submission is invalid: " + "; ".join(sub_errors)[:400]
        bottleneck = "submission format"
        direction = "write ./submission/submission.csv with the sample submission's ids and columns"
    elif not finite:
        summary = "The program ran but printed no finite 'Validation metric:' line."
        bottleneck = "missing validation metric"
        direction = "print 'Validation metric: <float>' as the last line"
    else:
        better = "lower is better" if lower else "higher is better"
        summary = f"{tag} reached a cross-validated {grader} of {metric:.5f} ({better})."
        bottleneck = {"tree": "feature engineering", "linear": "model capacity of a linear model",
                      "nonneg": "naive Bayes independence assumption"}.get(kind, "model choice")
        direction = rng.choice(_DIRECTIONS.get(kind, _DIRECTIONS["tree"]))
    if len(folds) >= 2:
        mean = sum(folds) / len(folds)
        std = (sum((f - mean) ** 2 for f in folds) / len(folds)) ** 0.5
        insight = f"{len(folds)} fold scores from {min(folds):.4f} to {max(folds):.4f} (std {std:.4f})."
    elif exc:
        insight = "The failure happened before cross-validation finished."
    else:
        insight = "No per-fold scores were printed."
    return {
        "is_bug": is_bug,
        "has_csv_submission": bool(has_csv),
        "summary": summary,
        "key_change": f"uses {tag}",
        "insight": insight,
        "bottleneck": bottleneck,
        "suggested_direction": direction,
        "approach_tag": tag,
        "metric": float(metric) if finite else None,
        "metric_name": grader,
    }
