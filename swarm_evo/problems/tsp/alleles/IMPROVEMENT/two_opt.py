# allele: 2-opt local search (first improvement, vectorised over the second edge)
MAX_PASSES = 50


def improve_tour(tour, dist):
    tour = np.array(tour, dtype=int)
    n = len(tour)
    if n < 4:
        return [int(c) for c in tour]
    for _ in range(MAX_PASSES):
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
        if not improved:
            break
    return [int(c) for c in tour]
