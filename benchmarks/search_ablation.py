"""Does the search matter? two_phase vs greedy vs random at equal budget, with a verdict (issue 17).

Runs ONE benchmark sweep through ``swarm-evo sweep`` (a subprocess: every task × policy × seed
is its own ``two-phase-evo`` run with the same budget ``--max-steps``, sandbox and model), then
prints per task: the mean ± SEM of the score per policy over the seeds, and for each policy
its difference to ``two_phase`` with a 95 % bootstrap interval and a one-line verdict::

    python benchmarks/search_ablation.py [--problems tsp:kroA100,tsp:a280,circle-packing]
        [--competitions A,B --data-dir D] [--problem-data-dir DIR] [--seeds 3] [--max-steps 30]
        [--policies two_phase,greedy,random] [--model offline] [--out OUT] [--config FILE]
        [--parallel-runs R] [--parallel-workers W]
    python benchmarks/search_ablation.py --table-only OUT    # the table of a finished sweep

Scores: a problem's own score (tour length: lower is better; sum of radii: higher is better),
a competition's test score (its metric's direction). The difference is oriented by that
direction: ``two_phase better by`` = mean(two_phase) − mean(policy) for higher-is-better
scores and mean(policy) − mean(two_phase) for lower-is-better ones, so > 0 always means
two_phase is better, in the score's unit. Its interval: percentile bootstrap
(``scipy.stats.bootstrap``, 10 000 resamples, seed 0) resampling the seeds of each policy
independently, with replacement (runs of two policies share no state). Verdict per task and
policy pair: "two_phase better" (interval above 0), "two_phase worse" (below 0), "no difference"
(contains 0) "at this budget"; "too few runs" when a policy has fewer than 2 scored runs.
Details and caveats: swarm_evo/sweeps/sweep_stats.py (with 3 seeds the interval is narrow and
optimistic; read it as a summary of these runs, not a significance test).

Writes ``OUT/ablation.md`` (the markdown table, for benchmarks/README.md) and
``OUT/ablation.json`` (command, wall time, per task and policy: scores, mean, SEM, difference,
interval, verdict), next to the sweep's own files (``summary.json``, ``problem_reports.jsonl``,
``grading_reports.jsonl``, ``runs/``, ``sweep.log``). The sweep gets its own ``PREFECT_HOME``
(``OUT/prefect-home``) unless ``PREFECT_API_URL`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from swarm_evo.sweeps.sweep_stats import compare, format_score

PROBLEMS = "tsp:kroA100,tsp:a280,circle-packing"
POLICIES = "two_phase,greedy,random"
REFERENCE = "two_phase"
MARKDOWN_FILE = "ablation.md"
JSON_FILE = "ablation.json"
RUN_FILE = "ablation_run.json"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def sweep_command() -> list[str]:
    """``swarm-evo`` of this interpreter's environment (or ``python -m swarm_evo.cli``)."""
    script = Path(sys.executable).with_name("swarm-evo")
    if script.exists():
        return [str(script)]
    found = shutil.which("swarm-evo")
    return [found] if found else [sys.executable, "-m", "swarm_evo.cli"]


def verdict_text(verdict: str, policy: str, reference: str = REFERENCE) -> str:
    """``"two_phase better than greedy at this budget"`` and the like."""
    if verdict == "too few runs":
        return f"too few scored runs to compare {reference} with {policy}"
    if verdict == "no difference":
        return f"no difference between {reference} and {policy} at this budget"
    return f"{reference} {verdict} than {policy} at this budget"


def analyse(summary: dict, reference: str = REFERENCE) -> list[dict]:
    """Per task of a sweep's ``summary.json``: the policies' statistics and comparisons.

    Returns ``[{"task", "score_name", "lower_is_better", "policies": [{"policy", "runs",
    "scored_runs", "scores", "mean", "sem", "comparison"}]}]``; ``comparison`` is None for the
    reference and for a task without it, else :func:`swarm_evo.sweeps.sweep_stats.compare` of the
    reference's scores with the policy's plus ``"text"`` (the verdict line).
    """
    tasks = []
    for task, by_policy in summary.items():
        first = next(iter(by_policy.values()))
        lower = bool(first.get("is_lower_better"))
        ref_scores = [s for s in (by_policy.get(reference) or {}).get("scores", []) if s is not None]
        entries = []
        for policy, stats in by_policy.items():
            scores = [s for s in stats.get("scores", []) if s is not None]
            comparison = None
            if policy != reference and reference in by_policy and scores and ref_scores:
                comparison = compare(ref_scores, scores, lower_is_better=lower)
                comparison["text"] = verdict_text(comparison["verdict"], policy, reference)
            elif policy != reference:
                comparison = {"verdict": "too few runs", "text": verdict_text("too few runs", policy, reference),
                              "advantage": None, "low": None, "high": None}
            entries.append({"policy": policy, "runs": stats["runs"], "scored_runs": len(scores), "scores": scores,
                            "mean": stats.get("score_mean"), "sem": stats.get("score_sem"), "comparison": comparison})
        tasks.append({"task": task, "score_name": first.get("score_name") or "test score", "lower_is_better": lower,
                      "known_best": first.get("known_best"), "policies": entries})
    return tasks


def _num(value, digits: int = 5) -> str:
    return "-" if value is None else f"{value + 0.0:.{digits}g}"  # + 0.0: no "-0" for a negated zero


def markdown(tasks: list[dict], meta: dict, reference: str = REFERENCE) -> str:
    """The ablation as markdown: the command, wall time and budget, one table over tasks and
    policies, then the verdict lines."""
    lines = [
        f"Command: `{meta['command']}`  ",
        f"Wall time: {meta['wall_seconds'] / 60:.1f} min ({meta['runs']} runs, {meta['max_steps']} steps each, "
        f"seeds {meta['seeds']}, model {meta['model']}; {meta['cores']} cores, load before {meta['load_before']})",
        "",
        f"| task | score | policy | runs (scored) | mean ± SEM | {reference} better by | 95 % CI | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        direction = "lower is better" if task["lower_is_better"] else "higher is better"
        for entry in task["policies"]:
            c = entry["comparison"]
            ci = "-" if not c or c.get("low") is None else f"[{_num(c['low'])}, {_num(c['high'])}]"
            lines.append(
                f"| {task['task']} | {task['score_name']} ({direction}) | {entry['policy']} | "
                f"{entry['runs']} ({entry['scored_runs']}) | {format_score(entry['mean'], entry['sem'])} | "
                f"{'(reference)' if c is None else _num(c.get('advantage'))} | {ci} | "
                f"{'' if c is None else c['verdict']} |")
    lines += ["", "Verdicts:", ""]
    for task in tasks:
        for entry in task["policies"]:
            if entry["comparison"] is not None:
                lines.append(f"- {task['task']}: {entry['comparison']['text']}")
    lines += ["", f"Difference: oriented so that > 0 means {reference} is better, in the score's unit; interval: "
              "95 % percentile bootstrap (scipy.stats.bootstrap, 10 000 resamples) resampling each policy's seeds "
              "independently; verdict from whether the interval excludes 0."]
    return "\n".join(lines) + "\n"


def report(out: Path, meta: dict) -> int:
    """Read ``OUT/summary.json``, print the ablation, write ablation.md and ablation.json."""
    summary_path = out / "summary.json"
    if not summary_path.exists():
        print(f"no sweep output in {out}: expected {summary_path.name}")
        return 1
    tasks = analyse(json.loads(summary_path.read_text()))
    text = markdown(tasks, meta)
    (out / MARKDOWN_FILE).write_text(text)
    (out / JSON_FILE).write_text(json.dumps({**meta, "reference": REFERENCE, "tasks": tasks}, indent=2) + "\n")
    print(text)
    print(f"written: {out / MARKDOWN_FILE}, {out / JSON_FILE}")
    return 0


def load_text() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default=None, help=f"problem tasks NAME[:INSTANCE] (default {PROBLEMS} "
                        "unless --competitions is given)")
    parser.add_argument("--competitions", default=None, help="competition ids (need --data-dir)")
    parser.add_argument("--data-dir", type=Path, default=None, help="MLE-bench data directory of the competitions")
    parser.add_argument("--problem-data-dir", type=Path, default=None,
                        help=f"the problems' data files (default {SHARED_DATA} when it exists)")
    parser.add_argument("--policies", default=POLICIES, help=f"must include {REFERENCE}")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per task and policy")
    parser.add_argument("--max-steps", type=int, default=30, help="the equal budget of every run (nodes)")
    parser.add_argument("--model", default="offline")
    parser.add_argument("--config", type=Path, default=None, help="YAML config for every run")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/search-ablation-<time>)")
    parser.add_argument("--parallel-runs", type=int, default=None)
    parser.add_argument("--parallel-workers", type=int, default=None)
    parser.add_argument("--table-only", type=Path, default=None, metavar="OUT",
                        help="only analyse the finished sweep in OUT (its ablation_run.json gives the command)")
    args = parser.parse_args(argv)
    if args.table_only:
        run_file = args.table_only / RUN_FILE
        meta = json.loads(run_file.read_text()) if run_file.exists() else {
            "command": "?", "wall_seconds": 0.0, "runs": "?", "max_steps": "?", "seeds": "?", "model": "?",
            "cores": os.cpu_count(), "load_before": "?"}
        return report(args.table_only, meta)
    if REFERENCE not in args.policies.split(","):
        parser.error(f"--policies must include {REFERENCE} (the reference of the comparison)")
    problems = args.problems if args.problems is not None else (None if args.competitions else PROBLEMS)
    problem_data = args.problem_data_dir or (SHARED_DATA if SHARED_DATA.is_dir() else None)
    out = (args.out or Path("runs") / time.strftime("search-ablation-%Y%m%d-%H%M%S", time.gmtime())).resolve()
    out.mkdir(parents=True, exist_ok=True)
    options = [("--problems", problems), ("--competitions", args.competitions), ("--data-dir", args.data_dir),
               ("--problem-data-dir", problem_data if problems else None), ("--seeds", args.seeds),
               ("--policies", args.policies), ("--max-steps", args.max_steps), ("--model", args.model),
               ("--config", args.config), ("--parallel-runs", args.parallel_runs),
               ("--parallel-workers", args.parallel_workers), ("--out", out)]
    sweep_args = ["sweep"] + [str(x) for flag, value in options if value is not None for x in (flag, value)]
    cmd = sweep_command() + sweep_args
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    if not env.get("PREFECT_API_URL"):
        env["PREFECT_HOME"] = str(out / "prefect-home")
    tasks = len([t for t in (problems or "").split(",") if t]) + len([c for c in (args.competitions or "").split(",") if c])
    runs = tasks * len([p for p in args.policies.split(",") if p]) * args.seeds
    shown = "swarm-evo " + shlex.join(sweep_args)
    load_before = load_text()
    print(f"search ablation: {runs} runs, {args.max_steps} steps each, model {args.model}; "
          f"{os.cpu_count()} cores, load average before: {load_before}")
    print(f"$ {shown}", flush=True)
    log = out / "sweep.log"
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.run(cmd, check=False, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    meta = {"command": shown, "exit_code": code, "wall_seconds": round(wall, 1), "runs": runs,
            "max_steps": args.max_steps, "seeds": args.seeds, "policies": args.policies, "model": args.model,
            "cores": os.cpu_count(), "load_before": load_before, "load_after": load_text()}
    (out / RUN_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    print(f"swarm-evo sweep exit code {code}; total wall time {wall / 60:.1f} min ({wall:.0f} s); log {log}")
    if not (out / "summary.json").exists():
        print("\n".join(log.read_text(errors="replace").splitlines()[-20:]))
        return code or 1
    print()
    return report(out, meta) or code


if __name__ == "__main__":
    sys.exit(main())
