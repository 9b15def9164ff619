# allele: deterministic Miller-Rabin (bases 2, 3, 5, 7, 11, 13, 17: exact below 3.4e14)
SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17)


def is_prime(k):
    if k < 2:
        return False
    for p in SMALL_PRIMES:
        if k % p == 0:
            return k == p
    d, s = k - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in SMALL_PRIMES:
        x = pow(a, d, k)
        if x == 1 or x == k - 1:
            continue
        for _ in range(s - 1):
            x = x * x % k
            if x == k - 1:
                break
        else:
            return False
    return True
