"""Travelling salesman on a TSPLIB EUC_2D instance (the one the task names): find a short closed tour.

The evaluator calls ``solve(coords)`` with coords a float array of shape (n, 2) and expects a
list of the n city indices (0-based), each exactly once, in visiting order. Distances are
TSPLIB EUC_2D: ``int(sqrt(dx*dx + dy*dy) + 0.5)``; the tour returns to its first city.

The pipeline is: build a tour (CONSTRUCTION) -> local search (IMPROVEMENT) -> perturbation
and re-optimisation (PERTURBATION). Each section defines one function with a fixed signature.
"""

import numpy as np


def solve(coords):
    """Entry point: coords (n, 2) -> list of the n city indices in visiting order."""
    coords = np.asarray(coords, dtype=float)
    dist = distance_matrix(coords)
    tour = construct_tour(dist)
    tour = improve_tour(tour, dist)
    tour = perturb_and_improve(tour, dist)
    return [int(city) for city in tour]


def distance_matrix(coords):
    """TSPLIB EUC_2D distances (n, n): nint of the Euclidean distance."""
    diff = coords[:, None, :] - coords[None, :, :]
    return np.floor(np.sqrt(np.sum(diff**2, axis=-1)) + 0.5)


def tour_length(tour, dist):
    """Length of the closed tour."""
    tour = np.asarray(tour)
    return float(np.sum(dist[tour, np.roll(tour, -1)]))


# [SECTION: CONSTRUCTION]
# construct_tour(dist) -> list of city indices (a permutation of range(n)).
START_CITY = 0


def construct_tour(dist):
    # Nearest neighbour: always go to the closest unvisited city.
    n = dist.shape[0]
    current = START_CITY % n
    tour = [current]
    unvisited = set(range(n)) - {current}
    while unvisited:
        current = min(unvisited, key=lambda city: dist[current, city])
        tour.append(current)
        unvisited.remove(current)
    return tour


# [SECTION: IMPROVEMENT]
# improve_tour(tour, dist) -> a tour no longer than the input.
SWAP_PASSES = 1


def improve_tour(tour, dist):
    # Swap neighbouring cities whenever that shortens the tour.
    tour = list(tour)
    n = len(tour)
    for _ in range(SWAP_PASSES):
        for k in range(n):
            candidate = tour[:]
            a, b = k, (k + 1) % n
            candidate[a], candidate[b] = candidate[b], candidate[a]
            if tour_length(candidate, dist) < tour_length(tour, dist):
                tour = candidate
    return tour


# [SECTION: PERTURBATION]
# perturb_and_improve(tour, dist) -> a tour no longer than the input (e.g. iterated local search).


def perturb_and_improve(tour, dist):
    return tour
