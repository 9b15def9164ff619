# allele: (broken) nearest neighbour that re-appends the start city at the end (a duplicate)
START_CITY = 0


def construct_tour(dist):
    n = dist.shape[0]
    current = START_CITY % n
    tour = [current]
    unvisited = set(range(n)) - {current}
    while unvisited:
        current = min(unvisited, key=lambda city: dist[current, city])
        tour.append(current)
        unvisited.remove(current)
    # Close the loop explicitly -- but the evaluator already closes it, so this repeats a city.
    tour[-1] = tour[0]
    return tour
