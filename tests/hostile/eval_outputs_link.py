"""Eval Service candidate (sum-squares, entry ``f``): ``outputs.json`` as a symlink that stays
inside the directory (escaping links are removed before the host reads anything)."""

import os


def f(x):
    os.symlink("calls.json", "outputs.json")
    os._exit(0)
