# allele: greedy edge matching: add the shortest edges that keep degrees <= 2 and no subtour


def construct_tour(dist):
    n = dist.shape[0]
    if n < 3:
        return list(range(n))
    ii, jj = np.triu_indices(n, 1)
    order = np.argsort(dist[ii, jj], kind="stable")
    degree = np.zeros(n, dtype=int)
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    adjacency = [[] for _ in range(n)]
    edges = 0
    for k in order:
        a, b = int(ii[k]), int(jj[k])
        if degree[a] >= 2 or degree[b] >= 2:
            continue
        ra, rb = find(a), find(b)
        if ra == rb and edges < n - 1:
            continue
        parent[ra] = rb
        adjacency[a].append(b)
        adjacency[b].append(a)
        degree[a] += 1
        degree[b] += 1
        edges += 1
        if edges == n:
            break
    # Walk the cycle (the last edge closes the Hamiltonian path).
    tour = [0]
    previous = -1
    while len(tour) < n:
        here = tour[-1]
        nxt = next(c for c in adjacency[here] if c != previous)
        previous = here
        tour.append(nxt)
    return tour
