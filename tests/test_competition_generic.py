"""A competition known only from MLE-bench folders + config.yaml loads and grades."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from swarm_evo.competition import CompetitionError, grade_submission, load_competition

CONFIG = """\
id: toy-regression
name: Toy Regression
competition_type: simple
awards_medals: true
prizes: null
description: mlebench/competitions/toy-regression/description.md
dataset:
  answers: toy-regression/prepared/private/test.csv
  sample_submission: toy-regression/prepared/public/sample_submission.csv
grader:
  name: mean-absolute-error
  grade_fn: mlebench.competitions.toy-regression.grade:grade
preparer: mlebench.competitions.toy-regression.prepare:prepare
"""


def make_generic(data_dir: Path, config: str = CONFIG) -> Path:
    comp = data_dir / "toy-regression"
    public, private = comp / "prepared" / "public", comp / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    pd.DataFrame({"key": ["a", "b", "c"], "value": [0.0, 0.0, 0.0]}).to_csv(
        public / "sample_submission.csv", index=False
    )
    pd.DataFrame({"key": ["a", "b", "c"], "value": [1.0, 2.0, 3.0]}).to_csv(
        private / "test.csv", index=False
    )
    (public / "description.md").write_text("# Toy\nPredict value.\n")
    (comp / "config.yaml").write_text(config)
    return comp


def test_generic_competition_loads_and_grades(tmp_path):
    make_generic(tmp_path)
    comp = load_competition("toy-regression", tmp_path)
    assert comp.grader.name == "mean-absolute-error" and comp.is_lower_better
    assert comp.id_column == "key" and comp.target_columns == ["value"]
    assert comp.awards_medals and comp.description.startswith("# Toy")
    assert comp.answers_path == tmp_path / "toy-regression/prepared/private/test.csv"
    sub = tmp_path / "sub.csv"
    pd.DataFrame({"key": ["c", "a", "b"], "value": [3.0, 2.0, 2.0]}).to_csv(sub, index=False)
    report = grade_submission(sub, comp)
    assert report.valid_submission and report.score == pytest.approx(1 / 3, abs=1e-5)


def test_generic_config_errors_name_the_field(tmp_path):
    config = yaml.safe_load(CONFIG)
    config["grader"]["name"] = "kappa-42"
    make_generic(tmp_path, yaml.safe_dump(config))
    with pytest.raises(CompetitionError) as err:
        load_competition("toy-regression", tmp_path)
    assert "config.yaml" in str(err.value) and "grader.name" in str(err.value)
    assert "kappa-42" in str(err.value) and "accuracy" in str(err.value)

    del config["dataset"]["answers"]
    config["grader"]["name"] = "accuracy"
    (tmp_path / "toy-regression" / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(CompetitionError, match="missing required field 'dataset.answers'"):
        load_competition("toy-regression", tmp_path)


def test_generic_without_config_explains(tmp_path):
    (tmp_path / "toy-regression" / "prepared" / "public").mkdir(parents=True)
    with pytest.raises(CompetitionError, match="config.yaml not found"):
        load_competition("toy-regression", tmp_path)


def test_generic_missing_sample_submission(tmp_path):
    comp = make_generic(tmp_path)
    (comp / "prepared" / "public" / "sample_submission.csv").unlink()
    with pytest.raises(CompetitionError, match="sample_submission.csv not found"):
        load_competition("toy-regression", tmp_path)


# ------------------------------------------------------------------ checks before a run (issue 7)
def _error(tmp_path) -> str:
    with pytest.raises(CompetitionError) as err:
        load_competition("toy-regression", tmp_path)
    message = str(err.value)
    assert "\n" not in message, "bad-input messages are one line"
    return message


def test_configured_id_column_need_not_be_first(tmp_path):
    config = yaml.safe_load(CONFIG)
    config["dataset"]["id_column"] = "key"
    comp = make_generic(tmp_path, yaml.safe_dump(config))
    sample = comp / "prepared" / "public" / "sample_submission.csv"
    pd.DataFrame({"value": [0.0, 0.0, 0.0], "key": ["a", "b", "c"]}).to_csv(sample, index=False)
    loaded = load_competition("toy-regression", tmp_path)
    assert loaded.id_column == "key" and loaded.target_columns == ["value"]


def test_configured_id_column_missing_names_field_and_columns(tmp_path):
    config = yaml.safe_load(CONFIG)
    config["dataset"]["id_column"] = "row_id"
    comp = make_generic(tmp_path, yaml.safe_dump(config))
    message = _error(tmp_path)
    assert str(comp / "prepared" / "public" / "sample_submission.csv") in message
    assert "'row_id'" in message and "dataset.id_column" in message and "['key', 'value']" in message


def test_answers_ids_compare_like_the_graders(tmp_path):
    comp = make_generic(tmp_path)
    pd.DataFrame({"key": [1, 2, 3], "value": [0.0] * 3}).to_csv(comp / "prepared/public/sample_submission.csv",
                                                                 index=False)
    pd.DataFrame({"key": [3.0, 1.0, 2.0], "value": [1.0] * 3}).to_csv(comp / "prepared/private/test.csv",
                                                                       index=False)
    assert load_competition("toy-regression", tmp_path).id_column == "key"  # 7.0 is id 7


@pytest.mark.parametrize(
    "answers, needles",
    [
        ({"key": ["a", "b", "b"], "value": [1.0] * 3}, ["1 id(s) of the sample submission missing (e.g. 'c')"]),
        ({"key": ["a", "b", "c", "c"], "value": [1.0] * 4}, ["1 duplicated id(s)", "private answers"]),
        ({"id": ["a", "b", "c"], "value": [1.0] * 3}, ["no id column 'key'", "columns found: ['id', 'value']"]),
        ({"key": list("abcdefg"), "value": [1.0] * 7}, ["4 id(s) not in the sample submission (e.g. 'd', 'e', 'f', ...)"]),
    ],
)
def test_answers_with_other_ids_name_file_counts_and_fix(tmp_path, answers, needles):
    comp = make_generic(tmp_path)
    pd.DataFrame(answers).to_csv(comp / "prepared/private/test.csv", index=False)
    message = _error(tmp_path)
    assert message.startswith(str(comp / "prepared/private/test.csv"))
    assert "re-prepare" in message and "mlebench prepare -c toy-regression" in message
    for needle in needles:
        assert needle in message


def test_duplicated_sample_ids(tmp_path):
    comp = make_generic(tmp_path)
    pd.DataFrame({"key": ["a", "a", "c"], "value": [0.0] * 3}).to_csv(comp / "prepared/public/sample_submission.csv",
                                                                      index=False)
    assert "1 duplicated id(s) in column 'key' of the sample submission (e.g. 'a')" in _error(tmp_path)


def test_missing_answers_and_wrong_types_are_one_line(tmp_path):
    comp = make_generic(tmp_path)
    (comp / "prepared/private/test.csv").unlink()
    message = _error(tmp_path)
    assert message.startswith(f"{comp / 'prepared/private/test.csv'} not found (private answers)")
    config = yaml.safe_load(CONFIG)
    config["dataset"]["answers"] = ["a.csv", "b.csv"]
    (comp / "config.yaml").write_text(yaml.safe_dump(config))
    assert "field 'dataset.answers' must be a string" in _error(tmp_path)
    (comp / "config.yaml").write_text("id: toy-regression\ngrader: [unclosed\n")
    assert "invalid YAML" in _error(tmp_path)


def test_declared_target_columns_and_their_errors(tmp_path):
    """``dataset.target_columns`` picks the targets; a column that is not in the sample
    submission (or is the id) is an error naming the field."""
    import yaml

    from swarm_evo.competition import CompetitionError, load_competition

    root = tmp_path / "data"
    public, private = root / "c" / "prepared" / "public", root / "c" / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    (public / "sample_submission.csv").write_text("label,note,key\n0,x,a\n0,y,b\n")
    (private / "answers.csv").write_text("label,note,key\n1,x,a\n0,y,b\n")

    def config(**dataset):
        (root / "c" / "config.yaml").write_text(yaml.safe_dump({
            "id": "c", "name": "c", "competition_type": "simple", "awards_medals": False,
            "dataset": {"answers": "c/prepared/private/answers.csv",
                        "sample_submission": "c/prepared/public/sample_submission.csv", **dataset},
            "grader": {"name": "accuracy"}}))

    config(id_column="key", target_columns=["label"])
    competition = load_competition("c", root)
    assert (competition.id_column, competition.target_columns) == ("key", ["label"])
    config(id_column="key", target_columns="label")
    assert load_competition("c", root).target_columns == ["label"]
    for bad, words in ((["missing"], "target column(s) ['missing']"), (["key"], "target column(s) ['key']"),
                       ([], "must be a column name or a list")):
        config(id_column="key", target_columns=bad)
        with pytest.raises(CompetitionError, match=r"dataset\.target_columns") as err:
            load_competition("c", root)
        assert words in str(err.value)
