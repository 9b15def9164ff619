# allele: 6k +/- 1 wheel: test 2 and 3, then divisors 5, 7, 11, 13, ... up to isqrt(k)
import math


def is_prime(k):
    if k < 4:
        return k >= 2
    if k % 2 == 0 or k % 3 == 0:
        return False
    limit = math.isqrt(k)
    d = 5
    while d <= limit:
        if k % d == 0 or k % (d + 2) == 0:
            return False
        d += 6
    return True
