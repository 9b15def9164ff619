"""What the suite's processes cost before they do any work (issue 16 item 4): the CPU of starting
each kind of process the tests start, and the floor that puts under the suite's time::

    python benchmarks/startup_cpu.py [--repeat 3] [--cores 2] [--target 480]
                                     [--tabular-programs 281] [--problem-programs 146]
                                     [--swarm-evo 38] [--api-servers 25]

Each kind is started ``--repeat`` times, one at a time; its CPU is the user + system time of the
process and every process it waited for (``getrusage(RUSAGE_CHILDREN)``), the median is shown:

* a tabular program's start: ``import pandas, sklearn.ensemble, sklearn.model_selection`` (what
  every competition program of the offline model imports first), in the project's interpreter
  (the suite's searches) and in the program environment (``swarm-evo env build``), if built;
* a problem program's start: ``import numpy`` (circle packing, TSP);
* a ``swarm-evo`` process's start: the modules ``swarm-evo run`` imports before it reads its
  input (litellm, Prefect, pandas, scikit-learn and the project);
* the same plus Prefect's ephemeral API (``flows._ephemeral.start_ephemeral_api``: the server
  process, its database), started and stopped as a run without ``PREFECT_API_URL`` does.

The counts default to the suite as ``benchmarks/suite_cpu.py`` sampled it (sixth session,
commit 3bc1f1d): 221 + 60 tabular programs, 146 problem programs, 38 ``swarm-evo`` processes and
27 Prefect API servers, two of them the session APIs of the pytest workers (the other 25, the
ephemeral APIs of ``swarm-evo`` processes and the servers a few tests start, are priced as an
ephemeral API). The floor is the CPU the suite spends on starts alone; the budget is what a
wall-time ``--target`` leaves on ``--cores`` at the 91 % busy the suite reaches, and the
difference is what the suite's real work (training, Prefect's API, the flows) may use.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABULAR = "import pandas, sklearn.ensemble, sklearn.model_selection"
SWARM_EVO = "import swarm_evo.cli, flows.two_phase_evo"
EPHEMERAL = SWARM_EVO + "; from flows._ephemeral import start_ephemeral_api; start_ephemeral_api()"
BUSY = 0.91
"""Share of the machine's CPU the suite keeps busy (``suite_cpu.py``, sixth session)."""


def child_cpu(argv: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one run of ``argv`` and everything it waited for.

    Raises ``RuntimeError`` naming the command when it exits non-zero."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--target", type=float, default=480.0, help="wall-time target of the suite, s (8 minutes)")
    parser.add_argument("--tabular-programs", type=int, default=281)
    parser.add_argument("--problem-programs", type=int, default=146)
    parser.add_argument("--swarm-evo", type=int, default=38, help="swarm-evo processes, all kinds")
    parser.add_argument("--api-servers", type=int, default=25, help="Prefect API servers besides the session APIs")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    program_python = ROOT / ".venv-programs" / "bin" / "python"
    kinds: list[tuple[str, list[str]]] = [
        ("tabular program, project interpreter", [sys.executable, "-c", TABULAR]),
        ("problem program (numpy)", [sys.executable, "-c", "import numpy"]),
        ("swarm-evo process", [sys.executable, "-c", SWARM_EVO]),
        ("swarm-evo process + ephemeral API", [sys.executable, "-c", EPHEMERAL]),
    ]
    if program_python.exists():
        kinds.insert(1, ("tabular program, program environment", [str(program_python), "-c", TABULAR]))

    median: dict[str, float] = {}
    print(f"{'CPU s':>7}  {'runs':<24} kind (median of {args.repeat})")
    with tempfile.TemporaryDirectory() as home:
        env["PREFECT_HOME"] = home  # the ephemeral API's database: a fresh copy, as in a new run
        for label, argv in kinds:
            runs = [child_cpu(argv, env) for _ in range(args.repeat)]
            median[label] = statistics.median(runs)
            print(f"{median[label]:7.2f}  {' '.join(f'{r:.2f}' for r in runs):<24} {label}")

    tabular = median["tabular program, project interpreter"]
    start = median["swarm-evo process"]
    api = median["swarm-evo process + ephemeral API"] - start
    parts = [
        (f"{args.tabular_programs} tabular programs x {tabular:.2f}", args.tabular_programs * tabular),
        (f"{args.problem_programs} problem programs x {median['problem program (numpy)']:.2f}",
         args.problem_programs * median["problem program (numpy)"]),
        (f"{args.swarm_evo} swarm-evo processes x {start:.2f}", args.swarm_evo * start),
        (f"{args.api_servers} Prefect API servers x {api:.2f}", args.api_servers * api),
    ]
    floor = sum(cpu for _, cpu in parts)
    budget = args.target * args.cores * BUSY
    print("\nthe suite's starts:")
    for text, cpu in parts:
        print(f"{cpu:7.0f} s  {text}")
    print(f"{floor:7.0f} s  in all: {floor / (args.cores * BUSY):.0f} s of wall time on {args.cores} cores "
          f"at {BUSY:.0%} busy")
    print(f"{budget:7.0f} s  CPU budget of a {args.target:.0f} s suite on {args.cores} cores; "
          f"{budget - floor:.0f} s of it left for the work itself")
    return 0


if __name__ == "__main__":
    sys.exit(main())
