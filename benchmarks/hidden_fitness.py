"""Hidden against printed fitness (issue 41): what selecting on a host-graded hidden split buys.

For every competition × seed, two ``swarm-evo run`` processes with the offline model, the same
seed, budget and time limit: ``search.fitness: hidden`` and ``search.fitness: printed``. Then:

* the **private test score of the hand-in** (``grade_report.json``): mean per fitness, and the
  paired difference hidden − printed, oriented so that > 0 means hidden did better (negated for
  lower-is-better metrics), with a 95 % percentile-bootstrap interval over the seeds
  (``scipy.stats.bootstrap``, 10 000 resamples; with 3 seeds the interval is coarse);
* **Spearman's rho** of the printed metric and of the hidden score with the private test score
  over all valid nodes of the hidden runs (every node's real-row submission graded on the
  private answers), mean over seeds; and the printed metric's rho in the printed runs;
* the **added time**: per node, the host's split and grading of one submission (median of 20
  submissions of the view's size, ms) plus the split's creation spread over the run's nodes;
  and the final fit's wall seconds (``journal.info["final_fit"]``), with its status.

Usage (from the repository root; data prepared from ``../shared/data/<id>/raw`` into
``OUT/data`` when missing)::

    python benchmarks/hidden_fitness.py [--seeds 3] [--max-steps 30] [--time-limit 150] \\
        [--competitions spaceship-titanic,house-prices,spooky-author-identification] [--out OUT]
    python benchmarks/hidden_fitness.py --table-only OUT   # re-analyse finished runs

Writes ``OUT/hidden_fitness.json`` and prints the Markdown tables of benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO))

from swarm_evo.competition import grade_submission, load_competition, prepare_competition  # noqa: E402
from swarm_evo.competition.hidden_grading import HiddenGrader  # noqa: E402
from swarm_evo.competition.hidden_split import write_split  # noqa: E402

FITNESS = ("hidden", "printed")


def _prepare(data: Path, competition_id: str) -> None:
    if not (data / competition_id / "prepared" / "public").is_dir():
        raw = SHARED / competition_id / "raw"
        prepare_competition(competition_id, raw if raw.is_dir() else None, data)


def _run(out: Path, data: Path, competition_id: str, seed: int, fitness: str, args) -> Path:
    run_dir = out / "runs" / f"{competition_id}-s{seed}-{fitness}"
    if (run_dir / "grade_report.json").is_file():
        return run_dir
    config = out / f"config-{fitness}.yaml"
    config.write_text(yaml.safe_dump({"search": {"fitness": fitness}}))
    cmd = [sys.executable, "-m", "swarm_evo.cli", "run", "--competition-id", competition_id, "--data-dir", str(data),
           "--max-steps", str(args.max_steps), "--seed", str(seed), "--time-limit", str(args.time_limit),
           "--config", str(config), "--run-dir", str(run_dir)]
    started = time.monotonic()
    with open(out / "runs.log", "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT).returncode
    print(f"{run_dir.name}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return run_dir


def _orient(value: float, lower: bool) -> float:
    return -value if lower else value


def _spearman(a: list[float], b: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(spearmanr(a, b).statistic)


def _analyse_run(run_dir: Path, competition) -> dict:
    journal = json.loads((run_dir / "journal.json").read_text())
    grade = json.loads((run_dir / "grade_report.json").read_text())
    lower = competition.is_lower_better
    printed, hidden, private = [], [], []
    for node in journal["nodes"]:
        if node["is_buggy"] or node["dead"] or node["metric_value"] is None:
            continue
        report = grade_submission(run_dir / "nodes" / node["id"] / "submission" / "submission.csv", competition)
        if report.score is None:
            continue
        printed.append(_orient(node["metric_value"], lower))
        private.append(_orient(report.score, lower))
        hidden.append(None if node.get("hidden_score") is None else _orient(node["hidden_score"], lower))
    both = [i for i, h in enumerate(hidden) if h is not None]
    exec_times = [n["metadata"].get("timings", {}).get("exec") for n in journal["nodes"]]
    return {
        "score": grade.get("score"),
        "nodes": len(journal["nodes"]),
        "valid": len(printed),
        "rho_printed": _spearman(printed, private),
        "rho_hidden": _spearman([hidden[i] for i in both], [private[i] for i in both]) if both else None,
        "rho_printed_same_nodes": _spearman([printed[i] for i in both], [private[i] for i in both]) if both else None,
        "final_fit": journal["info"].get("final_fit"),
        "mean_exec_s": statistics.fmean([t for t in exec_times if t is not None] or [0.0]),
    }


def _split_cost(competition, out: Path, nodes: int) -> dict:
    """ms to write the split once, and per node to split and grade one submission (median of 20)."""
    root = out / "split-cost" / competition.id
    started = time.perf_counter()
    split = write_split(competition, root / "hidden_split", 0, 0.15)
    create_ms = (time.perf_counter() - started) * 1000
    grader = HiddenGrader(competition, split)
    sample = pd.read_csv(grader.view.sample_submission_path)
    times = []
    for k in range(20):
        workdir = root / f"node{k}"
        (workdir / "submission").mkdir(parents=True, exist_ok=True)
        sample.to_csv(workdir / "submission" / "submission.csv", index=False)
        started = time.perf_counter()
        assert not grader.program_errors(workdir / "submission" / "submission.csv")
        grader.split_submission(workdir, Path("submission") / "submission.csv")
        times.append((time.perf_counter() - started) * 1000)
    per_node = statistics.median(times)
    return {"create_ms": create_ms, "per_node_ms": per_node, "added_per_node_ms": per_node + create_ms / max(1, nodes)}


def _bootstrap(diffs: list[float]) -> tuple[float, float] | tuple[None, None]:
    from scipy.stats import bootstrap

    if len(diffs) < 2 or len(set(diffs)) < 2:
        return (diffs[0], diffs[0]) if diffs else (None, None)
    res = bootstrap((np.asarray(diffs),), np.mean, confidence_level=0.95, n_resamples=10_000, method="percentile",
                    rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _fmt(value, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def analyse(out: Path, data: Path, competitions: list[str], seeds: int, max_steps: int) -> dict:
    result: dict = {"competitions": {}}
    for cid in competitions:
        competition = load_competition(cid, data)
        runs = {f: [_analyse_run(out / "runs" / f"{cid}-s{s}-{f}", competition) for s in range(seeds)] for f in FITNESS}
        lower = competition.is_lower_better
        diffs = [_orient(h["score"], lower) - _orient(p["score"], lower)
                 for h, p in zip(runs["hidden"], runs["printed"]) if h["score"] is not None and p["score"] is not None]
        low, high = _bootstrap(diffs)
        fits = [r["final_fit"] for r in runs["hidden"] if r["final_fit"]]
        result["competitions"][cid] = {
            "metric": competition.grader.name, "lower_is_better": lower, "runs": runs,
            "mean_score": {f: _mean(r["score"] for r in runs[f]) for f in FITNESS},
            "paired_diff": _mean(diffs), "ci95": [low, high], "pairs": len(diffs),
            "rho": {"printed_in_hidden_runs": _mean(r["rho_printed_same_nodes"] for r in runs["hidden"]),
                    "hidden_in_hidden_runs": _mean(r["rho_hidden"] for r in runs["hidden"]),
                    "printed_in_printed_runs": _mean(r["rho_printed"] for r in runs["printed"])},
            "final_fit": {"refit": sum(f["status"] == "refit" for f in fits), "of": len(runs["hidden"]),
                          "mean_wall_s": _mean(f.get("wall_seconds") for f in fits if f["status"] == "refit")},
            "mean_exec_s": {f: _mean(r["mean_exec_s"] for r in runs[f]) for f in FITNESS},
            "cost": _split_cost(competition, out, max_steps),
        }
    (out / "hidden_fitness.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def tables(result: dict) -> str:
    lines = ["| competition (metric) | hand-in private score, hidden | printed | paired diff hidden − printed "
             "(> 0: hidden better) | 95 % bootstrap CI | pairs |", "|---|---|---|---|---|---|"]
    for cid, r in result["competitions"].items():
        direction = "lower better" if r["lower_is_better"] else "higher better"
        lines.append(f"| {cid} ({r['metric']}, {direction}) | {_fmt(r['mean_score']['hidden'])} | "
                     f"{_fmt(r['mean_score']['printed'])} | {_fmt(r['paired_diff'], 3)} | "
                     f"[{_fmt(r['ci95'][0], 3)}, {_fmt(r['ci95'][1], 3)}] | {r['pairs']} |")
    lines += ["", "| competition | Spearman vs private score: printed metric (hidden runs) | hidden score (hidden runs) | "
              "printed metric (printed runs) |", "|---|---|---|---|"]
    for cid, r in result["competitions"].items():
        rho = r["rho"]
        lines.append(f"| {cid} | {_fmt(rho['printed_in_hidden_runs'], 3)} | {_fmt(rho['hidden_in_hidden_runs'], 3)} | "
                     f"{_fmt(rho['printed_in_printed_runs'], 3)} |")
    lines += ["", "| competition | split written once (ms) | split + grade per node (ms, median) | added per node "
              "(ms, split spread over the budget) | final fit: refitted / runs, mean wall (s) | mean exec per node "
              "hidden / printed (s) |", "|---|---|---|---|---|---|"]
    for cid, r in result["competitions"].items():
        c, f, e = r["cost"], r["final_fit"], r["mean_exec_s"]
        lines.append(f"| {cid} | {c['create_ms']:.0f} | {c['per_node_ms']:.1f} | {c['added_per_node_ms']:.1f} | "
                     f"{f['refit']} / {f['of']}, {_fmt(f['mean_wall_s'], 3)} | {_fmt(e['hidden'], 3)} / "
                     f"{_fmt(e['printed'], 3)} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--time-limit", type=float, default=150)
    parser.add_argument("--competitions", default="spaceship-titanic,house-prices,spooky-author-identification")
    parser.add_argument("--out", type=Path, default=Path("hidden-fitness-bench"))
    parser.add_argument("--table-only", type=Path, default=None, help="re-analyse the runs in this OUT")
    args = parser.parse_args()
    out = (args.table_only or args.out).resolve()
    data = out / "data"
    competitions = args.competitions.split(",")
    out.mkdir(parents=True, exist_ok=True)
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}", flush=True)
    if args.table_only is None:
        for cid in competitions:
            _prepare(data, cid)
        for seed in range(args.seeds):
            for cid in competitions:
                for fitness in FITNESS:
                    _run(out, data, cid, seed, fitness, args)
    print(tables(analyse(out, data, competitions, args.seeds, args.max_steps)))
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
