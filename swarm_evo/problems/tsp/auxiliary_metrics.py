"""Static auxiliary metrics of the TSP problem (seed 002): edge statistics of the tour.

Runs in the sandbox on the program output saved by the evaluator (``extra.npz``):
``{"tour": int array (n,), "coords": float array (n, 2)}``. Edge lengths use the TSPLIB
EUC_2D rounding ``int(sqrt(dx^2 + dy^2) + 0.5)``, like the score. Numpy only, deterministic.
"""

import numpy as np


def _edges(program_output):
    tour = np.asarray(program_output["tour"], dtype=np.int64).reshape(-1)
    coords = np.asarray(program_output["coords"], dtype=float).reshape(-1, 2)
    a = coords[tour]
    b = coords[np.roll(tour, -1)]
    return np.floor(np.sqrt(np.sum((a - b) ** 2, axis=1)) + 0.5), a, b


def _crossings(a, b):
    """Number of pairs of non-adjacent tour edges that properly cross (0 for a 2-opt optimum)."""
    n = len(a)
    if n < 4:
        return 0
    i, j = np.triu_indices(n, 2)
    keep = ~((i == 0) & (j == n - 1))  # the first and last edge share a city
    i, j = i[keep], j[keep]
    p, r = a[i], b[i] - a[i]
    q, s = a[j], b[j] - a[j]
    cross = r[:, 0] * s[:, 1] - r[:, 1] * s[:, 0]
    qp = q - p
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (qp[:, 0] * s[:, 1] - qp[:, 1] * s[:, 0]) / cross
        u = (qp[:, 0] * r[:, 1] - qp[:, 1] * r[:, 0]) / cross
    eps = 1e-12
    hit = (np.abs(cross) > eps) & (t > eps) & (t < 1 - eps) & (u > eps) & (u < 1 - eps)
    return int(np.sum(hit))


def evaluate_auxiliary_metrics(program_output):
    """Longest and mean edge, their ratio, and the number of crossing edge pairs."""
    lengths, a, b = _edges(program_output)
    mean = float(np.mean(lengths)) if lengths.size else 0.0
    longest = float(np.max(lengths)) if lengths.size else 0.0
    return {
        "longest_edge": longest,
        "mean_edge": mean,
        "longest_to_mean_edge": longest / mean if mean > 0 else 0.0,
        "crossing_edge_pairs": float(_crossings(a, b)),
    }


METRIC_DEFINITIONS = {
    "longest_edge": {
        "name": "longest_edge",
        "description": "Length of the longest edge of the tour",
        "interpretation": "lower_better",
        "unit": "",
        "formula": "max_k d(tour[k], tour[k+1])",
    },
    "mean_edge": {
        "name": "mean_edge",
        "description": "Mean edge length (tour length / n)",
        "interpretation": "lower_better",
        "unit": "",
        "formula": "mean_k d(tour[k], tour[k+1])",
    },
    "longest_to_mean_edge": {
        "name": "longest_to_mean_edge",
        "description": "Longest edge divided by the mean edge (large = a few long jumps)",
        "interpretation": "lower_better",
        "unit": "ratio",
        "formula": "longest_edge / mean_edge",
    },
    "crossing_edge_pairs": {
        "name": "crossing_edge_pairs",
        "description": "Pairs of tour edges that cross; every crossing can be removed by a 2-opt move",
        "interpretation": "lower_better",
        "unit": "pairs",
        "formula": "#{(i, j) non-adjacent edges: segments intersect properly}",
    },
}
