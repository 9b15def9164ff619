"""Pack 26 circles into the unit square, maximising the sum of their radii.

The evaluator calls ``run_packing()`` and expects ``(centers, radii, reported_sum)``:
centers a float array of shape (26, 2), radii a float array of shape (26,), reported_sum the
sum of the radii. Circles must lie inside [0, 1]^2 and must not overlap.

The pipeline is: place centres (LAYOUT) -> radii for those centres (RADII) -> optional local
improvement (REFINE). Each section defines one function with a fixed signature.
"""

import numpy as np

N_CIRCLES = 26


def run_packing():
    """Entry point: returns (centers (26, 2), radii (26,), sum of radii)."""
    centers = np.asarray(place_centers(N_CIRCLES), dtype=float)
    radii = np.asarray(compute_radii(centers), dtype=float)
    centers, radii = refine(centers, radii)
    centers = np.asarray(centers, dtype=float)
    radii = np.asarray(radii, dtype=float)
    return centers, radii, float(np.sum(radii))


# [SECTION: LAYOUT]
# place_centers(n) -> array (n, 2): one circle in the middle, rings around it.
INNER_RING_RADIUS = 0.3
OUTER_RING_RADIUS = 0.7
INNER_RING_COUNT = 8
BORDER_MARGIN = 0.01


def place_centers(n):
    centers = np.zeros((n, 2))
    centers[0] = [0.5, 0.5]
    inner = min(INNER_RING_COUNT, n - 1)
    for i in range(inner):
        angle = 2 * np.pi * i / inner
        centers[1 + i] = [0.5 + INNER_RING_RADIUS * np.cos(angle), 0.5 + INNER_RING_RADIUS * np.sin(angle)]
    outer = n - 1 - inner
    for i in range(outer):
        angle = 2 * np.pi * i / outer
        centers[1 + inner + i] = [0.5 + OUTER_RING_RADIUS * np.cos(angle), 0.5 + OUTER_RING_RADIUS * np.sin(angle)]
    return np.clip(centers, BORDER_MARGIN, 1 - BORDER_MARGIN)


# [SECTION: RADII]
# compute_radii(centers) -> array (n,): the largest radii found for fixed centres, valid packing.


def compute_radii(centers):
    n = centers.shape[0]
    # Start from the distance to the nearest side of the square.
    radii = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    # Shrink both circles of every overlapping pair proportionally.
    for i in range(n):
        for j in range(i + 1, n):
            dist = np.sqrt(np.sum((centers[i] - centers[j]) ** 2))
            if radii[i] + radii[j] > dist:
                scale = dist / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii


# [SECTION: REFINE]
# refine(centers, radii) -> (centers, radii): local improvement; must return a valid packing.
REFINE_ITERATIONS = 30
STEP_SIZE = 0.02
REFINE_SEED = 0


def refine(centers, radii):
    # Hill climbing: nudge one centre at random, keep the move when the radii sum grows.
    rng = np.random.default_rng(REFINE_SEED)
    best_centers, best_radii = centers.copy(), radii.copy()
    for _ in range(REFINE_ITERATIONS):
        trial = best_centers.copy()
        k = rng.integers(len(trial))
        trial[k] = np.clip(trial[k] + rng.normal(0.0, STEP_SIZE, 2), 0.0, 1.0)
        trial_radii = compute_radii(trial)
        if trial_radii.sum() > best_radii.sum():
            best_centers, best_radii = trial, trial_radii
    return best_centers, best_radii
