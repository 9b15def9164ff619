"""Benchmark sweeps: the plan, the grading-report rows and the summary (SPEC §12; issues 6, 17).

A sweep runs every (task, policy, seed) of a plan as its own ``two-phase-evo`` run, a task being
a competition or an optimisation problem on an instance (``tsp:kroA100``; rows, statistics and
task names of problems: :mod:`swarm_evo.sweeps.sweep_problems`), and writes, in its output directory
``OUT``:

- ``OUT/grading_reports.jsonl``: one line per run: the run's MLE-bench ``CompetitionReport``
  (``swarm_evo.competition.CompetitionReport``: competition_id, score, gold/silver/bronze/
  median thresholds, any_medal, gold_medal, silver_medal, bronze_medal, above_median,
  submission_exists, valid_submission, is_lower_better, created_at, submission_path, plus
  ``error``) followed by ``policy``, ``seed`` and ``run_dir``. The report is the run's
  ``RUN_DIR/grade_report.json`` (written by ``CompetitionObjective.finalize``); a run that
  crashed before grading gets a report with ``submission_exists``/``valid_submission`` false,
  ``score`` null and ``error`` = ``"run failed: <why>"`` (MLE-bench counts a missing
  submission as a run without a medal, not as a missing run).
- ``OUT/problem_reports.jsonl``: one line per problem run (:func:`swarm_evo.sweeps.sweep_problems.problem_row`),
  written when the sweep has problems.
- ``OUT/summary.json``: :func:`summarize` of all rows, ``{task: {policy: stats}}`` (the task is
  the competition id, or ``problem[:instance]``).
- For the runs of competitions MLE-bench knows (their run wrote ``RUN_DIR/mlebench_submission.jsonl``;
  other competitions are kept out, so ``mlebench grade`` never meets an id it does not know):
  ``OUT/mlebench_submissions.jsonl`` (those lines: ``mlebench grade --submission`` takes it) and
  ``OUT/mlebench_grading_report.json``, MLE-bench's run-group report of their rows
  (:func:`~swarm_evo.competition.grading.run_group_report`). A run that crashed before writing
  its files is not in them.

Statistics (per competition and policy, over seeds): counts of runs, valid submissions and of
the MLE-bench booleans (any_medal, gold/silver/bronze_medal, above_median); the mean of the
``score`` over the runs that have one (an invalid submission has ``score`` null, as in
MLE-bench: it counts in ``runs`` but not in the mean), and its standard error
SEM = s / sqrt(n) with s the sample standard deviation (ddof = 1) of those n scores — the same
as ``scipy.stats.sem`` — or None when n < 2 (one run says nothing about the spread)
(:mod:`swarm_evo.sweeps.sweep_stats`).

Pure: no Prefect (``flows/benchmark_sweep.py`` runs the plan; ``swarm_evo/cli/sweep_cli.py`` is
``swarm-evo sweep``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from swarm_evo.competition import CompetitionReport
from swarm_evo.competition.grading import MLEBENCH_SUBMISSION_FILE, run_group_report
from swarm_evo.population.journal import atomic_write_text
from swarm_evo.sweeps.sweep_problems import PROBLEM_REPORTS_FILE, is_problem_row, problem_stats
from swarm_evo.sweeps.sweep_stats import format_score, mean_and_sem  # noqa: F401 (re-exported: sweep.mean_and_sem)

POLICIES = ("two_phase", "greedy", "random")
"""Search policies (SPEC §12): ``two_phase`` (default), ``greedy`` (AIDE's), ``random`` (drafts only)."""
DEFAULT_POLICY = "two_phase"
REPORTS_FILE = "grading_reports.jsonl"
SUMMARY_FILE = "summary.json"
MLEBENCH_SUBMISSIONS_FILE = "mlebench_submissions.jsonl"
MLEBENCH_REPORT_FILE = "mlebench_grading_report.json"
RUNS_DIR = "runs"
"""Run directories of a sweep: ``OUT/runs/<competition>-<policy>-s<seed>``."""
GRADE_REPORT_FILE = "grade_report.json"
RUN_FAILED = "run failed: "
"""Prefix of ``error`` in the row of a run that ended without a grading report."""
ROW_EXTRA_FIELDS = ("policy", "seed", "run_dir")
STORE_ROW_FIELDS = ("run_url", "resumes")
"""Fields a row has besides the report when the sweep has a run store (swarm_evo/sweeps/sweep_store.py)."""
SWEEP_ROOT = Path("runs") / "sweeps"


class SweepError(ValueError):
    """A sweep input that cannot be used; the message names the field and the fix."""


# ---------------------------------------------------------------------------------------------
# Inputs and the plan


def parse_names(value: str | Iterable[str] | None, field: str) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (stripped, empty items dropped, order
    kept, duplicates removed).

    Raises:
        SweepError: nothing left.
    """
    items = value.split(",") if isinstance(value, str) else list(value or [])
    names: list[str] = []
    for item in items:
        name = str(item).strip()
        if name and name not in names:
            names.append(name)
    if not names:
        raise SweepError(f"{field} is empty: give at least one, comma-separated (e.g. {field} A,B)")
    return names


def parse_policies(value: str | Iterable[str] | None, supported: Sequence[str] = POLICIES) -> list[str]:
    """Policy names (``"two_phase,greedy"`` or a list); None/empty -> ``[two_phase]``.

    Raises:
        SweepError: an unknown policy, or one not in ``supported`` (the search policies this
            version of ``two_phase_evo`` accepts).
    """
    if value is None or (not isinstance(value, str) and not list(value)) or value == "":
        return [DEFAULT_POLICY]
    policies = parse_names(value, "policies")
    for policy in policies:
        if policy not in POLICIES:
            raise SweepError(f"policies: unknown policy {policy!r}: use {', '.join(POLICIES)}")
        if policy not in supported:
            raise SweepError(
                f"policies: {policy!r} is not supported by this version of two_phase_evo "
                f"(it accepts only {', '.join(supported)})"
            )
    return policies


def parse_seeds(value: int | str | Iterable[int] | None) -> list[int]:
    """Seeds: ``N`` (an int or its text) -> ``0..N-1``; a list (or ``"3,7"``) -> those seeds.

    Raises:
        SweepError: N < 1, an empty list, a seed that is not an integer >= 0, a repeated seed.
    """
    if isinstance(value, bool) or value is None:
        raise SweepError(f"seeds must be a count N >= 1 (seeds 0..N-1) or a list of seeds, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if "," not in text:
            try:
                value = int(text)
            except ValueError:
                raise SweepError(f"seeds must be a count N >= 1 (seeds 0..N-1), got {value!r}") from None
        else:
            value = [item for item in text.split(",") if item.strip()]
    if isinstance(value, int):
        if value < 1:
            raise SweepError(f"seeds must be >= 1 (N runs per competition and policy, seeds 0..N-1), got {value}")
        return list(range(value))
    seeds: list[int] = []
    for item in value:
        try:
            seed = int(str(item).strip())
        except ValueError:
            raise SweepError(f"seeds: {item!r} is not an integer") from None
        if seed < 0:
            raise SweepError(f"seeds: {seed} is negative; seeds are integers >= 0")
        if seed in seeds:
            raise SweepError(f"seeds: {seed} is given twice")
        seeds.append(seed)
    if not seeds:
        raise SweepError("seeds is empty: give a count N >= 1 or a list of seeds")
    return seeds


def plan(competitions: Sequence[str], policies: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, str, int]]:
    """Every ``(competition, policy, seed)``, competition-major (the order of the JSONL)."""
    return [(c, p, s) for c in competitions for p in policies for s in seeds]


def run_name(competition_id: str, policy: str, seed: int) -> str:
    """``<competition>-<policy>-s<seed>`` (a competition folder path gives its last part)."""
    return f"{Path(competition_id).name}-{policy}-s{seed}"


def default_out_dir(root: Path = SWEEP_ROOT, now: datetime | None = None) -> Path:
    """``runs/sweeps/<UTC YYYYmmdd-HHMMSS>``: a scheduled sweep writes a new folder each time."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return root / stamp


# ---------------------------------------------------------------------------------------------
# Rows


def read_grade_report(run_dir: Path) -> dict | None:
    """``RUN_DIR/grade_report.json`` as a dict, or None when the file is missing or unreadable."""
    path = Path(run_dir) / GRADE_REPORT_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def report_row(report: dict | CompetitionReport, *, policy: str, seed: int, run_dir: str | Path) -> dict:
    """One JSONL row: the CompetitionReport's fields (validated; JSON types) + policy, seed, run_dir.

    Raises:
        pydantic.ValidationError: ``report`` is not a CompetitionReport.
    """
    if not isinstance(report, CompetitionReport):
        report = CompetitionReport.model_validate(report)
    return {**report.to_dict(), "policy": policy, "seed": int(seed), "run_dir": str(run_dir)}


def failed_row(
    competition_id: str, *, is_lower_better: bool, policy: str, seed: int, run_dir: str | Path, error: str
) -> dict:
    """The row of a run that ended without a grading report: no submission, no score,
    ``error = "run failed: <error>"``."""
    report = CompetitionReport(
        competition_id=competition_id,
        is_lower_better=is_lower_better,
        submission_path=str(Path(run_dir) / "submission" / "submission.csv"),
        error=f"{RUN_FAILED}{error}",
    )
    return report_row(report, policy=policy, seed=seed, run_dir=run_dir)


def is_failed_row(row: dict) -> bool:
    """True for the row of a run that crashed (see :func:`failed_row`)."""
    return str(row.get("error") or "").startswith(RUN_FAILED)


# ---------------------------------------------------------------------------------------------
# Summary


def summarize(rows: Iterable[dict]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per competition and policy, over seeds: ``{competition_id: {policy: stats}}``.

    ``rows`` are JSONL rows (:func:`report_row`; problem runs' rows, keyed by their ``task``,
    get :func:`swarm_evo.sweeps.sweep_problems.problem_stats`); tasks and policies keep the order of
    their first row, seeds are sorted. ``stats`` of a competition:

    - ``runs``: rows; ``seeds``: their seeds; ``failed_runs``: runs that crashed before grading;
    - ``submissions`` (submission_exists), ``valid_submissions`` (valid_submission),
      ``any_medal``, ``gold_medal``, ``silver_medal``, ``bronze_medal``, ``above_median``:
      counts of runs whose report field is true;
    - ``scores``: the score of each run in seed order (None for no valid submission);
      ``scored_runs``: how many are not None (n);
    - ``score_mean``, ``score_sem``: mean and standard error of those n scores (module
      docstring; None for n = 0, SEM None for n < 2); ``is_lower_better``: the metric's direction.
    """
    groups: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        task = row["task"] if is_problem_row(row) else row["competition_id"]
        groups.setdefault(task, {}).setdefault(row["policy"], []).append(row)
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for competition_id, by_policy in groups.items():
        summary[competition_id] = {}
        for policy, group in by_policy.items():
            if is_problem_row(group[0]):
                summary[competition_id][policy] = problem_stats(group)
                continue
            group = sorted(group, key=lambda r: r["seed"])
            scores = [r.get("score") for r in group]
            present = [s for s in scores if s is not None]
            mean, sem = mean_and_sem(present)
            summary[competition_id][policy] = {
                "runs": len(group),
                "seeds": [r["seed"] for r in group],
                "failed_runs": sum(is_failed_row(r) for r in group),
                "submissions": sum(bool(r.get("submission_exists")) for r in group),
                "valid_submissions": sum(bool(r.get("valid_submission")) for r in group),
                "any_medal": sum(bool(r.get("any_medal")) for r in group),
                "gold_medal": sum(bool(r.get("gold_medal")) for r in group),
                "silver_medal": sum(bool(r.get("silver_medal")) for r in group),
                "bronze_medal": sum(bool(r.get("bronze_medal")) for r in group),
                "above_median": sum(bool(r.get("above_median")) for r in group),
                "scores": scores,
                "scored_runs": len(present),
                "score_mean": mean,
                "score_sem": sem,
                "is_lower_better": bool(group[0].get("is_lower_better")),
            }
    return summary


def summary_table(summary: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per competition × policy for a table artifact or a terminal print (problem
    tasks: :func:`swarm_evo.sweeps.sweep_problems.problem_table`)."""
    table = []
    for competition_id, by_policy in summary.items():
        for policy, stats in by_policy.items():
            if stats.get("kind") == "problem":
                continue
            table.append({
                "competition": competition_id,
                "policy": policy,
                "runs": stats["runs"],
                "valid submissions": stats["valid_submissions"],
                "medals": stats["any_medal"],
                "gold/silver/bronze": f"{stats['gold_medal']}/{stats['silver_medal']}/{stats['bronze_medal']}",
                "above median": stats["above_median"],
                "score (mean ± SEM)": format_score(stats["score_mean"], stats["score_sem"]),
                "direction": "lower is better" if stats["is_lower_better"] else "higher is better",
                "failed runs": stats["failed_runs"],
            })
    return table


def format_table(table: list[dict[str, Any]]) -> str:
    """A plain-text table (columns padded) of :func:`summary_table` rows."""
    if not table:
        return "(no runs)"
    columns = list(table[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in table)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in table]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Files


def write_outputs(rows: Sequence[dict], out_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Write ``OUT/grading_reports.jsonl`` (one competition row per line, in the given order),
    ``OUT/problem_reports.jsonl`` (the problem rows, when there are some), ``OUT/summary.json``
    (:func:`summarize`) and, for runs of competitions MLE-bench knows, its files (module
    docstring); all atomically. Returns the summary."""
    out_dir = Path(out_dir)
    summary = summarize(rows)
    problem_rows = [row for row in rows if is_problem_row(row)]
    rows = [row for row in rows if not is_problem_row(row)]
    atomic_write_text(out_dir / REPORTS_FILE, "".join(json.dumps(row) + "\n" for row in rows))
    if problem_rows:
        atomic_write_text(out_dir / PROBLEM_REPORTS_FILE, "".join(json.dumps(row) + "\n" for row in problem_rows))
    atomic_write_text(out_dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    known = [(row, Path(row["run_dir"]) / MLEBENCH_SUBMISSION_FILE) for row in rows]
    known = [(row, path) for row, path in known if path.is_file()]
    if known:
        lines = "".join(path.read_text(encoding="utf-8").strip() + "\n" for _, path in known)
        atomic_write_text(out_dir / MLEBENCH_SUBMISSIONS_FILE, lines)
        extra = (*ROW_EXTRA_FIELDS, *STORE_ROW_FIELDS)
        reports = [CompetitionReport.model_validate({k: v for k, v in row.items() if k not in extra})
                   for row, _ in known]
        atomic_write_text(out_dir / MLEBENCH_REPORT_FILE, json.dumps(run_group_report(reports), indent=2) + "\n")
    return summary

