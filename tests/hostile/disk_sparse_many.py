"""Fifty sparse files of 40 MiB each (issue 40, item 7): each is under the file-size limit and
takes no blocks, but 2 GB of files leave the directory at their apparent size (the hand-in, the
run store's mirror and a resume's fetch read, upload and download that much). Unstopped it
runs 5 s and leaves 2,000 MiB."""

import os
import sys
import time

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

for i in range(50):
    with open(f"working/sparse-{i}.bin", "wb") as fh:
        fh.truncate(40 * 1024 * 1024)
    time.sleep(0.1)  # 400 MiB/s: the watcher measures between files
print("wrote 50 sparse files of 40 MiB")
