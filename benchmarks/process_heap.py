"""CPU of one ``swarm-evo run`` process with and without the frozen heap (swarm_evo/run/heap.py),
for one or more interpreters (venvs with the project installed).

    python benchmarks/process_heap.py [--python VENV/bin/python ...] [--steps 4] [--repeats 2]

Each measurement is a fresh process running a ``--max-steps`` offline run of sklearn-wine
(prepared once under a temporary folder) with its own ephemeral Prefect API; the CPU is the
process's and everything it waited for (the API server, the program server and the programs),
from ``resource.getrusage(RUSAGE_CHILDREN)``. "as is" runs the same command with
``heap.loading`` replaced by a block that leaves the run process's collector alone (its API
server and its program server, processes of their own, still freeze theirs); "frozen" is the
command as shipped. Prints one line per interpreter and mode: the median
and the spread over the repeats, in seconds of CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from startup_cpu import child_cpu  # benchmarks/ (the script's folder) is on sys.path

ROOT = Path(__file__).resolve().parents[1]

AS_IS = """
import contextlib, sys
from swarm_evo.run import heap
heap.loading = contextlib.nullcontext
heap.settle = lambda: None
"""

RUN = """
import sys
from swarm_evo.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", help="an interpreter with the project installed "
                        "(default: this one); repeat for several")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    with tempfile.TemporaryDirectory(prefix="process-heap-") as tmp:
        data = Path(tmp) / "data"
        subprocess.run([pythons[0], "-m", "swarm_evo.cli", "prepare", "sklearn-wine", "--data-dir", str(data)],
                       cwd=ROOT, check=True, capture_output=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PREFECT_HOME=str(Path(tmp) / "prefect-home"))
        print(f"{args.steps}-step offline run of sklearn-wine, CPU s of the process and its children "
              f"(median, min-max of {args.repeats})")
        for python in pythons:
            for mode, prelude in (("as is", AS_IS), ("frozen", "")):
                seconds = []
                for n in range(args.repeats):
                    run_dir = Path(tmp) / f"run-{len(seconds)}-{mode.replace(' ', '')}-{n}-{abs(hash(python))}"
                    seconds.append(child_cpu([python, "-c", prelude + RUN, "run", "--competition-id", "sklearn-wine",
                                         "--data-dir", str(data), "--max-steps", str(args.steps), "--parallel-workers",
                                         "2", "--run-dir", str(run_dir), "--python", python], env))
                print(f"{python:50s} {mode:7s} {statistics.median(seconds):6.2f}  "
                      f"({min(seconds):.2f}-{max(seconds):.2f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
