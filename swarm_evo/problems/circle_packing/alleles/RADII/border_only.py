# allele: (broken) radius = distance to the nearest side, ignoring the other circles
RADIUS_SCALE = 1.0


def compute_radii(centers):
    border = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    return RADIUS_SCALE * border
