# allele: alternate 2-opt and Or-opt until neither improves the tour
MAX_ROUNDS = 20
MAX_SEGMENT = 3


def _two_opt(tour, dist):
    tour = np.array(tour, dtype=int)
    n = len(tour)
    improved = True
    while improved:
        improved = False
        for i in range(n - 2):
            a, b = tour[i], tour[i + 1]
            j = np.arange(i + 2, n if i > 0 else n - 1)
            c, d = tour[j], tour[(j + 1) % n]
            delta = dist[a, c] + dist[b, d] - dist[a, b] - dist[c, d]
            k = int(np.argmin(delta))
            if delta[k] < -1e-9:
                jk = j[k]
                tour[i + 1 : jk + 1] = tour[i + 1 : jk + 1][::-1]
                improved = True
    return [int(c) for c in tour]


def _or_opt(tour, dist):
    n = len(tour)
    improved = False
    for length in range(1, MAX_SEGMENT + 1):
        for start in range(n):
            seg = [tour[(start + t) % n] for t in range(length)]
            prev_c = tour[(start - 1) % n]
            next_c = tour[(start + length) % n]
            removed = dist[prev_c, seg[0]] + dist[seg[-1], next_c] - dist[prev_c, next_c]
            rest = [c for c in tour if c not in seg]
            r = np.array(rest)
            r_next = np.roll(r, -1)
            gain_fwd = dist[r, seg[0]] + dist[seg[-1], r_next] - dist[r, r_next]
            gain_rev = dist[r, seg[-1]] + dist[seg[0], r_next] - dist[r, r_next]
            k_f, k_r = int(np.argmin(gain_fwd)), int(np.argmin(gain_rev))
            if gain_fwd[k_f] <= gain_rev[k_r]:
                best, k, piece = gain_fwd[k_f], k_f, seg
            else:
                best, k, piece = gain_rev[k_r], k_r, seg[::-1]
            if best < removed - 1e-9:
                tour = rest[: k + 1] + piece + rest[k + 1 :]
                improved = True
    return tour, improved


def improve_tour(tour, dist):
    tour = [int(c) for c in tour]
    if len(tour) < 5:
        return tour
    for _ in range(MAX_ROUNDS):
        tour = _two_opt(tour, dist)
        tour, improved = _or_opt(tour, dist)
        if not improved:
            break
    return tour
