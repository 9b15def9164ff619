# allele: Or-opt: move segments of 1-3 cities (optionally reversed) to their best position
MAX_SEGMENT = 3
MAX_PASSES = 30


def improve_tour(tour, dist):
    tour = [int(c) for c in tour]
    n = len(tour)
    if n < 5:
        return tour
    for _ in range(MAX_PASSES):
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
                best, k, rev = (gain_fwd[k_f], k_f, False) if gain_fwd[k_f] <= gain_rev[k_r] else (gain_rev[k_r], k_r, True)
                if best < removed - 1e-9:
                    piece = seg[::-1] if rev else seg
                    tour = rest[: k + 1] + piece + rest[k + 1 :]
                    improved = True
        if not improved:
            break
    return tour
