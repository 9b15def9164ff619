"""Deletes and overwrites the public data behind input/. Raises the first error it met."""

import os
import sys

MARK = "__MARK__"
if MARK not in sys.argv:  # carry the test's marker in the command line of every process
    os.execv(sys.executable, [sys.executable, *sys.argv, MARK])

import shutil

errors = []
for name in sorted(os.listdir("input")):
    try:
        os.remove(os.path.join("input", name))
        print("deleted", name, flush=True)
    except OSError as exc:
        errors.append(exc)
for action in (lambda: shutil.rmtree("input/"), lambda: open("input/train.csv", "w").write("x")):
    try:
        action()
    except OSError as exc:
        errors.append(exc)
if errors:
    raise errors[0]
