# allele: (worse) uniformly random centres, no structure
LAYOUT_SEED = 42
MARGIN = 0.05


def place_centers(n):
    rng = np.random.default_rng(LAYOUT_SEED)
    return rng.uniform(MARGIN, 1 - MARGIN, (n, 2))
