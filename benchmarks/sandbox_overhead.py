"""Per-execution overhead of the Docker sandbox over the local one (issue 3).

Runs the same programs through both backends, sequentially, and prints the median wall time of
each (``--runs`` executions per program and backend, default 10; the first execution of each
backend is a warm-up and not counted), the difference in seconds and the ratio::

    python benchmarks/sandbox_overhead.py [--runs 10] [--image swarm-evo-sandbox:latest]
        [--backends local,local-exec,local-plain,docker] [--programs empty,sklearn] [--network]

Backends: ``local`` (the default confinement: namespaces as root, a user namespace otherwise;
each execution forked from the pre-imported program server, ``sandbox.preload``),
``local-exec`` (the same confinement, ``preload: []``: a new interpreter per execution),
``local-plain`` (``isolate=False``: no namespaces, the caller's user: what confinement costs is
``local - local-plain``) and ``docker``. ``--network`` runs them with ``sandbox.network: true``
(no network namespace). Issue 32 measured the confinement's start-up cost with
``--backends local,local-plain --programs empty --runs 20`` before and after the allow-list root.

Programs: ``empty`` (``pass``: pure start-up cost) and ``sklearn`` (imports numpy, pandas and
scikit-learn and fits a small model: what a generated program pays before its real work).
Wall time is measured around ``Sandbox.execute``, so Docker's create/start/wait/logs/remove
and the local backend's process start are both included. Needs a Docker engine and the image.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from swarm_evo.sandbox import DEFAULT_IMAGE, DockerSandbox, LocalSandbox

PROGRAMS = {
    "empty": "pass\n",
    "sklearn": (
        "import numpy as np, pandas as pd\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "X = np.random.default_rng(0).normal(size=(500, 5))\n"
        "y = (X[:, 0] > 0).astype(int)\n"
        "print('Validation metric:', LogisticRegression().fit(X, y).score(X, y))\n"
    ),
}


def median_seconds(sandbox, code: str, runs: int, root: Path, public: Path) -> float:
    """Median wall time (s) of ``runs`` executions of ``code`` after one warm-up execution."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        result = sandbox.execute(code, root / f"run{i}", public, timeout=120)
        elapsed = time.perf_counter() - start
        if not result.ok:
            raise SystemExit(f"benchmark program failed: {result.exc_type}: {result.exc_info}")
        if i:
            times.append(elapsed)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed executions per program and backend")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--backends", default="local,docker", help="comma-separated: local, local-exec, local-plain, docker")
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated: " + ", ".join(PROGRAMS))
    parser.add_argument("--network", action="store_true", help="sandbox.network: true (host network)")
    args = parser.parse_args()
    net = {"network": True} if args.network else {}
    makers = {
        "local": lambda: LocalSandbox(num_threads=1, **net),
        "local-exec": lambda: LocalSandbox(num_threads=1, preload=(), **net),
        "local-plain": lambda: LocalSandbox(num_threads=1, isolate=False, preload=(), **net),
        "docker": lambda: DockerSandbox(image=args.image, num_threads=1, cpus=1, memory_limit_mb=2048, **net),
    }
    backends = {name: makers[name]() for name in args.backends.split(",")}
    print(f"median wall time per execution, {args.runs} runs each (after 1 warm-up)")
    print(f"{'program':<10}" + "".join(f"{b + ' s':>14}" for b in backends)
          + (f"{'docker-local s':>16}{'ratio':>8}" if {"local", "docker"} <= set(backends) else ""))
    # world-readable, as a user's data directory is (programs run as another user when root)
    with tempfile.TemporaryDirectory(prefix="swarm-evo-bench-") as tmp:
        os.chmod(tmp, 0o755)
        public = Path(tmp) / "public"
        public.mkdir()
        for name in args.programs.split(","):
            code = PROGRAMS[name]
            medians = {
                backend: median_seconds(sandbox, code, args.runs, Path(tmp) / backend / name, public)
                for backend, sandbox in backends.items()
            }
            line = f"{name:<10}" + "".join(f"{m:>14.3f}" for m in medians.values())
            if {"local", "docker"} <= set(medians):
                local, docker = medians["local"], medians["docker"]
                line += f"{docker - local:>16.3f}{docker / local:>8.2f}"
            print(line)


if __name__ == "__main__":
    main()
