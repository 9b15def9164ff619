"""Static auxiliary metrics of circle packing (seed 002): shape statistics of the packing.

Runs in the sandbox on the program output saved by the evaluator (``extra.npz``):
``{"centers": array (26, 2), "radii": array (26,)}``. Cheap, deterministic, numpy only.
"""

import numpy as np

TOUCH_TOL = 1e-6
"""A circle touches a side / another circle when the gap is at most this (unit-square units)."""


def evaluate_auxiliary_metrics(program_output):
    """Metrics of one packing: radius spread, smallest circle, border and circle contacts."""
    centers = np.asarray(program_output["centers"], dtype=float).reshape(-1, 2)
    radii = np.asarray(program_output["radii"], dtype=float).reshape(-1)
    n = radii.size
    border_gap = np.minimum.reduce(
        [centers[:, 0] - radii, centers[:, 1] - radii, 1 - centers[:, 0] - radii, 1 - centers[:, 1] - radii]
    )
    ii, jj = np.triu_indices(n, 1)
    gaps = np.sqrt(np.sum((centers[ii] - centers[jj]) ** 2, axis=1)) - radii[ii] - radii[jj]
    contacts = int(np.sum(gaps <= TOUCH_TOL))
    return {
        "radius_std": float(np.std(radii)),
        "min_radius": float(np.min(radii)),
        "border_touch_fraction": float(np.mean(border_gap <= TOUCH_TOL)),
        "contacts_per_circle": float(2 * contacts / n) if n else 0.0,
        "covered_area_fraction": float(np.pi * np.sum(radii**2)),
    }


METRIC_DEFINITIONS = {
    "radius_std": {
        "name": "radius_std",
        "description": "Standard deviation of the radii (0 = all circles equal)",
        "interpretation": "neutral",
        "unit": "",
        "formula": "std(radii)",
    },
    "min_radius": {
        "name": "min_radius",
        "description": "Radius of the smallest circle (near 0 = a wasted circle)",
        "interpretation": "neutral",
        "unit": "",
        "formula": "min(radii)",
    },
    "border_touch_fraction": {
        "name": "border_touch_fraction",
        "description": "Fraction of circles touching a side of the square (gap <= 1e-6)",
        "interpretation": "neutral",
        "unit": "fraction",
        "formula": "mean(min(x-r, y-r, 1-x-r, 1-y-r) <= 1e-6)",
    },
    "contacts_per_circle": {
        "name": "contacts_per_circle",
        "description": "Mean number of other circles each circle touches (gap <= 1e-6); rigid packings have many",
        "interpretation": "higher_better",
        "unit": "contacts",
        "formula": "2 * #{i<j: d_ij - r_i - r_j <= 1e-6} / n",
    },
    "covered_area_fraction": {
        "name": "covered_area_fraction",
        "description": "Fraction of the unit square covered by the circles",
        "interpretation": "neutral",
        "unit": "fraction",
        "formula": "pi * sum(radii^2)",
    },
}
