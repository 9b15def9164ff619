# allele: (wrong) bytearray sieve that forgets to strike out 1, so every count is one too high


def count_up_to(n):
    if n < 1:
        return 0
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = 0
    p = 2
    while p * p <= n:
        if sieve[p]:
            sieve[p * p :: p] = bytes(len(range(p * p, n + 1, p)))
        p += 1
    return sum(sieve)
