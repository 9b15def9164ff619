"""Memory hog: keeps 64 MiB blocks (touched) until allocation fails or it is killed."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

hog = []
while True:
    hog.append(b"x" * (64 << 20))
