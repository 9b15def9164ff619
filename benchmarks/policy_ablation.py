"""Ablation of the search policies two_phase, greedy and random (SPEC §12; issue 6).

Runs one benchmark sweep with ``swarm-evo sweep`` — every competition × policy × seed is its
own ``two-phase-evo`` run on the same budget, sandbox and (offline) model — and prints, per
competition and policy, the mean ± SEM of the test score over the seeds and the counts of valid
submissions, medals and above-median scores::

    python benchmarks/policy_ablation.py [--data-dir D] [--seeds 3] [--max-steps 16]
        [--competitions spaceship-titanic,house-prices] [--policies two_phase,greedy,random]
        [--out OUT] [--parallel-runs R] [--parallel-workers W]
    python benchmarks/policy_ablation.py --table-only OUT     # print the table of a finished sweep

The sweep command is::

    swarm-evo sweep --data-dir D --competitions spaceship-titanic,house-prices --seeds 3
        --policies two_phase,greedy,random --max-steps N --model offline --out OUT

It writes ``OUT/grading_reports.jsonl`` (one MLE-bench grading report per run plus ``policy``,
``seed``, ``run_dir``) and ``OUT/summary.json`` (per competition and policy: runs,
valid_submissions, any_medal, above_median, score_mean, score_sem); this script reads both and
checks that the summary's counts and means agree with the individual reports. Without
``--data-dir`` the competitions are prepared from ``../shared/data/<id>/raw`` into
``OUT/data``. The sweep gets its own ``PREFECT_HOME`` (``OUT/prefect-home``, so its temporary
API does not share an SQLite file with other processes) unless ``PREFECT_API_URL`` is set.

Budget: with the default config Phase 1 is one epoch of 10 drafts (``steps_per_epoch`` 10,
K = 8), so with ``--max-steps`` ≤ 10 two_phase only drafts, exactly like random; the default
16 (as in the issue's sweep) leaves 6 Phase 2 steps (greedy: 5 drafts, 11 greedy steps).
Time: one offline 16-step run took 117–131 s on this 2-core machine at load 2–5 (3.4 min at
load 8–20; the programs' execution dominates and slows with the load), so the 18 runs
(2 competitions × 3 policies × 3 seeds) take about 35–45 min.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _search_run import ensure_data, load_text

POLICIES = "two_phase,greedy,random"
COMPETITIONS = "spaceship-titanic,house-prices"


def sweep_command() -> list[str]:
    """``swarm-evo`` of this interpreter's environment (or ``python -m swarm_evo.cli``)."""
    script = Path(sys.executable).with_name("swarm-evo")
    if script.exists():
        return [str(script)]
    found = shutil.which("swarm-evo")
    return [found] if found else [sys.executable, "-m", "swarm_evo.cli"]


def _fmt(mean, sem, digits: int = 4) -> str:
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" + ("" if sem is None else f" ± {sem:.{digits}f}")


def check_summary(summary: dict, rows: list[dict]) -> list[str]:
    """Disagreements between ``summary.json`` and the grading reports (empty: they agree)."""
    problems = []
    for competition, by_policy in summary.items():
        for policy, stats in by_policy.items():
            group = [r for r in rows if r.get("competition_id") == competition and r.get("policy") == policy]
            scores = [r["score"] for r in group if r.get("score") is not None]
            expected = {
                "runs": len(group),
                "valid_submissions": sum(bool(r.get("valid_submission")) for r in group),
                "any_medal": sum(bool(r.get("any_medal")) for r in group),
                "above_median": sum(bool(r.get("above_median")) for r in group),
            }
            for key, value in expected.items():
                if stats.get(key) != value:
                    problems.append(f"{competition}/{policy}: {key} {stats.get(key)} != {value} from the reports")
            mean = statistics.fmean(scores) if scores else None
            sem = statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else None
            for key, value in (("score_mean", mean), ("score_sem", sem)):
                got = stats.get(key)
                if (got is None) != (value is None) or (value is not None and not math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-12)):
                    problems.append(f"{competition}/{policy}: {key} {got} != {value} from the reports")
    return problems


def print_table(out: Path) -> int:
    """Print the ablation table of a finished sweep in ``out``; returns an exit code."""
    summary_path, reports_path = out / "summary.json", out / "grading_reports.jsonl"
    if not summary_path.exists() or not reports_path.exists():
        print(f"no sweep output in {out}: expected {summary_path.name} and {reports_path.name}")
        return 1
    summary = json.loads(summary_path.read_text())
    rows = [json.loads(line) for line in reports_path.read_text().splitlines() if line.strip()]
    cw = max([len("competition"), *(len(c) for c in summary)]) + 2
    header = (f"{'competition':<{cw}}{'policy':<11}{'runs':>5}{'valid':>6}{'medals':>7}{'>median':>8}"
              f"{'failed':>7}  {'test score mean ± SEM':<22}direction")
    print(header)
    print("-" * len(header))
    for competition, by_policy in summary.items():
        for policy, s in by_policy.items():
            lower = s.get("is_lower_better")
            if lower is None:
                lower = next((r.get("is_lower_better") for r in rows if r.get("competition_id") == competition), None)
            direction = {True: "lower is better", False: "higher is better"}.get(lower, "?")
            print(f"{competition:<{cw}}{policy:<11}{s['runs']:>5}{s['valid_submissions']:>6}{s['any_medal']:>7}"
                  f"{s['above_median']:>8}{s.get('failed_runs', 0):>7}  {_fmt(s['score_mean'], s['score_sem']):<22}{direction}")
    # The same scores as a policy × competition matrix, plus the per-seed scores.
    competitions = list(summary)
    policies = list(dict.fromkeys(p for by_policy in summary.values() for p in by_policy))
    print()
    mw = max([24, *(len(c) + 2 for c in competitions)])
    print(f"{'mean ± SEM':<11}" + "".join(f"{c:>{mw}}" for c in competitions))
    for policy in policies:
        cells = [_fmt(summary[c][policy]["score_mean"], summary[c][policy]["score_sem"]) if policy in summary[c] else "-"
                 for c in competitions]
        print(f"{policy:<11}" + "".join(f"{cell:>{mw}}" for cell in cells))
    print()
    print("per-seed scores:")
    order = {(c, p): i for i, (c, p) in enumerate((c, p) for c in competitions for p in policies)}
    for row in sorted(rows, key=lambda r: (order.get((r.get("competition_id"), r.get("policy")), len(order)), r.get("seed"))):
        score = row.get("score")
        print(f"  {row.get('competition_id'):<{cw}}{row.get('policy'):<11}seed {row.get('seed')}: "
              f"{'-' if score is None else f'{score:.5f}'}{'  ' + row['error'] if row.get('error') else ''}")
    problems = check_summary(summary, rows)
    print("summary.json agrees with grading_reports.jsonl: " + ("yes" if not problems else "NO"))
    for problem in problems:
        print(f"  {problem}")
    return 0 if not problems else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="prepared data (default: prepare into OUT/data)")
    parser.add_argument("--competitions", default=COMPETITIONS)
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per competition and policy")
    parser.add_argument("--max-steps", type=int, default=16,
                        help="budget of every run (nodes); > 10 so that two_phase reaches Phase 2")
    parser.add_argument("--model", default="offline")
    parser.add_argument("--out", type=Path, default=None, help="sweep output directory (default runs/ablation-<time>)")
    parser.add_argument("--parallel-runs", type=int, default=None, help="passed to swarm-evo sweep")
    parser.add_argument("--parallel-workers", type=int, default=None, help="passed to swarm-evo sweep")
    parser.add_argument("--table-only", type=Path, default=None, metavar="OUT", help="only print the table of OUT")
    args = parser.parse_args()
    if args.table_only:
        return print_table(args.table_only)

    if args.max_steps <= 10:
        print(f"note: with --max-steps {args.max_steps} (<= steps_per_epoch 10) two_phase never leaves Phase 1: "
              "it drafts only, like random")
    out = (args.out or Path("runs") / time.strftime("ablation-%Y%m%d-%H%M%S", time.gmtime())).resolve()
    out.mkdir(parents=True, exist_ok=True)
    competitions = [c for c in args.competitions.split(",") if c]
    data_dir = args.data_dir
    for competition in competitions:
        data_dir = ensure_data(competition, args.data_dir, None, out)
    cmd = sweep_command() + [
        "sweep", "--data-dir", str(Path(data_dir).resolve()), "--competitions", ",".join(competitions),
        "--seeds", str(args.seeds), "--policies", args.policies, "--max-steps", str(args.max_steps),
        "--model", args.model, "--out", str(out),
    ]
    if args.parallel_runs:
        cmd += ["--parallel-runs", str(args.parallel_runs)]
    if args.parallel_workers:
        cmd += ["--parallel-workers", str(args.parallel_workers)]
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    if not env.get("PREFECT_API_URL"):
        env["PREFECT_HOME"] = str(out / "prefect-home")
    runs = len(competitions) * len([p for p in args.policies.split(",") if p]) * args.seeds
    print(f"policy ablation: {runs} runs ({args.competitions} x {args.policies} x {args.seeds} seeds), "
          f"{args.max_steps} steps each, model {args.model}")
    print(f"machine: {os.cpu_count()} cores; load average (1/5/15 min) before: {load_text()}")
    print("$ " + " ".join(["swarm-evo"] + cmd[len(sweep_command()):]))
    log = out / "sweep.log"
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.run(cmd, check=False, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    elapsed = time.perf_counter() - started
    print(f"swarm-evo sweep exit code {code} after {elapsed / 60:.1f} min ({elapsed / runs:.0f} s per run); "
          f"log {log}; load average after: {load_text()}")
    if not (out / "summary.json").exists():
        print("\n".join(log.read_text(errors="replace").splitlines()[-20:]))
        return code or 1
    print()
    return print_table(out) or code


if __name__ == "__main__":
    sys.exit(main())
