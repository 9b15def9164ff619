# allele: iterated local search: double-bridge kicks + improve_tour, keep the best tour
import time

KICKS = 300
TIME_LIMIT_SECONDS = 20.0
RANDOM_SEED = 0


def _double_bridge(tour, rng):
    n = len(tour)
    a, b, c = sorted(rng.choice(np.arange(1, n), size=3, replace=False))
    return tour[:a] + tour[b:c] + tour[a:b] + tour[c:]


def perturb_and_improve(tour, dist):
    tour = [int(c) for c in tour]
    if len(tour) < 8:
        return tour
    rng = np.random.default_rng(RANDOM_SEED)
    best, best_len = tour, tour_length(tour, dist)
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    for _ in range(KICKS):
        if time.monotonic() > deadline:
            break
        candidate = improve_tour(_double_bridge(best, rng), dist)
        length = tour_length(candidate, dist)
        if length < best_len:
            best, best_len = candidate, length
    return best
