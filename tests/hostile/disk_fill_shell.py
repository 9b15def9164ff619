"""A child process that is not Python (dd) writes 10 GB: at the file-size limit SIGXFSZ kills
it (subprocess restores the signal Python ignores); ``check=True`` raises CalledProcessError."""

import os
import subprocess
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

subprocess.run(["dd", "if=/dev/zero", "of=working/dd.bin", "bs=1M", "count=10240"], check=True)
print("dd wrote 10 GB")
