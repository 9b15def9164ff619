"""Evaluator of the circle-packing problem: 26 circles in the unit square, maximise Σ radii.

The candidate defines ``run_packing()`` returning ``(centers, radii, reported_sum)`` with
centers of shape (26, 2) and radii of shape (26,) (ShinkaEvolve's circle-packing example;
its hardened evaluator ``examples/circle_packing/evaluate.py`` was the reference for the checks).
Validation is strict and every check names the offending circles and values:

1. structure: a 3-sequence; centers/radii real numeric arrays of the exact shapes; reported_sum
   a real number (bools, strings, objects and ragged lists are rejected);
2. every centre coordinate, radius and reported_sum is finite (NaN centres pass naive ``<``
   comparisons, the reward hack reported against the naive validator);
3. radii ≥ 0;
4. |reported_sum − Σ radii| ≤ 1e-6 (catches "report 4" hacks; the reported value is never
   scored);
5. every circle inside [0, 1]² (x − r ≥ −1e-9, x + r ≤ 1 + 1e-9, same for y);
6. no overlap: d_ij ≥ r_i + r_j − 1e-9 for every pair (vectorised).

combined_score = the recomputed Σ radii (SPEC §11). Known best ≈ 2.635983 (problem.yaml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swarm_evo.evaluation.contract import EvaluationResult, MetricDefinition
from swarm_evo.evaluation.runner import RunScore, evaluate_runs

N_CIRCLES = 26
"""Number of circles the program must return."""

KNOWN_BEST = 2.635983
"""Best known sum of radii for 26 circles (fallback when problem.yaml has no known_best)."""

GEOMETRY_TOL = 1e-9
"""Tolerance of the containment and overlap checks (unit-square units)."""

SUM_TOL = 1e-6
"""Largest accepted |reported_sum − Σ radii|."""

MAX_LISTED = 5
"""At most this many offending circles/pairs are listed in an error message."""


class PackingError(ValueError):
    """The program output is not a valid packing; the message names circles and values."""


def _fmt(x: float) -> str:
    return f"{x:.10g}"


def _real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a float array; raises PackingError unless it is real numeric (no bools)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise PackingError(f"{name} is not a numeric array: {exc}") from exc
    if arr.dtype.kind not in "iuf":
        raise PackingError(
            f"{name} must hold real numbers (int or float), got dtype {arr.dtype} "
            f"({type(value).__name__})"
        )
    return arr.astype(float)


def _list(indices: np.ndarray, describe) -> str:
    shown = ", ".join(describe(int(i)) for i in indices[:MAX_LISTED])
    more = f" (and {len(indices) - MAX_LISTED} more)" if len(indices) > MAX_LISTED else ""
    return shown + more


def validate_packing(output: Any, n: int = N_CIRCLES) -> tuple[np.ndarray, np.ndarray, float]:
    """Check a ``run_packing()`` return value strictly.

    Args:
        output: the decoded return value: a list/tuple ``(centers, radii, reported_sum)``.
        n: the required number of circles.

    Returns:
        ``(centers (n, 2) float, radii (n,) float, reported_sum float)``.

    Raises:
        PackingError: the first failed check (order of the module docstring), naming the
            circle indices and the offending values.
    """
    if isinstance(output, dict) or not isinstance(output, (list, tuple)) or len(output) != 3:
        kind = type(output).__name__
        size = f" of length {len(output)}" if isinstance(output, (list, tuple)) else ""
        raise PackingError(f"run_packing must return (centers, radii, reported_sum), got a {kind}{size}")
    centers_raw, radii_raw, reported_raw = output
    centers = _real_array(centers_raw, "centers")
    radii = _real_array(radii_raw, "radii")
    if centers.shape != (n, 2):
        raise PackingError(f"centers must have shape ({n}, 2), got {centers.shape}")
    if radii.shape != (n,):
        raise PackingError(f"radii must have shape ({n},), got {radii.shape}")
    reported_arr = _real_array(reported_raw, "reported_sum")
    if reported_arr.shape != ():
        raise PackingError(f"reported_sum must be a single number, got shape {reported_arr.shape}")
    reported = float(reported_arr)

    bad_centres = np.flatnonzero(~np.isfinite(centers).all(axis=1))
    if bad_centres.size:
        raise PackingError(
            f"non-finite centre coordinates in {bad_centres.size} circle(s): "
            + _list(bad_centres, lambda i: f"circle {i} at ({_fmt(centers[i, 0])}, {_fmt(centers[i, 1])})")
        )
    bad_radii = np.flatnonzero(~np.isfinite(radii))
    if bad_radii.size:
        raise PackingError(
            f"non-finite radii in {bad_radii.size} circle(s): "
            + _list(bad_radii, lambda i: f"circle {i} r={_fmt(radii[i])}")
        )
    if not np.isfinite(reported):
        raise PackingError(f"reported_sum is not finite: {reported}")
    negative = np.flatnonzero(radii < 0)
    if negative.size:
        raise PackingError(
            f"negative radii in {negative.size} circle(s): "
            + _list(negative, lambda i: f"circle {i} r={_fmt(radii[i])}")
        )
    actual = float(np.sum(radii))
    if abs(reported - actual) > SUM_TOL:
        raise PackingError(
            f"reported_sum {_fmt(reported)} differs from the sum of the returned radii "
            f"{_fmt(actual)} by {_fmt(abs(reported - actual))} (> {SUM_TOL:g})"
        )

    low = centers - radii[:, None]
    high = centers + radii[:, None]
    outside = np.flatnonzero((low < -GEOMETRY_TOL).any(axis=1) | (high > 1 + GEOMETRY_TOL).any(axis=1))
    if outside.size:
        raise PackingError(
            f"{outside.size} circle(s) not inside the unit square: "
            + _list(
                outside,
                lambda i: f"circle {i} (x={_fmt(centers[i, 0])}, y={_fmt(centers[i, 1])}, r={_fmt(radii[i])})",
            )
        )

    ii, jj = np.triu_indices(n, 1)
    dist = np.sqrt(np.sum((centers[ii] - centers[jj]) ** 2, axis=1))
    overlap = np.flatnonzero(dist < radii[ii] + radii[jj] - GEOMETRY_TOL)
    if overlap.size:
        # Worst overlaps first.
        overlap = overlap[np.argsort(dist[overlap] - radii[ii[overlap]] - radii[jj[overlap]], kind="stable")]
        raise PackingError(
            f"{overlap.size} overlapping pair(s): "
            + _list(
                overlap,
                lambda k: (
                    f"circles {ii[k]} & {jj[k]} (distance {_fmt(dist[k])} < "
                    f"r{ii[k]}+r{jj[k]} = {_fmt(radii[ii[k]] + radii[jj[k]])})"
                ),
            )
        )
    return centers, radii, reported


def score_packing(output: Any, score_name: str = "sum_of_radii", known_best: float = KNOWN_BEST) -> RunScore:
    """Validate one ``run_packing()`` output and score it (never the reported sum).

    Returns a RunScore: correct with score Σ radii, public ``{score_name, score_interpretation,
    num_circles, gap_to_best, min_radius, max_radius}``, private ``{reported_sum}`` and output
    ``{"centers": (26, 2), "radii": (26,)}``; or incorrect with the PackingError message.
    """
    try:
        centers, radii, reported = validate_packing(output)
    except PackingError as exc:
        return RunScore(correct=False, error=str(exc))
    total = float(np.sum(radii))
    public = {
        score_name: total,
        "score_interpretation": "higher_better",
        "num_circles": int(radii.size),
        "gap_to_best": float(known_best - total),
        "min_radius": float(radii.min()),
        "max_radius": float(radii.max()),
    }
    return RunScore(
        correct=True,
        score=total,
        public=public,
        private={"reported_sum": reported},
        output={"centers": centers, "radii": radii},
    )


def evaluate(program_path: str, results_dir: str, *, sandbox, problem, timeout: float, num_runs: int,
             **kwargs: Any) -> EvaluationResult:
    """Run ``run_packing()`` in the sandbox ``num_runs`` times and score each run strictly.

    Args:
        program_path: the candidate program.
        results_dir: where the runner keeps per-run work directories (``runs/run-<i>/``).
        sandbox: the execution backend; problem: the loaded Problem (entry, score name,
            known_best); timeout: seconds per run; num_runs: number of runs (1 suffices: the
            program takes no input).

    Returns:
        The aggregated EvaluationResult (files are written by the service).
    """
    known_best = problem.known_best if problem.known_best is not None else KNOWN_BEST
    definitions = {
        problem.score_name: MetricDefinition(
            name=problem.score_name,
            description=f"Sum of the radii of the {N_CIRCLES} circles (recomputed by the evaluator)",
            interpretation="higher_better",
            formula="sum(radii)",
            source="primary",
        )
    }
    return evaluate_runs(
        Path(program_path),
        Path(results_dir),
        sandbox=sandbox,
        entry=problem.entry,
        calls_for_run=lambda run: [{"args": [], "kwargs": {}}],
        score_run=lambda run, outputs, harness: score_packing(outputs[0], problem.score_name, known_best),
        num_runs=num_runs,
        timeout=timeout,
        definitions=definitions,
    )
