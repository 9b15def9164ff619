# allele: optimal radii for fixed centres via a linear program (scipy.optimize.linprog, HiGHS)
from scipy.optimize import linprog

RADII_SAFETY_MARGIN = 1e-12


def compute_radii(centers):
    n = centers.shape[0]
    border = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    border = np.clip(border, 0.0, None)
    ii, jj = np.triu_indices(n, 1)
    dist = np.sqrt(np.sum((centers[ii] - centers[jj]) ** 2, axis=1))
    a_ub = np.zeros((len(ii), n))
    a_ub[np.arange(len(ii)), ii] = 1.0
    a_ub[np.arange(len(ii)), jj] = 1.0
    result = linprog(-np.ones(n), A_ub=a_ub, b_ub=dist, bounds=list(zip(np.zeros(n), border)), method="highs")
    radii = np.clip(result.x, 0.0, border) if result.success else np.zeros(n)
    radii = np.maximum(radii - RADII_SAFETY_MARGIN, 0.0)
    # Solver tolerances can leave tiny overlaps: shrink every violating pair until none is left.
    for _ in range(100):
        excess = radii[ii] + radii[jj] - dist
        bad = excess > 0
        if not bad.any():
            break
        for i, j, e in zip(ii[bad], jj[bad], excess[bad]):
            total = radii[i] + radii[j]
            if total > 0:
                radii[i] -= e * radii[i] / total + 1e-15
                radii[j] -= e * radii[j] / total + 1e-15
        radii = np.maximum(radii, 0.0)
    return radii
