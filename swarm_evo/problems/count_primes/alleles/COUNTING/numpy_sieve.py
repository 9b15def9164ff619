# allele: odd-only sieve of Eratosthenes with numpy boolean arrays
import numpy as np


def count_up_to(n):
    if n < 2:
        return 0
    # odd[i] stands for the number 2 * i + 1.
    odd = np.ones((n + 1) // 2, dtype=bool)
    odd[0] = False  # 1 is not prime
    i = 1
    while (2 * i + 1) ** 2 <= n:
        if odd[i]:
            p = 2 * i + 1
            odd[p * p // 2 :: p] = False
        i += 1
    return int(odd.sum()) + 1  # + the prime 2
