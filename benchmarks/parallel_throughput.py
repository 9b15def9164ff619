"""Node throughput with parallel_workers 2 versus 1 on the same seed (issue 6).

Runs the same search (competition, seed, budget, offline model) with each worker count, each
run in its own process against its own temporary Prefect API (``prefect_test_harness``; see
``benchmarks/_search_run.py``), repetitions interleaved (1, 2, 1, 2, ...) so that a change of
the machine's load hits both alike::

    python benchmarks/parallel_throughput.py [--competition-id sklearn-breast-cancer]
        [--data-dir D] [--max-steps 12] [--seed 0] [--repeats 3] [--workers 1,2]
        [--heartbeats on|off]

Throughput = nodes per minute of the search window (first start to last end of the run's
phase flows, read from the API; set-up, grading and the report are not counted). Printed per
run and per worker count, then the ratio to the first worker count: the ratio of the mean
throughputs and the median of the per-repetition ratios. The local sandbox gives each program
``cores // parallel_workers`` BLAS/OpenMP threads, so on 2 cores two workers run two
single-threaded programs where one worker runs one two-threaded program. With two workers the
journal differs from the one-worker run after the first steps (the selection sees a different
journal), so the programs, and their execution times, are not the same.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _search_run import add_search_arguments, ensure_data, load_text, spawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_search_arguments(parser, max_steps_help="budget (> 10 reaches Phase 2)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts; the first is the baseline")
    parser.add_argument("--heartbeats", choices=("on", "off"), default="on",
                        help="Prefect flow-run heartbeats (on: Prefect's default, as in production)")
    parser.add_argument("--keep", type=Path, default=None, help="keep runs and logs in this directory")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",") if w]

    with tempfile.TemporaryDirectory(prefix="swarm-evo-throughput-") as tmp:
        scratch = (args.keep or Path(tmp)).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        data_dir = ensure_data(args.competition_id, args.data_dir, args.raw_dir, scratch).resolve()
        print(f"node throughput: {args.competition_id}, seed {args.seed}, {args.max_steps} steps, offline model, "
              f"heartbeats {args.heartbeats}, {args.repeats} repetition(s) per worker count")
        print(f"machine: {os.cpu_count()} cores; load average (1/5/15 min) before: {load_text()}")
        print(f"{'workers':>7}{'run':>5}{'nodes':>7}{'valid':>7}{'search s':>10}{'nodes/min':>11}"
              f"{'exec/node':>11}{'wall/node':>11}{'load after':>12}")
        per_count: dict[int, list[float | None]] = {w: [] for w in counts}
        for rep in range(args.repeats):
            for workers in counts:
                result = spawn(
                    f"w{workers}-r{rep}", scratch, mode="prefect", heartbeats=args.heartbeats,
                    competition_id=args.competition_id, data_dir=data_dir, max_steps=args.max_steps,
                    seed=args.seed, parallel_workers=workers,
                )
                if "error" in result:
                    print(f"{workers:>7}{rep + 1:>5}  failed ({result['error']}); log {result['log']}:")
                    print("\n".join(f"    {line}" for line in result["log_tail"]))
                    per_count[workers].append(None)
                    continue
                rate = 60 * result["nodes"] / result["search_seconds"]
                per_count[workers].append(rate)
                print(f"{workers:>7}{rep + 1:>5}{result['nodes']:>7}{result['valid']:>7}"
                      f"{result['search_seconds']:>10.1f}{rate:>11.2f}{statistics.fmean(result['exec']):>11.2f}"
                      f"{statistics.fmean(result['wall']):>11.2f}{result['loadavg_after'][0]:>12.2f}")
        print(f"load average after: {load_text()}")
        print()
        base = counts[0]
        means = {w: statistics.fmean([r for r in rates if r is not None]) for w, rates in per_count.items()
                 if any(r is not None for r in rates)}
        for workers, mean in means.items():
            line = f"parallel_workers {workers}: {mean:.2f} nodes/min (mean of {sum(r is not None for r in per_count[workers])})"
            if workers != base and base in means:
                paired = [b / a for a, b in zip(per_count[base], per_count[workers]) if a and b]
                line += f"; ratio to {base} worker(s): {mean / means[base]:.2f}x"
                if paired:
                    line += f" (median of per-repetition ratios {statistics.median(paired):.2f}x)"
            print(line)
        print(f"({os.cpu_count()} cores: CPU-bound work can gain at most {min(max(counts), os.cpu_count() or 1)}x; "
              "waiting (heartbeat-thread joins, process start, LLM latency) overlaps as well, and the runs with "
              "different worker counts execute different programs)")


if __name__ == "__main__":
    main()
