"""Reference implementation of count-primes (trusted; run in the sandbox by evaluate.py).

Deliberately slow: trial division of every k in [2, n] by every d in [2, k - 1], stopping at
the first divisor — the same algorithm as the initial program, so that the initial program's
speed-up is about 1. Its outputs are the expected values and its sandbox wall time is the
numerator of the speed-up.
"""


def count_primes(n):
    """Number of primes p <= n (0 for n < 2)."""
    n = int(n)
    count = 0
    for k in range(2, n + 1):
        for d in range(2, k):
            if k % d == 0:
                break
        else:
            count += 1
    return count
