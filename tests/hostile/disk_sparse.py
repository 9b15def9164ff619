"""A 10 GB sparse file: seeks past 10 GB and writes one byte (no disk used, but a file that
size is a file-size limit breach)."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

with open("working/sparse.bin", "wb") as fh:
    fh.seek(10 * 1024**3)
    fh.write(b"x")
print("wrote a 10 GB sparse file")
