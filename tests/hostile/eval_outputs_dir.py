"""Eval Service candidate (sum-squares, entry ``f``): a directory named ``outputs.json``."""

import os


def f(x):
    os.mkdir("outputs.json")
    os._exit(0)
