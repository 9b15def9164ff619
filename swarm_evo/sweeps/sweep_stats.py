"""Statistics of benchmark sweeps: mean ± SEM over seeds, and policy comparisons with a
bootstrap interval (SPEC §12; issues 6 and 17).

:func:`mean_and_sem`: SEM = s / sqrt(n), s the sample standard deviation (ddof = 1) — the same
as ``scipy.stats.sem`` — None for n < 2 (one run says nothing about the spread).

:func:`compare`: how much better policy A (the reference, e.g. ``two_phase``) is than policy B
on one task, from the per-seed scores of each, in the score's own unit and *oriented by the
objective*: ``advantage = mean(A) − mean(B)`` when higher is better, ``mean(B) − mean(A)`` when
lower is better, so ``advantage > 0`` always means A is better. Its 95 % interval is a
percentile bootstrap (``scipy.stats.bootstrap``, ``method="percentile"``, 10 000 resamples,
fixed seed): each resample draws the seeds of A and the seeds of B independently, with
replacement (the runs of two policies are independent: seed k of A shares nothing with seed k
of B but the number), and recomputes the advantage. Percentile rather than BCa because BCa's
jackknife acceleration is undefined for the constant samples small sweeps produce (every seed
reaching the same optimum). Verdict: the interval above 0 -> "better", below 0 -> "worse",
containing 0 -> "no difference" (at this budget and number of seeds; with 3 seeds per policy
a bootstrap has only 10 distinct resamples per policy and its interval is narrow and optimistic:
read the verdict as a summary of these runs, not as a significance test).
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
VERDICTS = ("better", "worse", "no difference", "too few runs")


def mean_and_sem(scores: Sequence[float]) -> tuple[float | None, float | None]:
    """``(mean, SEM)`` of ``scores``; SEM = stdev(ddof=1) / sqrt(n) (= scipy.stats.sem), None for
    n < 2; both None for no scores."""
    values = [float(x) for x in scores]
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    return mean, statistics.stdev(values) / math.sqrt(len(values))


def format_score(mean: float | None, sem: float | None, digits: int = 5) -> str:
    """``"0.81234 ± 0.00321"``, ``"0.81234"`` (no SEM) or ``"-"`` (no score)."""
    if mean is None:
        return "-"
    text = f"{mean:.{digits}f}"
    return text if sem is None else f"{text} ± {sem:.{digits}f}"


def compare(reference: Sequence[float], other: Sequence[float], *, lower_is_better: bool,
            confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """The reference policy's advantage over another on one task (module docstring).

    Args:
        reference, other: per-seed raw scores of the two policies (runs without a score left
            out), in the score's unit (e.g. tour length); each needs at least one value.
        lower_is_better: the objective's direction (e.g. True for a tour length).

    Returns:
        ``{"advantage": float, "low": float, "high": float, "verdict": "better" | "worse" |
        "no difference", "n_reference": int, "n_other": int}``: ``advantage`` > 0 means the
        reference is better; ``[low, high]`` its 95 % percentile-bootstrap interval.

    Raises:
        ValueError: an empty sample.
    """
    from scipy.stats import bootstrap

    a = np.asarray(reference, dtype=float)
    b = np.asarray(other, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"compare needs at least one score per policy, got {a.size} and {b.size}")
    sign = -1.0 if lower_is_better else 1.0

    def advantage(x, y, axis=-1):
        return sign * (np.mean(x, axis=axis) - np.mean(y, axis=axis))

    point = float(advantage(a, b))
    if a.size < 2 or b.size < 2:
        return {"advantage": point, "low": None, "high": None, "verdict": "too few runs",
                "n_reference": int(a.size), "n_other": int(b.size)}
    with warnings.catch_warnings():  # constant samples: a degenerate (zero-width) distribution is the answer
        warnings.simplefilter("ignore")
        result = bootstrap((a, b), advantage, paired=False, vectorized=True, n_resamples=resamples,
                           confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):  # scipy gives NaN when every resample is equal
        low = high = point
    verdict = "better" if low > 0 else "worse" if high < 0 else "no difference"
    return {"advantage": point, "low": low, "high": high, "verdict": verdict,
            "n_reference": int(a.size), "n_other": int(b.size)}
