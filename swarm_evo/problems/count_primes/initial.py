"""Count the primes p <= n, as fast as possible (the code-optimisation problem).

The evaluator calls ``count_primes(n)`` several times with integers n >= 0 it draws at random
(you cannot know them in advance) and compares every result with a slow reference
implementation. Any wrong count scores 0; otherwise the score is the speed-up over the
reference (reference wall time / this program's wall time, measured by the sandbox).

The pipeline is: a primality test (PRIMALITY) used by a counting loop (COUNTING). Each
section defines one function with a fixed signature.
"""


def count_primes(n):
    """Entry point: the number of primes p with p <= n (0 for n < 2)."""
    return int(count_up_to(int(n)))


# [SECTION: PRIMALITY]
# is_prime(k) -> bool for an integer k.
DIVISOR_LIMIT_EXPONENT = 1.0


def is_prime(k):
    if k < 2:
        return False
    # Trial division by every d in [2, k ** DIVISOR_LIMIT_EXPONENT] (never k itself).
    limit = min(k - 1, int(k**DIVISOR_LIMIT_EXPONENT + 1e-9))
    for d in range(2, limit + 1):
        if k % d == 0:
            return False
    return True


# [SECTION: COUNTING]
# count_up_to(n) -> number of primes <= n.


def count_up_to(n):
    count = 0
    for k in range(2, n + 1):
        if is_prime(k):
            count += 1
    return count
