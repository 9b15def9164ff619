"""Eval Service candidate (sum-squares, entry ``f``): leaves a FIFO where the harness writes
``outputs.json`` and exits before the harness can replace it. A host that opens it blocks."""

import os


def f(x):
    os.mkfifo("outputs.json")
    os._exit(0)
