"""Unbounded output: 1 MiB lines to stdout as fast as the pipe takes them (gigabytes)."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

line = "x" * (1 << 20) + "\n"
print("flood starts", flush=True)
while True:
    sys.stdout.write(line)
