# allele: staggered hexagonal-ish rows (5, 5, 6, 5, 5 circles) spanning the square
ROW_COUNTS = (5, 5, 6, 5, 5)
EDGE_MARGIN = 0.1


def place_centers(n):
    rows = list(ROW_COUNTS)
    widest = max(rows)
    points = []
    for r, count in enumerate(rows):
        y = EDGE_MARGIN + (1 - 2 * EDGE_MARGIN) * r / max(len(rows) - 1, 1)
        # Shorter rows sit in the gaps of the widest one (half a step to the right).
        offset = 0.5 * (widest - count)
        for k in range(count):
            x = EDGE_MARGIN + (1 - 2 * EDGE_MARGIN) * (k + offset) / max(widest - 1, 1)
            points.append([x, y])
    points = np.array(points[:n], dtype=float)
    if len(points) < n:
        extra = np.random.default_rng(0).uniform(0.1, 0.9, (n - len(points), 2))
        points = np.vstack([points, extra])
    return np.clip(points, 0.0, 1.0)
