# allele: (broken) rings layout that forgets the centre circle: returns n - 1 centres
RING_RADIUS = 0.35
INNER_COUNT = 9


def place_centers(n):
    centers = []
    for i in range(INNER_COUNT):
        angle = 2 * np.pi * i / INNER_COUNT
        centers.append([0.5 + 0.5 * RING_RADIUS * np.cos(angle), 0.5 + 0.5 * RING_RADIUS * np.sin(angle)])
    outer = n - 1 - INNER_COUNT
    for i in range(outer):
        angle = 2 * np.pi * i / outer
        centers.append([0.5 + RING_RADIUS * np.cos(angle), 0.5 + RING_RADIUS * np.sin(angle)])
    return np.array(centers)
