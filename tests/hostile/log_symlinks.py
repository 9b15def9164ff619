"""Plants symlinks where the sandbox writes the logs (stdout.txt, stderr.txt -> a host file
the run process may write as root) and a directory named like a log, then fails."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

for name in ("stdout.txt", "stderr.txt"):
    if os.path.lexists(name):
        os.remove(name)
os.symlink("__CANARY__", "stdout.txt")
os.mkdir("stderr.txt")
os.symlink("__CANARY__", "stderr.txt/inner")
print("planted", flush=True)
raise RuntimeError("planted symlinks on the log files")
