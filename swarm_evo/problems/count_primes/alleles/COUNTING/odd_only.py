# allele: count 2 separately, then test only odd k (halves the is_prime calls)


def count_up_to(n):
    if n < 2:
        return 0
    count = 1
    for k in range(3, n + 1, 2):
        if is_prime(k):
            count += 1
    return count
