# allele: SLSQP over centres and radii (bounded iterations, random restarts), then LP radii
from scipy.optimize import linprog, minimize

SLSQP_MAX_ITER = 300
RESTARTS = 4
JITTER = 0.03
REFINE_SEED = 1


def _radii_lp(centers):
    n = centers.shape[0]
    border = np.clip(np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]]), 0.0, None)
    ii, jj = np.triu_indices(n, 1)
    dist = np.sqrt(np.sum((centers[ii] - centers[jj]) ** 2, axis=1))
    a_ub = np.zeros((len(ii), n))
    a_ub[np.arange(len(ii)), ii] = 1.0
    a_ub[np.arange(len(ii)), jj] = 1.0
    res = linprog(-np.ones(n), A_ub=a_ub, b_ub=dist, bounds=list(zip(np.zeros(n), border)), method="highs")
    radii = np.clip(res.x, 0.0, border) if res.success else np.zeros(n)
    radii = np.maximum(radii - 1e-12, 0.0)
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


def _slsqp(centers, radii):
    n = centers.shape[0]
    ii, jj = np.triu_indices(n, 1)
    m = len(ii)

    def objective(z):
        return -np.sum(z[2 * n:])

    def objective_grad(z):
        g = np.zeros(3 * n)
        g[2 * n:] = -1.0
        return g

    def pair_cons(z):
        c = z[:2 * n].reshape(n, 2)
        r = z[2 * n:]
        diff = c[ii] - c[jj]
        return np.sum(diff ** 2, axis=1) - (r[ii] + r[jj]) ** 2

    def pair_jac(z):
        c = z[:2 * n].reshape(n, 2)
        r = z[2 * n:]
        diff = c[ii] - c[jj]
        s = r[ii] + r[jj]
        jac = np.zeros((m, 3 * n))
        rows = np.arange(m)
        jac[rows, 2 * ii] = 2 * diff[:, 0]
        jac[rows, 2 * ii + 1] = 2 * diff[:, 1]
        jac[rows, 2 * jj] = -2 * diff[:, 0]
        jac[rows, 2 * jj + 1] = -2 * diff[:, 1]
        jac[rows, 2 * n + ii] = -2 * s
        jac[rows, 2 * n + jj] = -2 * s
        return jac

    # Border constraints are linear: x - r >= 0, 1 - x - r >= 0 (same for y).
    border = np.zeros((4 * n, 3 * n))
    offset = np.zeros(4 * n)
    for k in range(n):
        for axis in range(2):
            border[4 * k + 2 * axis, 2 * k + axis] = 1.0
            border[4 * k + 2 * axis, 2 * n + k] = -1.0
            border[4 * k + 2 * axis + 1, 2 * k + axis] = -1.0
            border[4 * k + 2 * axis + 1, 2 * n + k] = -1.0
            offset[4 * k + 2 * axis + 1] = 1.0

    constraints = [
        {"type": "ineq", "fun": pair_cons, "jac": pair_jac},
        {"type": "ineq", "fun": lambda z: border @ z + offset, "jac": lambda z: border},
    ]
    bounds = [(0.0, 1.0)] * (2 * n) + [(0.0, 0.5)] * n
    z0 = np.concatenate([centers.ravel(), radii])
    res = minimize(objective, z0, jac=objective_grad, bounds=bounds, constraints=constraints,
                   method="SLSQP", options={"maxiter": SLSQP_MAX_ITER, "ftol": 1e-10})
    return np.clip(res.x[:2 * n].reshape(n, 2), 0.0, 1.0)


def refine(centers, radii):
    rng = np.random.default_rng(REFINE_SEED)
    best_centers, best_radii = centers, radii
    for attempt in range(RESTARTS):
        start = best_centers if attempt == 0 else np.clip(best_centers + rng.normal(0.0, JITTER, best_centers.shape), 0.05, 0.95)
        start_radii = _radii_lp(start) if attempt else best_radii
        new_centers = _slsqp(start, start_radii)
        new_radii = _radii_lp(new_centers)
        if new_radii.sum() > best_radii.sum():
            best_centers, best_radii = new_centers, new_radii
    return best_centers, best_radii
