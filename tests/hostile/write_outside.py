"""Writes outside its directory: the parent, the journal, a sibling node, a canary, the
public data, /etc and /tmp. Raises the first error it met."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

targets = [
    "../escape.txt",
    "../../journal.json",
    "../__SIBLING__/solution.py",
    "__CANARY__",
    "__PUBLIC__/escape.txt",
    "/etc/escape-" + MARK,
    "/tmp/escape-" + MARK,
    os.path.expanduser("~/../escape-" + MARK),
]
errors = []
for target in targets:
    try:
        with open(target, "a") as fh:
            fh.write("escaped\n")
        print("wrote", target, flush=True)
    except OSError as exc:
        errors.append(exc)
        print("blocked", target, type(exc).__name__, exc, flush=True)
if errors:
    raise errors[0]
