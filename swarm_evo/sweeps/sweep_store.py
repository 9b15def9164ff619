"""A sweep with a run store (issue 34): its runs are mirrored to ``STORE/sweeps/<sweep name>/runs/
<run name>/`` by whichever machine runs them, and the sweep reads every row from there, never
from a worker's disk.

Layout in the store, the same as the sweep's output folder::

    STORE/sweeps/<sweep name>/runs/<run name>/     each run, whole (swarm_evo/store/mirror.py)
    STORE/sweeps/<sweep name>/grading_reports.jsonl, summary.json, mlebench_*   the sweep's files
    STORE/sweeps/<sweep name>/sweep.json           the sweep that owns the folder

A run of a deployment works in ``runs/sweeps/<sweep name>-<sweep id>/runs/<run name>`` under its
worker's working directory (scratch: nothing reads it but the run), so runs of two sweeps with
the same plan never share a directory. ``STORE/sweeps/<sweep name>/sweep.json`` records which
sweep owns the folder (swarm_evo/sweeps/sweep_identity.py).

A row is made from the store's copy of the run's reports only once that copy is final (the store
holds ``result.json``, uploaded last); reading the store never deletes a local file (issue 40,
item 5).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import NamedTuple

from swarm_evo.competition.grading import MLEBENCH_SUBMISSION_FILE
from swarm_evo.population.journal import JOURNAL_FILE, RESULT_FILE, atomic_write_text
from swarm_evo.store import Store, fetch_files, put_object
from swarm_evo.sweeps.sweep import (
    GRADE_REPORT_FILE,
    MLEBENCH_REPORT_FILE,
    MLEBENCH_SUBMISSIONS_FILE,
    REPORTS_FILE,
    RUNS_DIR,
    SUMMARY_FILE,
)
from swarm_evo.sweeps.sweep_problems import PROBLEM_REPORT_FILE, PROBLEM_REPORTS_FILE

SWEEPS_DIR = "sweeps"
SUBMISSION_FILE = "submission/submission.csv"
RUN_REPORT_FILES = (GRADE_REPORT_FILE, PROBLEM_REPORT_FILE, RESULT_FILE, MLEBENCH_SUBMISSION_FILE, SUBMISSION_FILE)
"""The files of a run a sweep's rows are made of, and the submission they grade (the rest of the
run stays in the store)."""
OUTPUT_FILES = (REPORTS_FILE, PROBLEM_REPORTS_FILE, SUMMARY_FILE, MLEBENCH_SUBMISSIONS_FILE, MLEBENCH_REPORT_FILE)
"""The sweep's own files, written to its output folder and copied to the store."""


class StoredReports(NamedTuple):
    """What :meth:`SweepStore.fetch_reports` found: ``final`` (the store's copy of the run's
    reports is final and was copied) and ``result`` (the run's ``result.json``, or None)."""

    final: bool
    result: dict | None


class SweepStore:
    """The store location of one sweep, ``STORE/sweeps/<sweep name>`` (``sweep_name``: the name
    of the sweep's output folder, e.g. ``20261126-230000``)."""

    def __init__(self, store: Store, sweep_name: str) -> None:
        self.sweep_name = sweep_name
        self.location = store.child(SWEEPS_DIR, sweep_name)

    @property
    def url(self) -> str:
        """The store URL every run of the sweep is given (its runs land in ``URL/runs/<name>``)."""
        return self.location.url

    def run_url(self, run_name: str) -> str:
        """``STORE/sweeps/<sweep>/runs/<run name>``: the run's place, what ``resume`` takes."""
        return self.location.run(run_name).url

    def worker_run_dir(self, run_name: str, sweep_id: str) -> str:
        """The (relative) scratch run directory of a run on a deployment's worker:
        ``runs/sweeps/<sweep name>-<first 8 hex of the sweep's id>/runs/<run name>``, so that a
        worker never continues the scratch copy of another sweep's run of the same names."""
        return f"{RUNS_DIR}/{SWEEPS_DIR}/{self.sweep_name}-{sweep_id[:8]}/{RUNS_DIR}/{run_name}"

    def has_journal(self, run_name: str) -> bool:
        """Whether the store holds the run's journal (a run that can be resumed)."""
        run = self.location.run(run_name)
        run.fs.invalidate_cache()
        return run.fs.exists(run.path(JOURNAL_FILE))

    def is_final(self, run_name: str) -> bool:
        """Whether the store's copy of the run's reports is final: it holds ``result.json``, which
        the mirror uploads last, after the journal, in the run's final sync (swarm_evo/store/mirror.py).

        Raises:
            OSError and the store's own errors: the store cannot be read.
        """
        run = self.location.run(run_name)
        run.fs.invalidate_cache()
        return run.fs.exists(run.path(RESULT_FILE))

    def fetch_reports(self, run_name: str, local_run_dir: Path) -> StoredReports:
        """The run's report files and submission (:data:`RUN_REPORT_FILES`) as the store holds
        them, into ``local_run_dir`` (the sweep's ``OUT/runs/<run name>``), when the store's copy
        is final (:meth:`is_final`); else nothing is copied and the local files stay as they are.
        Nothing local is ever deleted: a file the store lacks keeps its local copy (in a sweep
        in one process ``local_run_dir`` is the run's own directory).

        The store's files are first fetched into a temporary folder beside ``local_run_dir``,
        then moved over the local copies one by one (a rename: a reader sees a whole old or a
        whole new file). The copied ``grade_report.json`` and ``mlebench_submission.jsonl`` name
        the local copy of the submission as ``submission_path`` (the run wrote its worker's
        path), so ``mlebench grade --submission OUT/mlebench_submissions.jsonl`` grades it here.

        Returns:
            :class:`StoredReports`: ``final``, and the run's ``result.json`` (read locally, so a
            run whose store copy is not final gives its local one; None when there is none).

        Raises:
            OSError and the store's own errors: the store cannot be read.
        """
        local_run_dir = Path(local_run_dir)
        final = self.is_final(run_name)
        if final:
            local_run_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{run_name}.fetch-", dir=local_run_dir.parent) as tmp:
                for name in fetch_files(self.location.run(run_name), Path(tmp), RUN_REPORT_FILES):
                    (local_run_dir / name).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(Path(tmp) / name, local_run_dir / name)
            submission = local_run_dir / SUBMISSION_FILE
            if submission.is_file():  # the reports name the worker's file: name this machine's copy
                for name in (GRADE_REPORT_FILE, MLEBENCH_SUBMISSION_FILE):
                    _repoint(local_run_dir / name, str(submission.resolve()))
        try:
            result = json.loads((local_run_dir / RESULT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
        return StoredReports(final=final, result=result if isinstance(result, dict) else None)

    def publish(self, out_dir: Path) -> None:
        """Copy the sweep's output files (:data:`OUTPUT_FILES`) present in ``out_dir`` to the store."""
        for name in OUTPUT_FILES:
            path = Path(out_dir) / name
            if path.is_file():
                put_object(self.location, name, path.read_bytes())


def _repoint(path: Path, submission_path: str) -> None:
    """Set ``submission_path`` in the JSON object (or one-line JSONL) file ``path``, if it exists."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and "submission_path" in data:
        data["submission_path"] = submission_path
        text = json.dumps(data) + "\n" if path.suffix == ".jsonl" else json.dumps(data, indent=2)
        atomic_write_text(path, text)
