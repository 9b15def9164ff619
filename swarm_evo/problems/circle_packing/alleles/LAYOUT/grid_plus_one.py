# allele: 5x5 square grid plus one extra circle squeezed between the four central cells
GRID_SIZE = 5
EXTRA_X = 0.4
EXTRA_Y = 0.4


def place_centers(n):
    ticks = (np.arange(GRID_SIZE) + 0.5) / GRID_SIZE
    xs, ys = np.meshgrid(ticks, ticks)
    points = np.column_stack([xs.ravel(), ys.ravel()])
    points = np.vstack([points, [[EXTRA_X, EXTRA_Y]]])
    if len(points) < n:
        extra = np.random.default_rng(0).uniform(0.1, 0.9, (n - len(points), 2))
        points = np.vstack([points, extra])
    return points[:n]
