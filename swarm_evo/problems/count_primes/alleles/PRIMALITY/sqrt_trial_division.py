# allele: trial division only up to isqrt(k) (a composite has a divisor <= its square root)
import math


def is_prime(k):
    if k < 2:
        return False
    for d in range(2, math.isqrt(k) + 1):
        if k % d == 0:
            return False
    return True
