# allele: random restarts: improve_tour from random permutations, keep the best tour
RESTARTS = 10
RANDOM_SEED = 0


def perturb_and_improve(tour, dist):
    rng = np.random.default_rng(RANDOM_SEED)
    best, best_len = list(tour), tour_length(tour, dist)
    for _ in range(RESTARTS):
        candidate = improve_tour([int(c) for c in rng.permutation(len(tour))], dist)
        length = tour_length(candidate, dist)
        if length < best_len:
            best, best_len = candidate, length
    return best
