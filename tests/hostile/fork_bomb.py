"""Fork bomb that survives EAGAIN: every process keeps forking until the timeout."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

import time

while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
