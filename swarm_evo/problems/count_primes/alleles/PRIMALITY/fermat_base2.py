# allele: (wrong) Fermat test to base 2: fast, but calls pseudoprimes such as 341 = 11 * 31 prime
FERMAT_BASE = 2


def is_prime(k):
    if k < 2:
        return False
    if k in (2, 3):
        return True
    return pow(FERMAT_BASE, k - 1, k) == 1
