"""A sweep's folders and the store (issue 40, items 5, 6 and 9 in one process).

- Item 5: reading a run's reports from the store never deletes the local ones; a row uses the
  store's files once the store's copy is final (it holds ``result.json``, uploaded last), else
  the local files with a warning. Real files and a real directory store.
- Item 6: a sweep records an id in ``OUT/sweep.json`` and ``STORE/sweeps/<name>/sweep.json``; two
  output folders with the same last name clash in one store (``swarm-evo sweep`` exits 2 with
  one line naming ``--out``, ``--store`` and the fix), never merge.
- Item 9 in one process: ``swarm-evo sweep`` started again with the same ``--out`` and
  ``--store`` keeps the finished rows and starts no run again (Prefect's records say so).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from swarm_evo.competition import CompetitionReport
from swarm_evo.store import open_store, put_object
from swarm_evo.sweeps import sweep
from swarm_evo.sweeps.sweep_store import SweepStore

RUN = "sklearn-wine-two_phase-s0"
ITEM = ("sklearn-wine", "two_phase", 0)
REPORT_FILES = ("grade_report.json", "result.json", "submission/submission.csv")


def _write_run(run_dir: Path, score: float) -> None:
    """A finished run's report files: grade_report.json, result.json and the submission."""
    submission = run_dir / "submission" / "submission.csv"
    submission.parent.mkdir(parents=True, exist_ok=True)
    submission.write_text(f"id,target\n0,{score}\n")
    report = CompetitionReport(competition_id="sklearn-wine", score=score, is_lower_better=True, submission_exists=True,
                               valid_submission=True, submission_path=str(submission)).to_dict()
    (run_dir / "grade_report.json").write_text(json.dumps(report))
    (run_dir / "result.json").write_text(json.dumps({"grade_report": report, "run_dir": str(run_dir)}))


def _upload(location, run_dir: Path, names) -> None:
    for name in names:
        put_object(location.run(RUN), name, (run_dir / name).read_bytes())


def test_reading_the_store_never_deletes_a_runs_local_reports(tmp_path, caplog):
    from flows._sweep_rows import stored_row

    run_dir = tmp_path / "out" / "runs" / RUN  # a sweep in one process: the run's own directory
    _write_run(run_dir, 0.25)
    before = {name: (run_dir / name).read_bytes() for name in REPORT_FILES}
    sweep_store = SweepStore(open_store(tmp_path / "store"), "out")
    # the store's copy as the run's last upload left it when it did not finish: the journal, no reports
    put_object(sweep_store.location.run(RUN), "journal.json", b'{"nodes": []}')

    with caplog.at_level(logging.WARNING):
        row = stored_row(sweep_store, ITEM, run_dir, str(tmp_path / "data"), {}, None, None, None)
    assert {name: (run_dir / name).read_bytes() for name in REPORT_FILES} == before, "local reports deleted"
    assert row["score"] == 0.25 and row["valid_submission"] is True and row["error"] is None, row
    assert row["run_url"] == sweep_store.run_url(RUN) and row["resumes"] == 0
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "is not final" in warning and "result.json" in warning and str(run_dir) in warning, warning

    # a store that does not answer: the same (a row from the local files, nothing deleted)
    down = SweepStore(open_store(tmp_path / "store-file"), "out")
    (tmp_path / "store-file").write_text("not a folder")
    assert stored_row(down, ITEM, run_dir, str(tmp_path / "data"), {}, None, None, None)["score"] == 0.25
    assert {name: (run_dir / name).read_bytes() for name in REPORT_FILES} == before

    # the store's copy, final (result.json, last): the row is the store's; a local file the store lacks stays
    elsewhere = tmp_path / "worker" / RUN
    _write_run(elsewhere, 0.5)
    (run_dir / "notes.txt").write_text("mine")
    (elsewhere / "submission" / "submission.csv").unlink()  # not uploaded: the local one stays
    _upload(sweep_store.location, elsewhere, ("grade_report.json", "result.json"))
    row = stored_row(sweep_store, ITEM, run_dir, str(tmp_path / "data"), {}, None, None, None)
    assert row["score"] == 0.5 and row["error"] is None
    assert json.loads((run_dir / "grade_report.json").read_text())["score"] == 0.5
    assert (run_dir / "submission" / "submission.csv").read_bytes() == before["submission/submission.csv"]
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert not [p for p in run_dir.parent.iterdir() if p.name.startswith(".")], "a temporary folder was left"


def test_a_store_folder_holds_one_sweep(tmp_path):
    from swarm_evo.sweeps.sweep_identity import SWEEP_FILE, check_sweep, claim_sweep, read_stored

    store = open_store(tmp_path / "store")
    location = store.child("sweeps", "nightly")
    alice, bob = tmp_path / "alice" / "exp" / "nightly", tmp_path / "bob" / "x" / "nightly"
    first = claim_sweep(alice, location)
    assert first.new and not first.local
    assert json.loads((alice / SWEEP_FILE).read_text())["id"] == first.identity.id == read_stored(location).id
    again = claim_sweep(alice, location)  # the same sweep started again: not a clash
    assert (again.identity, again.new, again.local) == (first.identity, False, True)
    for call in (check_sweep, claim_sweep):
        with pytest.raises(sweep.SweepError) as caught:
            call(bob, location, out_flag="--out", store_flag="--store")
        message = str(caught.value)
        assert "\n" not in message and f"--out {bob}" in message and "--store" in message, message
        assert first.identity.id[:8] in message and str(alice) in message and "another name" in message, message
    assert not (bob / SWEEP_FILE).exists(), "a clash writes nothing"

    # a deployment flow run restarted on another machine (its output folder gone) is the same sweep
    ours = claim_sweep(tmp_path / "w1" / "nightly2", store.child("sweeps", "nightly2"), flow_run_id="fr-1")
    moved = claim_sweep(tmp_path / "w2" / "nightly2", store.child("sweeps", "nightly2"), flow_run_id="fr-1")
    assert moved.identity.id == ours.identity.id and not moved.new
    with pytest.raises(sweep.SweepError, match="another sweep"):
        claim_sweep(tmp_path / "w3" / "nightly2", store.child("sweeps", "nightly2"), flow_run_id="fr-2")

    # a folder of a sweep made before ids: a clash too, never a merge
    put_object(store.child("sweeps", "old"), "summary.json", b"{}")
    with pytest.raises(sweep.SweepError, match="without a sweep.json"):
        claim_sweep(tmp_path / "old", store.child("sweeps", "old"))


def _sweep_main(argv: list[str]) -> int:
    from swarm_evo.cli.commands import main

    return main(argv)


async def _flow_runs(name: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async with get_client() as client:
        return await client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))


def test_a_sweep_started_again_keeps_its_rows_and_another_folder_of_its_name_is_refused(prefect_server, tmp_path,
                                                                                        capsys):
    store = tmp_path / "store"
    out = tmp_path / "alice" / "nightly"
    argv = ["sweep", "--problems", "circle-packing", "--seeds", "1", "--max-steps", "1", "--model", "offline",
            "--time-limit", "60", "--parallel-workers", "1", "--store", str(store), "--out", str(out)]
    assert _sweep_main(argv) == 0, capsys.readouterr().err
    name = "circle-packing-two_phase-s0"
    rows = (out / "problem_reports.jsonl").read_text()
    (row,) = [json.loads(line) for line in rows.splitlines()]
    assert row["valid"] is True and row["run_url"] == SweepStore(open_store(store), "nightly").run_url(name)
    assert (out / "runs" / name / "journal.json").is_file(), "the run's own directory lost its files"
    journal = (out / "runs" / name / "journal.json").read_bytes()
    sweep_id = json.loads((out / "sweep.json").read_text())["id"]
    assert json.loads((store / "sweeps" / "nightly" / "sweep.json").read_text())["id"] == sweep_id

    capsys.readouterr()
    assert _sweep_main(argv) == 0  # the same sweep again: its finished run keeps its row, nothing runs
    assert (out / "problem_reports.jsonl").read_text() == rows
    assert (out / "runs" / name / "journal.json").read_bytes() == journal
    runs = [r for r in asyncio.run(_flow_runs(name)) if r.parameters.get("run_dir", "").startswith(str(out))]
    assert len(runs) == 1, [(r.name, r.state.name) for r in runs]

    other = tmp_path / "bob" / "nightly"  # another folder with the same last name, the same store
    capsys.readouterr()
    assert _sweep_main([*argv[:-1], str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("swarm-evo: error: --out "), err
    assert "--store" in err and "another name" in err and str(out) in err, err
    assert not other.exists(), "bad input is reported before anything is written"
