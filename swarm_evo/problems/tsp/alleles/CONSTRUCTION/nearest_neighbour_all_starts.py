# allele: nearest neighbour from every start city, keep the shortest tour
MAX_STARTS = 52


def _nearest_neighbour(dist, start):
    n = dist.shape[0]
    visited = np.zeros(n, dtype=bool)
    tour = [start]
    visited[start] = True
    for _ in range(n - 1):
        row = np.where(visited, np.inf, dist[tour[-1]])
        nxt = int(np.argmin(row))
        tour.append(nxt)
        visited[nxt] = True
    return tour


def construct_tour(dist):
    n = dist.shape[0]
    tours = [_nearest_neighbour(dist, start) for start in range(min(MAX_STARTS, n))]
    return min(tours, key=lambda t: tour_length(t, dist))
