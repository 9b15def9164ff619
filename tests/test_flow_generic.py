"""A competition given only as MLE-bench folders + config.yaml runs through the flow and is
graded; a small budget with more workers than steps is never exceeded."""

from __future__ import annotations

import json
import shutil

import yaml

from swarm_evo.competition import prepare_competition


def test_generic_competition_runs_and_grades(prefect_server, tmp_path):
    from flows.two_phase_evo import two_phase_evo

    # Build an MLE-bench-layout folder under an id that is not built in.
    staging = tmp_path / "staging"
    prepare_competition("sklearn-wine", None, staging)
    data = tmp_path / "data"
    shutil.copytree(staging / "sklearn-wine" / "prepared", data / "my-wine" / "prepared")
    (data / "my-wine" / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "id": "my-wine",
                "name": "My wine",
                "competition_type": "simple",
                "awards_medals": False,
                "dataset": {
                    "answers": "my-wine/prepared/private/test.csv",
                    "sample_submission": "my-wine/prepared/public/sample_submission.csv",
                },
                "grader": {"name": "multi-class-log-loss"},
            }
        )
    )
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 2, "phase1_target_nodes": 2,
                                                 "proposal_backlog": 0},  # one step per slot: both phases in 5 steps
                                      "sandbox": {"exec_timeout": 19}}))  # quick-tier offline programs
    run_dir = tmp_path / "wine-run"
    summary = two_phase_evo(
        competition_id="my-wine", data_dir=str(data), run_dir=str(run_dir), model="offline",
        max_steps=5, seed=1, parallel_workers=3, config_path=str(config),
    )
    nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
    assert len(nodes) == 5, "3 workers on a budget of 5 never overshoot"
    assert {n["phase"] for n in nodes} == {1, 2}
    report = json.loads((run_dir / "grade_report.json").read_text())
    assert report["competition_id"] == "my-wine"
    assert report["valid_submission"] is True and report["is_lower_better"] is True
    assert report["score"] == summary["grade_report"]["score"]
    assert not (run_dir / "mlebench_submission.jsonl").exists(), "MLE-bench does not know my-wine"


def _insults_layout(root, cid: str) -> None:
    """A synthetic competition in detecting-insults-in-social-commentary's real layout (MLE-bench
    ``prepare.py``): train ``Insult,Date,Comment``; test ``Date,Comment``; the sample submission
    ``sample_submission_null.csv`` with ``Insult,Date,Comment``; the id column is ``Comment``
    (not first), the target ``Insult``, and ``Date`` is neither. Its config.yaml is MLE-bench's
    (no id or target columns): the loader knows this competition's columns."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    kind = {
        0: ["thanks a lot for sharing this with all of us here", "that is a great point and i fully agree",
            "nice work on this article, very well written"],
        1: ["you are an idiot and nobody wants to read this", "shut up you stupid moron, what a loser",
            "what a dumb idea from a complete idiot like you"],
    }

    def make(n: int, start: int) -> pd.DataFrame:
        y = rng.integers(0, 2, n)
        comments = [f'"{kind[int(t)][rng.integers(0, 3)]} (comment {i})"' for i, t in enumerate(y, start)]
        dates = [f"2012{rng.integers(1, 13):02d}{rng.integers(1, 28):02d}120000Z" if rng.random() < 0.8 else None
                 for _ in range(n)]
        return pd.DataFrame({"Insult": y, "Date": dates, "Comment": comments})

    public, private = root / cid / "prepared" / "public", root / cid / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train, test = make(240, 0), make(80, 1000)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="Insult").to_csv(public / "test.csv", index=False)
    test.assign(Insult=0).to_csv(public / "sample_submission_null.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text("# Detecting insults\n\nPredict whether a comment is an insult (AUC).\n")
    (root / cid / "config.yaml").write_text(yaml.safe_dump({
        "id": cid, "name": "Detecting Insults in Social Commentary", "competition_type": "simple",
        "awards_medals": True,
        "dataset": {"answers": f"{cid}/prepared/private/test.csv",
                    "sample_submission": f"{cid}/prepared/public/sample_submission_null.csv"},
        "grader": {"name": "auc-roc"},
    }))


def test_a_competition_whose_id_column_is_not_first_runs_end_to_end(prefect_server, tmp_path):
    """Issue 14: detecting-insults' layout (id ``Comment`` last, target ``Insult`` first, ``Date``
    neither, sample file ``sample_submission_null.csv``) runs through the flow; programs read the
    real sample file, submissions keep or drop ``Date`` freely, and the grade is valid."""
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.competition import load_competition

    cid = "detecting-insults-in-social-commentary"
    data = tmp_path / "data"
    _insults_layout(data, cid)
    competition = load_competition(cid, data)
    assert (competition.id_column, competition.target_columns) == ("Comment", ["Insult"])
    run_dir = tmp_path / "insults-run"
    summary = two_phase_evo(competition_id=cid, data_dir=str(data), run_dir=str(run_dir), model="offline",
                            max_steps=3, seed=0, parallel_workers=2)
    nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
    assert any(not n["dead"] and not n["is_buggy"] for n in nodes), [n["exc_info"] for n in nodes]
    assert "sample_submission_null.csv" in (run_dir / "nodes" / nodes[0]["id"] / "solution.py").read_text()
    report = json.loads((run_dir / "grade_report.json").read_text())
    assert report["valid_submission"] is True and report["score"] == summary["grade_report"]["score"]
    assert report["score"] > 0.9, "the comments carry the label: a text model separates them"


def test_competition_files_read_in_place_from_an_mlebench_checkout(prefect_server, tmp_path, caplog):
    """Issue 14: data prepared as `mlebench prepare` leaves it (no config.yaml beside it) plus
    `--mlebench-repo` / `mlebench_repo`: config.yaml, description and leaderboard.csv come from
    `<repo>/mlebench/competitions/<id>/`; the medal thresholds equal MLE-bench's rank_score; with a
    Git LFS pointer there, the run says to `git lfs pull` and the thresholds are null (NaN)."""
    import numpy as np
    import pandas as pd

    from flows.two_phase_evo import two_phase_evo
    from mlebench_reference import competition_report_from_dict, mlebench_rank_score

    staging = tmp_path / "staging"
    prepare_competition("sklearn-wine", None, staging)
    data = tmp_path / "data"
    shutil.copytree(staging / "sklearn-wine" / "prepared", data / "wine-mle" / "prepared")
    (data / "wine-mle" / "prepared" / "public" / "description.md").unlink(missing_ok=True)
    upstream = tmp_path / "mle-bench" / "mlebench" / "competitions" / "wine-mle"
    upstream.mkdir(parents=True)
    (upstream / "config.yaml").write_text(yaml.safe_dump({
        "id": "wine-mle", "name": "Wine (MLE-bench layout)", "competition_type": "simple", "awards_medals": True,
        "description": "mlebench/competitions/wine-mle/description.md",
        "dataset": {"answers": "wine-mle/prepared/private/test.csv",
                    "sample_submission": "wine-mle/prepared/public/sample_submission.csv"},
        "grader": {"name": "multi-class-log-loss", "grade_fn": "mlebench.competitions.wine-mle.grade:grade"},
    }))
    (upstream / "description.md").write_text("# Wine cultivars, from the checkout\n\nPredict the cultivar.\n")
    scores = list(np.linspace(0.01, 2.0, 40)) + [None, None]  # lower is better, 2 empty rows at the bottom
    pd.DataFrame({"teamName": [f"t{i}" for i in range(42)], "score": scores}).to_csv(upstream / "leaderboard.csv",
                                                                                     index=False)
    repo = str(tmp_path / "mle-bench")

    run_dir = tmp_path / "run"
    two_phase_evo(competition_id="wine-mle", data_dir=str(data), run_dir=str(run_dir), model="offline",
                  max_steps=2, seed=0, parallel_workers=2, mlebench_repo=repo)
    line = json.loads((run_dir / "mlebench_submission.jsonl").read_text())  # `mlebench grade --submission`
    assert line == {"competition_id": "wine-mle", "submission_path": str((run_dir / "submission" / "submission.csv").resolve())}
    report = json.loads((run_dir / "grade_report.json").read_text())
    expected = mlebench_rank_score(report["score"], pd.read_csv(upstream / "leaderboard.csv"))
    for key in ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold", "gold_medal",
                "silver_medal", "bronze_medal", "above_median", "is_lower_better"):
        assert report[key] == expected[key], key
    assert "from the checkout" in (run_dir / "nodes").joinpath(
        json.loads((run_dir / "journal.json").read_text())["nodes"][0]["id"], "prompt-draft.md").read_text()

    (upstream / "leaderboard.csv").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab12\nsize 99\n")
    with caplog.at_level("WARNING"):
        two_phase_evo(competition_id="wine-mle", data_dir=str(data), run_dir=str(tmp_path / "run2"), model="offline",
                      max_steps=1, seed=0, mlebench_repo=repo)
    assert "run `git lfs pull` in" in caplog.text
    text = (tmp_path / "run2" / "grade_report.json").read_text()
    assert '"gold_threshold": NaN' in text
    loaded = competition_report_from_dict(json.loads(text))  # MLE-bench loads it
    assert np.isnan(loaded["gold_threshold"]) and loaded["any_medal"] is False


def test_a_wrong_mlebench_checkout_is_bad_input(tmp_path, capsys):
    from swarm_evo.cli.commands import main as cli_main

    for command in (["run", "--competition-id", "wine-mle", "--data-dir", str(tmp_path)],
                    ["grade", "--competition-id", "wine-mle", "--data-dir", str(tmp_path), str(tmp_path / "s.csv")]):
        assert cli_main([*command, "--mlebench-repo", str(tmp_path / "not-a-checkout")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "has no mlebench/competitions/" in err, err
