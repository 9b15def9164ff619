# allele: (worse) visit the cities in input order 0, 1, ..., n-1


def construct_tour(dist):
    return list(range(dist.shape[0]))
