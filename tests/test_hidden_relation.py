"""The hidden split mirrors the competition's own train/test relation (issue 53, item 7).

A synthetic 300-patient table whose test patients are unseen: a random hidden split rewards a
program that encodes each patient's mean target (the leak), a grouped one does not. Both
programs' submissions are graded with the host's HiddenGrader, as a run grades them; no search.
A table whose test dates follow the training dates is split by time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from swarm_evo.competition import load_competition
from swarm_evo.competition.hidden_grading import HiddenGrader
from swarm_evo.competition.hidden_layout import HiddenSplitError, hidden_layout, read_table
from swarm_evo.competition.dates import as_dates
from swarm_evo.competition.hidden_relation import detect_relation
from swarm_evo.competition.hidden_split import SPLIT_DIR, choose_hidden_rows, write_split
from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.objective.competition import SUBMISSION, CompetitionObjective
from swarm_evo.objective.fitness import apply_fitness, choose_fitness


def _competition(root: Path, train: pd.DataFrame, test: pd.DataFrame, answers: pd.DataFrame, grader: str):
    comp = root / "rel"
    public, private = comp / "prepared" / "public", comp / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(public / "test.csv", index=False)
    answers.assign(y=0.0).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    (comp / "config.yaml").write_text(
        "id: rel\nname: Rel\ndataset:\n  answers: rel/prepared/private/test.csv\n"
        f"  sample_submission: rel/prepared/public/sample_submission.csv\ngrader:\n  name: {grader}\n")
    return load_competition("rel", root)


def _patients(root: Path):
    """300 patients, 5 visits each; y = the patient's effect + 0.5·x1 − 0.3·x2 + noise; the
    test holds 60 patients the training table never saw. Ids: a shuffled 0..1499."""
    rng = np.random.default_rng(0)
    patient = np.repeat(np.arange(300), 5)
    effect = rng.normal(0, 1, 300)[patient]
    x1, x2 = rng.normal(0, 1, 1500), rng.normal(0, 1, 1500)
    y = effect + 0.5 * x1 - 0.3 * x2 + rng.normal(0, 0.3, 1500)
    table = pd.DataFrame({"id": rng.permutation(1500), "patient": [f"P{p:03d}" for p in patient],
                          "x1": x1.round(6), "x2": x2.round(6), "y": y.round(6)})
    unseen = table["patient"].isin({f"P{p:03d}" for p in rng.choice(300, 60, replace=False)})
    train, test = table[~unseen], table[unseen]
    competition = _competition(root, train, test.drop(columns="y"), test[["id", "y"]], "root-mean-squared-error")
    return competition, train


def _honest(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """A linear model of y on the features."""
    x = np.c_[np.ones(len(train)), train[["x1", "x2"]].astype(float)]
    coef = np.linalg.lstsq(x, train["y"].astype(float), rcond=None)[0]
    return np.c_[np.ones(len(test)), test[["x1", "x2"]].astype(float)] @ coef


def _leaky(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """Per-patient target encoding: the patient's mean training y, the global mean for a new one."""
    means = train.assign(y=train["y"].astype(float)).groupby("patient")["y"].mean()
    return test["patient"].map(means).fillna(float(train["y"].astype(float).mean())).to_numpy()


def _rmse(truth, guess) -> float:
    return float(np.sqrt(np.mean((np.asarray(truth, float) - np.asarray(guess, float)) ** 2)))


def test_unseen_patients_are_hidden_whole_and_the_leak_does_not_win(tmp_path):
    competition, train = _patients(tmp_path)
    layout = hidden_layout(competition)
    # the premise: rows drawn at random, the patient encoding wins on them (the leak rewarded)
    random_rows, _ = choose_hidden_rows(train.reset_index(drop=True), layout, 0.15, 0)
    held, rest = train.iloc[random_rows], train.drop(train.index[random_rows])
    assert _rmse(held["y"], _leaky(rest, held)) < _rmse(held["y"], _honest(rest, held)) - 0.2

    objective, info = CompetitionObjective(competition), {}
    assert apply_fitness(objective, RunConfig().search, 0, tmp_path / "run", info) == "hidden"
    split = objective.hidden.split
    assert split.relation == "group" and split.group_column == "patient" and info["hidden_split"]["relation"] == "group"
    line = info["fitness"]["why"]  # the one line the run logs at start
    assert "drawn grouped by 'patient'" in line and "0% of the test rows" in line and "\n" not in line, line
    view_train = read_table(split.view_dir / "train.csv")
    view_test = read_table(split.view_dir / "test.csv")
    hidden_patients = set(train[train["id"].astype(str).isin(split.fresh_ids)]["patient"])
    assert not hidden_patients & set(view_train["patient"]), "a hidden patient is hidden whole"

    grader = HiddenGrader(competition, split)
    scores = {}
    for name, program in (("honest", _honest), ("leaky", _leaky)):
        workdir = tmp_path / name
        (workdir / "submission").mkdir(parents=True)
        pd.DataFrame({"id": view_test["id"], "y": program(view_train, view_test)}).to_csv(
            workdir / SUBMISSION, index=False)
        assert grader.program_errors(workdir / SUBMISSION) == []
        scores[name] = grader.split_submission(workdir, SUBMISSION).score
    assert scores["honest"] < scores["leaky"] - 0.1, scores  # RMSE: lower is better


def test_test_dates_after_the_training_dates_split_by_time(tmp_path):
    rng = np.random.default_rng(1)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(np.sort(rng.integers(0, 456, 500)), unit="D")
    table = pd.DataFrame({"id": rng.permutation(500), "date": days.strftime("%Y-%m-%d"),
                          "x": rng.normal(0, 1, 500).round(6), "y": rng.normal(0, 1, 500).round(6)})
    late = table["date"] >= "2021-01-01"
    train, test = table[~late], table[late]
    competition = _competition(tmp_path, train, test.drop(columns="y"), test[["id", "y"]], "root-mean-squared-error")
    split = write_split(competition, tmp_path / "run" / SPLIT_DIR, 0, 0.15)
    assert split.relation == "time" and split.time_column == "date" and "by time on 'date'" in split.relation_why
    hidden = train[train["id"].astype(str).isin(split.fresh_ids)]
    kept = read_table(split.view_dir / "train.csv")
    assert len(hidden) == round(0.15 * len(train)) and hidden["date"].min() >= kept["date"].max()
    again = write_split(competition, tmp_path / "again" / SPLIT_DIR, 5, 0.15)
    assert again.fresh_ids == split.fresh_ids, "the latest rows, whatever the seed"
    named = write_split(competition, tmp_path / "named" / SPLIT_DIR, 0, 0.15, time_column="date")
    assert named.relation == "time" and named.fresh_ids == split.fresh_ids and named.digest == split.digest
    with pytest.raises(HiddenSplitError, match="not a column of the training table holding dates"):
        write_split(competition, tmp_path / "bad" / SPLIT_DIR, 0, 0.15, time_column="x")
    # search.hidden_time_column: checked at start (bad input), recorded, kept by a resumed run
    objective, search = CompetitionObjective(competition), RunConfig().search
    with pytest.raises(ConfigError, match="hidden_time_column 'x' is not a column .* holding dates"):
        choose_fitness(objective, search.model_copy(update={"hidden_time_column": "x"}))
    info: dict = {}
    assert apply_fitness(objective, search.model_copy(update={"hidden_time_column": "date"}), 0,
                         tmp_path / "cfg", info) == "hidden"
    assert info["hidden_split"]["time_column"] == "date" and info["hidden_split"]["digest"] == split.digest
    resumed = CompetitionObjective(competition)
    apply_fitness(resumed, search, 0, tmp_path / "cfg", info)
    assert resumed.hidden.split.time_column == "date"


def test_random_rows_and_dates_that_do_not_follow_stay_random(tmp_path):
    rng = np.random.default_rng(2)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 365, 400), unit="D")
    table = pd.DataFrame({"id": np.arange(400), "date": days.strftime("%Y-%m-%d"),
                          "shop": [f"S{k}" for k in rng.integers(0, 20, 400)], "y": rng.normal(0, 1, 400)})
    test_rows = rng.random(400) < 0.2
    layout_root = _competition(tmp_path, table[~test_rows], table[test_rows].drop(columns="y"),
                               table[test_rows][["id", "y"]], "root-mean-squared-error")
    layout = hidden_layout(layout_root)
    relation = detect_relation(table[~test_rows].astype(str), table[test_rows].drop(columns="y").astype(str), layout)
    assert relation.kind == "random" and "no column's test values are unseen" in relation.why
    assert as_dates(pd.Series(["2020-01-02", "2021/3/4 10:00", ""])) is not None
    assert as_dates(pd.Series(["1999", "2004", "2011"])) is None, "years are numbers, not dates"
