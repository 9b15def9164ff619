"""Looks for API keys: its environment, /proc/self/environ, every readable
/proc/*/environ; keeps what it found in working/, then insists on OPENAI_API_KEY."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

dump = [f"{k}={v}" for k, v in os.environ.items()]
with open("/proc/self/environ", "rb") as fh:
    dump.append(fh.read().replace(b"\0", b"\n").decode(errors="replace"))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                dump.append(f"{pid}: " + fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
print("\n".join(dump), flush=True)
with open("working/env-dump.txt", "w") as fh:
    fh.write("\n".join(dump))
print(os.environ["OPENAI_API_KEY"])
