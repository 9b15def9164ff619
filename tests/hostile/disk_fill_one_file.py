"""Writes one 10 GB file into working/ in 1 MiB chunks."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

chunk = b"\1" * (1 << 20)
with open("working/big.bin", "wb") as fh:
    for _ in range(10 * 1024):
        fh.write(chunk)
print("wrote 10 GB")
