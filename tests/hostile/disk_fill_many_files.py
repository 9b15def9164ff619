"""Writes 10 GB into working/ as 1 MiB chunks spread over 8 MiB files (no single file is
large: only the watcher of the node directory can stop it)."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

os.makedirs("working/fill", exist_ok=True)
chunk = b"\1" * (1 << 20)
for i in range(10 * 1024):
    with open(f"working/fill/part-{i // 8:05d}.bin", "ab") as fh:
        fh.write(chunk)
print("wrote 10 GB")
