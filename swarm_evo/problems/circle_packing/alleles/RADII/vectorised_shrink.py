# allele: border distances, then repeatedly shrink all overlapping pairs at once (numpy)
SHRINK_ROUNDS = 200


def compute_radii(centers):
    n = centers.shape[0]
    radii = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    radii = np.clip(radii, 0.0, None)
    ii, jj = np.triu_indices(n, 1)
    dist = np.sqrt(np.sum((centers[ii] - centers[jj]) ** 2, axis=1))
    for _ in range(SHRINK_ROUNDS):
        ratio = dist / np.maximum(radii[ii] + radii[jj], 1e-300)
        if ratio.min() >= 1.0:
            break
        # Each circle takes the tightest scale factor among its overlapping pairs.
        scale = np.ones(n)
        np.minimum.at(scale, ii, np.minimum(ratio, 1.0))
        np.minimum.at(scale, jj, np.minimum(ratio, 1.0))
        radii = radii * scale
    # Final safety pass: exact pairwise shrink (a no-op when the loop converged).
    for i, j in zip(ii, jj):
        d = np.hypot(*(centers[i] - centers[j]))
        if radii[i] + radii[j] > d:
            s = d / (radii[i] + radii[j])
            radii[i] *= s
            radii[j] *= s
    return radii
