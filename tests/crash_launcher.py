"""Run the ``swarm-evo`` command line and SIGKILL this very process at a chosen moment.

Used by tests/test_resume.py to crash a real run where crashes hurt most::

    python tests/crash_launcher.py KIND N -- run --competition-id ... | resume RUN_DIR

KIND is where the N-th event of that kind kills the process (``os.kill(getpid(), SIGKILL)``:
no ``finally``, no atexit, exactly like the OOM killer or a lost machine):

* ``model``   — inside the N-th model call, after the provider answered (the reply is paid
  for and lost);
* ``exec``    — during the N-th program execution, 0.5 s after the program started;
* ``journal`` — during the N-th journal write: the temporary file is half written and
  ``os.replace`` never happens;
* ``none``    — never (the run ends normally, or the test kills it from outside).

Only this test helper patches anything; the run itself is the production code path.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> int:
    kind, nth, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: crash_launcher.py KIND N -- swarm-evo arguments"
    nth = int(nth)
    lock, seen = threading.Lock(), [0]

    def due() -> bool:
        with lock:
            seen[0] += 1
            return seen[0] == nth

    if kind == "model":
        from swarm_evo.llm import import_litellm

        litellm = import_litellm()  # the module the client calls (swarm_evo/llm/client.py)
        real_completion = litellm.completion

        def completion(*args, **kwargs):
            reply = real_completion(*args, **kwargs)
            if due():
                _die()
            return reply

        litellm.completion = completion
    elif kind == "exec":
        from swarm_evo.sandbox.local import LocalSandbox

        real_execute = LocalSandbox.execute

        def execute(self, *args, **kwargs):
            if due():
                threading.Timer(0.5, _die).start()
            return real_execute(self, *args, **kwargs)

        LocalSandbox.execute = execute
    elif kind == "journal":
        import json

        from swarm_evo.population.journal import Journal

        real_save = Journal.save

        def save(self):
            if due():
                text = json.dumps(self.to_dict(), indent=1)
                tmp = self.path.parent / f".{self.path.name}.crash.tmp"
                with open(tmp, "w", encoding="utf-8") as fh:
                    fh.write(text[: len(text) // 2])
                    fh.flush()
                    os.fsync(fh.fileno())
                _die()
            return real_save(self)

        Journal.save = save
    elif kind != "none":
        raise SystemExit(f"unknown KIND {kind!r}: model, exec, journal or none")

    from swarm_evo.cli.commands import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
