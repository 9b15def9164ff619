"""Eval Service candidate (sum-squares, entry ``f``): a 300 MB ``outputs.json`` (sparse: no disk
used), over the host's 256 MB bound."""

import os


def f(x):
    with open("outputs.json", "wb") as fh:
        fh.truncate(300 * 1024 * 1024)
    os._exit(0)
