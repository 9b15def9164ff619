"""Optimisation problems in benchmark sweeps: tasks, rows and their statistics (issue 17).

A sweep task is a competition (``swarm_evo.sweeps.sweep``) or a problem, written ``NAME`` or
``NAME:INSTANCE`` (``--problems tsp:kroA100,tsp:a280,circle-packing``): a built-in problem or
a problem folder, on one of its instances (``tsp:kroA100`` = problem ``tsp``, instance
``kroA100``; no instance = the problem's default). Its runs go to
``OUT/runs/<label>-<policy>-s<seed>`` with label ``tsp-kroA100`` (``circle-packing``), so every
instance has its own run directories.

Each finished problem run gives one row of ``OUT/problem_reports.jsonl`` (:func:`problem_row`),
from the run's ``RUN_DIR/problem_report.json`` (:class:`swarm_evo.objective.problem.ProblemReport`):

- ``kind`` = ``"problem"``, ``task``, ``problem``, ``instance``, ``policy``, ``seed``, ``run_dir``;
- ``score_name`` (e.g. ``tour_length``), ``score``: the best node's raw score in the problem's
  own unit (None when the run has no valid node), ``is_lower_better`` (from the problem's
  ``score.interpretation``), ``initial_score`` (the initial program's raw score),
  ``known_best``, ``gap_to_known_best``;
- ``combined_score`` (the fitness the search maximises, e.g. optimum / length), ``valid``
  (the best node passed the evaluator), ``best_node_id``, ``error`` (None, or
  ``"run failed: <why>"`` for a run that ended without a report).

Statistics (:func:`problem_stats`, per task and policy, over seeds): ``runs``, ``seeds``,
``failed_runs``, ``valid_runs``, ``scores`` (raw, seed order), ``scored_runs`` (n, runs with a
score), ``score_mean`` and ``score_sem`` (SEM = sample sd (ddof 1) / sqrt(n), None for n < 2,
as for competitions), ``combined_score_mean``/``combined_score_sem``, ``score_name``,
``is_lower_better``, ``known_best``. Pure: no Prefect.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from swarm_evo.sweeps.sweep_stats import format_score, mean_and_sem

PROBLEM_REPORTS_FILE = "problem_reports.jsonl"
"""``OUT/problem_reports.jsonl``: one row per problem run (competitions keep grading_reports.jsonl)."""
PROBLEM_REPORT_FILE = "problem_report.json"
"""``RUN_DIR/problem_report.json``: the run's own report (ProblemObjective.finalize)."""
KIND = "problem"
RUN_FAILED = "run failed: "


class ProblemTask(NamedTuple):
    """One problem task of a sweep: ``problem`` (a built-in name or a folder) and ``instance``
    (None = the problem's default)."""

    problem: str
    instance: str | None = None

    @property
    def task(self) -> str:
        """``problem:instance`` or ``problem``: the key of the summary and the rows."""
        return f"{self.problem}:{self.instance}" if self.instance else self.problem

    @property
    def label(self) -> str:
        """``<folder name>-<instance>`` or ``<folder name>``: the run directories' prefix."""
        name = Path(self.problem).name
        return f"{name}-{self.instance}" if self.instance else name


def parse_problem_tasks(value: str | Iterable[str] | None, field: str = "--problems") -> list[ProblemTask]:
    """``"tsp:kroA100,tsp:a280,circle-packing"`` (or a list of such items) -> ProblemTasks, in
    order, duplicates removed. The instance is what follows the last ``:``.

    Raises:
        ValueError: nothing given, or an item with an empty problem or instance (``tsp:``).
    """
    items = value.split(",") if isinstance(value, str) else list(value or [])
    tasks: list[ProblemTask] = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        problem, sep, instance = text.rpartition(":") if ":" in text else (text, "", "")
        if not problem.strip() or (sep and not instance.strip()):
            raise ValueError(f"{field}: {text!r} is not NAME or NAME:INSTANCE (e.g. tsp:kroA100 or circle-packing)")
        task = ProblemTask(problem.strip(), instance.strip() or None)
        if task not in tasks:
            tasks.append(task)
    if not tasks:
        raise ValueError(f"{field} is empty: give at least one, comma-separated (e.g. {field} tsp:kroA100,circle-packing)")
    return tasks


def is_problem_row(row: dict) -> bool:
    """True for a problem run's row (:func:`problem_row`), False for a competition's."""
    return row.get("kind") == KIND


def read_problem_report(run_dir: Path) -> dict | None:
    """``RUN_DIR/problem_report.json`` as a dict, or None when missing or unreadable."""
    try:
        return json.loads((Path(run_dir) / PROBLEM_REPORT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def problem_row(report: dict, task: ProblemTask, *, policy: str, seed: int, run_dir: str | Path) -> dict:
    """The row of a finished problem run from its ProblemReport (as a dict; module docstring)."""
    valid = bool(report.get("correct")) and report.get("raw_score") is not None
    return {
        "kind": KIND, "task": task.task, "problem": task.problem, "instance": report.get("instance") or task.instance,
        "policy": policy, "seed": int(seed), "run_dir": str(run_dir),
        "score_name": report.get("score_name"),
        "score": report.get("raw_score") if valid else None,
        "is_lower_better": report.get("interpretation") == "lower_better",
        "initial_score": report.get("initial_raw_score"),
        "known_best": report.get("known_best"),
        "gap_to_known_best": report.get("gap_to_known_best") if valid else None,
        "combined_score": report.get("score") if valid else None,
        "valid": valid,
        "best_node_id": report.get("best_node_id"),
        "error": None,
    }


def failed_problem_row(task: ProblemTask, *, score_name: str | None, is_lower_better: bool, known_best: float | None,
                       policy: str, seed: int, run_dir: str | Path, error: str) -> dict:
    """The row of a problem run that ended without a report: no score, ``error = "run failed: ..."``."""
    return {
        "kind": KIND, "task": task.task, "problem": task.problem, "instance": task.instance,
        "policy": policy, "seed": int(seed), "run_dir": str(run_dir), "score_name": score_name, "score": None,
        "is_lower_better": bool(is_lower_better), "initial_score": None, "known_best": known_best,
        "gap_to_known_best": None, "combined_score": None, "valid": False, "best_node_id": None,
        "error": f"{RUN_FAILED}{error}",
    }


def problem_stats(group: Sequence[dict]) -> dict[str, Any]:
    """Statistics of one task and policy over its rows (module docstring), rows in seed order."""
    group = sorted(group, key=lambda r: r["seed"])
    scores = [r.get("score") for r in group]
    present = [s for s in scores if s is not None]
    mean, sem = mean_and_sem(present)
    combined_mean, combined_sem = mean_and_sem([r["combined_score"] for r in group if r.get("combined_score") is not None])
    return {
        "kind": KIND,
        "runs": len(group),
        "seeds": [r["seed"] for r in group],
        "failed_runs": sum(str(r.get("error") or "").startswith(RUN_FAILED) for r in group),
        "valid_runs": sum(bool(r.get("valid")) for r in group),
        "scores": scores,
        "scored_runs": len(present),
        "score_mean": mean,
        "score_sem": sem,
        "combined_score_mean": combined_mean,
        "combined_score_sem": combined_sem,
        "score_name": group[0].get("score_name"),
        "is_lower_better": bool(group[0].get("is_lower_better")),
        "known_best": group[0].get("known_best"),
    }


def problem_table(summary: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per problem task × policy of a sweep summary (competitions are left out)."""
    table = []
    for task, by_policy in summary.items():
        for policy, stats in by_policy.items():
            if stats.get("kind") != KIND:
                continue
            table.append({
                "task": task,
                "policy": policy,
                "runs": stats["runs"],
                "valid runs": stats["valid_runs"],
                "score": stats["score_name"],
                "score (mean ± SEM)": format_score(stats["score_mean"], stats["score_sem"]),
                "direction": "lower is better" if stats["is_lower_better"] else "higher is better",
                "best known": "-" if stats["known_best"] is None else f"{stats['known_best']:g}",
                "combined_score (mean ± SEM)": format_score(stats["combined_score_mean"], stats["combined_score_sem"]),
                "failed runs": stats["failed_runs"],
            })
    return table
