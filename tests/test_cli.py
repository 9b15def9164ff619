"""The swarm-evo command line: bad input is exit code 2 with a message naming the fix."""

from __future__ import annotations

import json

import pandas as pd

from swarm_evo.cli.commands import main


def test_prepare_and_grade_sklearn_competition(tmp_path, capsys):
    assert main(["prepare", "sklearn-breast-cancer", "--data-dir", str(tmp_path)]) == 0
    public = tmp_path / "sklearn-breast-cancer" / "prepared" / "public"
    sample = pd.read_csv(public / "sample_submission.csv")
    sample.to_csv(tmp_path / "sub.csv", index=False)
    capsys.readouterr()
    assert main(["grade", "--competition-id", "sklearn-breast-cancer", "--data-dir", str(tmp_path),
                 str(tmp_path / "sub.csv")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid_submission"] is True and report["score"] is not None
    for key in ("gold_threshold", "any_medal", "above_median", "is_lower_better", "submission_path", "created_at"):
        assert key in report


def test_unknown_competition_is_exit_2(tmp_path, capsys):
    assert main(["run", "--competition-id", "no-such-comp", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no-such-comp" in err and "config.yaml" in err


def test_unprepared_builtin_names_prepare_command(tmp_path, capsys):
    assert main(["run", "--competition-id", "spaceship-titanic", "--data-dir", str(tmp_path)]) == 2
    assert "swarm-evo prepare spaceship-titanic" in capsys.readouterr().err


def test_bad_config_is_exit_2(tmp_path, capsys):
    main(["prepare", "sklearn-diabetes", "--data-dir", str(tmp_path)])
    cfg = tmp_path / "c.yaml"
    cfg.write_text("search:\n  max_stepz: 3\n")
    capsys.readouterr()
    code = main(["run", "--competition-id", "sklearn-diabetes", "--data-dir", str(tmp_path), "--config", str(cfg)])
    assert code == 2
    assert "max_stepz" in capsys.readouterr().err


def test_missing_api_key_is_exit_2_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    main(["prepare", "sklearn-diabetes", "--data-dir", str(tmp_path)])
    capsys.readouterr()
    code = main(["run", "--competition-id", "sklearn-diabetes", "--data-dir", str(tmp_path),
                 "--model", "openai/gpt-4o-mini", "--run-dir", str(tmp_path / "run")])
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "run").exists(), "nothing is written on bad input"
