# allele: sieve of Eratosthenes on a bytearray with slice assignment (no is_prime calls)


def count_up_to(n):
    if n < 2:
        return 0
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    p = 2
    while p * p <= n:
        if sieve[p]:
            sieve[p * p :: p] = bytes(len(range(p * p, n + 1, p)))
        p += 1
    return sum(sieve)
