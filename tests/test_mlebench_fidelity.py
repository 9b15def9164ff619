"""Grading equal to MLE-bench's, submission by submission (issue 14, part 1).

Each case is a submission file built from the competition's real prepared answers; MLE-bench's
own grading logic (``tests/mlebench_reference``: its ``grade.py`` and ``Grader.__call__``, read
back with its ``read_csv``) says whether it is valid and what it scores, and ``swarm-evo``'s
``grade_submission`` (the path every run and ``swarm-evo grade`` take) must say the same:
both invalid, or both valid with the same score (5 decimals, as MLE-bench rounds).

Run with ``-s`` to print the comparison table (submission -> MLE-bench -> ours).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest

from mlebench_reference import mlebench_score
from swarm_evo.competition import grade_submission, load_competition

TABLE: list[tuple[str, str, str, str]] = []

Case = Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]
"""(answers, sample submission) -> the submission to write."""


def _spaceship_labels(values: Callable[[pd.Series], pd.Series]) -> Case:
    def make(answers: pd.DataFrame, sample: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"PassengerId": answers["PassengerId"], "Transported": values(answers["Transported"])})

    return make


def _random_bits(n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 2, n)


SPACESHIP: dict[str, Case] = {
    "the sample (all False)": lambda a, s: s,
    "perfect, True/False": _spaceship_labels(lambda t: t),
    "perfect, 1/0": _spaceship_labels(lambda t: t.astype(int)),
    "perfect, 1.0/0.0": _spaceship_labels(lambda t: t.astype(float)),
    "perfect, true/false (lower case)": _spaceship_labels(lambda t: t.map({True: "true", False: "false"})),
    "random, 1/0": _spaceship_labels(lambda t: _random_bits(len(t))),
    "random, True/False": _spaceship_labels(lambda t: _random_bits(len(t)).astype(bool)),
    "yes/no": _spaceship_labels(lambda t: t.map({True: "yes", False: "no"})),
    "perfect, an extra column": lambda a, s: a[["PassengerId", "Transported"]].assign(Extra=1),
    "perfect, columns swapped": lambda a, s: a[["Transported", "PassengerId"]],
    "perfect, rows shuffled": lambda a, s: a[["PassengerId", "Transported"]].sample(frac=1, random_state=1),
    "NaN in 3 rows": _spaceship_labels(lambda t: t.astype(object).where(np.arange(len(t)) >= 3, None)),
    "10 rows missing": lambda a, s: a[["PassengerId", "Transported"]].iloc[10:],
    "wrong ids": lambda a, s: a[["PassengerId", "Transported"]].assign(PassengerId=lambda d: d["PassengerId"] + "x"),
    "no Transported column": lambda a, s: a[["PassengerId"]],
}


def _spooky_probs(make: Callable[[np.ndarray], np.ndarray]) -> Case:
    def build(answers: pd.DataFrame, sample: pd.DataFrame) -> pd.DataFrame:
        onehot = answers[["EAP", "HPL", "MWS"]].to_numpy(dtype=float)
        out = pd.DataFrame(make(onehot), columns=["EAP", "HPL", "MWS"])
        out.insert(0, "id", answers["id"].to_numpy())
        return out

    return build


def _confident(onehot: np.ndarray) -> np.ndarray:
    return 0.1 + 0.7 * onehot  # 0.8 on the true class, 0.1 elsewhere


def _wrong_rows(onehot: np.ndarray, n: int = 50) -> np.ndarray:
    out = onehot.copy()
    out[:n] = np.roll(onehot[:n], 1, axis=1)  # one-hot on a wrong class
    return out


def _softmax(onehot: np.ndarray) -> np.ndarray:
    logits = np.random.default_rng(0).normal(size=onehot.shape) + 2 * onehot
    exp = np.exp(logits)
    return exp / exp.sum(axis=1, keepdims=True)


SPOOKY: dict[str, Case] = {
    "the sample (1/3 each)": lambda a, s: s,
    "confident, 0.8/0.1/0.1": _spooky_probs(_confident),
    "one-hot, perfect": _spooky_probs(lambda o: o),
    "one-hot, 50 rows wrong": _spooky_probs(_wrong_rows),
    "softmax probabilities": _spooky_probs(_softmax),
    "softmax rounded to 4 decimals": _spooky_probs(lambda o: np.round(_softmax(o), 4)),
    "rows summing to 1 + 5e-6": _spooky_probs(lambda o: _confident(o) + np.array([5e-6, 0, 0])),
    "rows summing to 1.01": _spooky_probs(lambda o: _confident(o) + np.array([0.01, 0, 0])),
    "a negative probability": _spooky_probs(lambda o: _confident(o) + np.array([-0.2, 0.1, 0.1])),
    "an extra column": lambda a, s: _spooky_probs(_confident)(a, s).assign(extra=0.0),
    "columns in another order": lambda a, s: _spooky_probs(_confident)(a, s)[["id", "MWS", "EAP", "HPL"]],
    "10 rows missing": lambda a, s: _spooky_probs(_confident)(a, s).iloc[10:],
}

CASES = [("spaceship-titanic", name, make) for name, make in SPACESHIP.items()] + [
    ("spooky-author-identification", name, make) for name, make in SPOOKY.items()
]


@pytest.mark.parametrize(("competition_id", "name", "make"), CASES, ids=[f"{c}: {n}" for c, n, _ in CASES])
def test_grade_equals_mlebench(data_dir, tmp_path, competition_id: str, name: str, make: Case):
    competition = load_competition(competition_id, data_dir)
    answers = pd.read_csv(competition.answers_path, float_precision="round_trip")
    sample = pd.read_csv(competition.sample_submission_path, float_precision="round_trip")
    path = tmp_path / "submission.csv"
    make(answers, sample).to_csv(path, index=False)

    submission = pd.read_csv(path, float_precision="round_trip")  # mlebench.utils.read_csv
    expected = mlebench_score(competition_id, submission, answers)
    report = grade_submission(path, competition)
    ours = report.score if report.valid_submission else None
    TABLE.append((competition_id, name, _show(expected), _show(ours) + ("" if ours is not None else f" ({report.error})")))
    if expected is None:
        assert ours is None, f"MLE-bench rejects it; we scored {ours}"
        assert report.error, "an invalid submission says why"
    else:
        assert ours is not None, f"MLE-bench scores {expected}; we rejected it: {report.error}"
        assert ours == pytest.approx(expected, abs=1e-9), (ours, expected)


def _show(score: float | None) -> str:
    return "invalid" if score is None else f"{score:.5f}"




# ------------------------------------------------------------- reports MLE-bench can load


def test_reports_load_with_mlebenchs_from_dict(data_dir, tmp_path, capsys):
    """``grade_report.json``-style JSON and ``swarm-evo grade --jsonl`` load with MLE-bench's
    ``CompetitionReport.from_dict``, with thresholds absent (no leaderboard: NaN, read back as
    None here) and present (a leaderboard.csv)."""
    import json

    from mlebench_reference import competition_report_from_dict
    from swarm_evo.cli.commands import main as cli_main
    from swarm_evo.competition import CompetitionReport

    competition = load_competition("spaceship-titanic", data_dir)
    answers = pd.read_csv(competition.answers_path)
    path = tmp_path / "submission.csv"
    answers[["PassengerId", "Transported"]].to_csv(path, index=False)

    absent = grade_submission(path, competition)
    assert absent.gold_threshold is None
    loaded = competition_report_from_dict(json.loads(absent.to_json(indent=2)))
    assert loaded["score"] == 1.0 and np.isnan(loaded["gold_threshold"]) and loaded["valid_submission"]
    assert CompetitionReport.model_validate(json.loads(absent.to_json())).gold_threshold is None

    leaderboard = tmp_path / "leaderboard.csv"
    pd.DataFrame({"teamName": [f"t{i}" for i in range(20)], "score": np.linspace(0.9, 0.5, 20)}).to_csv(
        leaderboard, index=False)
    present = grade_submission(path, competition.model_copy(update={"leaderboard_path": leaderboard}))
    loaded = competition_report_from_dict(json.loads(present.to_json()))
    assert loaded["gold_threshold"] == present.gold_threshold and loaded["gold_medal"] is True

    assert cli_main(["grade", "--competition-id", "spaceship-titanic", "--data-dir", str(data_dir),
                     str(path), "--jsonl"]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1
    assert competition_report_from_dict(json.loads(out))["valid_submission"] is True


# ------------------------------------------------ MLE-bench lite graders, real column layouts

RNG = np.random.default_rng(7)
N = 60


def _ids(prefix: str) -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(N)]


def _probs(n: int, k: int) -> np.ndarray:
    return RNG.random((n, k))


def _lite_layouts() -> dict[str, tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
    """id -> (MLE-bench grader name, answers, a sample submission, a submission), each in the
    competition's real column layout (MLE-bench's ``prepare.py``)."""
    out = {}
    grades = RNG.integers(0, 5, N)
    out["aptos2019-blindness-detection"] = (
        "quadratic-weighted-kappa",
        pd.DataFrame({"id_code": _ids("a"), "diagnosis": grades}),
        pd.DataFrame({"id_code": _ids("a"), "diagnosis": 0}),
        pd.DataFrame({"id_code": _ids("a"), "diagnosis": np.clip(grades + RNG.integers(-1, 2, N), 0, 4)}),
    )
    pixels = [f"{img}_{r}_{c}" for img in (1, 2) for r in range(1, 6) for c in range(1, 7)]
    out["denoising-dirty-documents"] = (
        "root_mean_squared_error",
        pd.DataFrame({"id": pixels, "value": RNG.random(len(pixels))}),
        pd.DataFrame({"id": pixels, "value": 1.0}),
        pd.DataFrame({"id": pixels, "value": RNG.random(len(pixels))}),
    )
    classes = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
    labels = RNG.integers(0, 2, (N, len(classes)))
    labels[:, 3] = np.arange(N) % 2  # every column has both classes
    labels[::5] = -1  # rows Kaggle did not score
    out["jigsaw-toxic-comment-classification-challenge"] = (
        "column-wise ROC AUC",
        pd.DataFrame(labels, columns=classes).assign(id=_ids("j"))[["id", *classes]],
        pd.DataFrame(0.5, index=range(N), columns=classes).assign(id=_ids("j"))[["id", *classes]],
        pd.DataFrame(_probs(N, len(classes)), columns=classes).assign(id=_ids("j"))[["id", *classes]],
    )
    energy = ["formation_energy_ev_natom", "bandgap_energy_ev"]
    out["nomad2018-predict-transparent-conductors"] = (
        "mean-column-wise-rmsle",
        pd.DataFrame(RNG.random((N, 2)) * [0.5, 5], columns=energy).assign(id=range(1, N + 1))[["id", *energy]],
        pd.DataFrame({"id": range(1, N + 1), energy[0]: 0.1779, energy[1]: 1.8892}),
        pd.DataFrame(RNG.random((N, 2)) * [0.5, 5], columns=energy).assign(id=range(1, N + 1))[["id", *energy]],
    )
    diseases = ["healthy", "multiple_diseases", "rust", "scab"]
    onehot = np.eye(4, dtype=int)[np.arange(N) % 4]
    out["plant-pathology-2020-fgvc7"] = (
        "mean-column-wise-roc-auc",
        pd.DataFrame(onehot, columns=diseases).assign(image_id=_ids("Test_"))[["image_id", *diseases]],
        pd.DataFrame(0.25, index=range(N), columns=diseases).assign(image_id=_ids("Test_"))[["image_id", *diseases]],
        pd.DataFrame(_probs(N, 4), columns=diseases).assign(image_id=_ids("Test_"))[["image_id", *diseases]],
    )
    cover = RNG.integers(1, 8, N)
    out["tabular-playground-series-dec-2021"] = (
        "multi-class-classification-accuracy",
        pd.DataFrame({"Id": range(4_000_000, 4_000_000 + N), "Cover_Type": cover}),
        pd.DataFrame({"Id": range(4_000_000, 4_000_000 + N), "Cover_Type": 2}),
        pd.DataFrame({"Id": range(4_000_000, 4_000_000 + N), "Cover_Type": np.where(RNG.random(N) < 0.6, cover, 3)}),
    )
    cats = RNG.integers(0, 2, N)
    hard = np.where(RNG.random(N) < 0.9, cats, 1 - cats).astype(float)  # 0/1 predictions, 10 % wrong
    out["dogs-vs-cats-redux-kernels-edition"] = (
        "log-loss",
        pd.DataFrame({"id": range(1, N + 1), "label": cats}),
        pd.DataFrame({"id": range(1, N + 1), "label": 0.5}),
        pd.DataFrame({"id": range(1, N + 1), "label": hard}),
    )
    keys = [f"2015-01-27 13:08:24.00000{i:02d}" for i in range(N)]
    out["new-york-city-taxi-fare-prediction"] = (
        "root-mean-squared-error",
        pd.DataFrame({"key": keys, "fare_amount": RNG.random(N) * 30}),
        pd.DataFrame({"key": keys, "fare_amount": 11.35}),
        pd.DataFrame({"key": keys, "fare_amount": RNG.random(N) * 30}),
    )
    insult = RNG.integers(0, 2, N)
    comments = [f'"comment number {i} {"you idiot" if t else "thank you"}"' for i, t in enumerate(insult)]
    dates = [f"20120{1 + i % 9}0{1 + i % 9}120000Z" if i % 5 else None for i in range(N)]
    out["detecting-insults-in-social-commentary"] = (
        "auc-roc",
        pd.DataFrame({"Insult": insult, "Date": dates, "Comment": comments}),
        pd.DataFrame({"Insult": 0, "Date": dates, "Comment": comments}),
        pd.DataFrame({"Insult": np.clip(insult * 0.6 + RNG.random(N) * 0.5, 0, 1), "Date": dates,
                      "Comment": comments}),
    )
    words = np.array(["twenty", "1", "1.0", "Mr.", "true", "ten thousand", "false", "e"], dtype=object)
    after = words[RNG.integers(0, len(words), N)]
    guess = np.where(RNG.random(N) < 0.5, after, np.char.upper(after.astype(str)).astype(object))
    guess = np.where(after == "1", "1.0", guess)  # "1.0" is not "1" in an exact match
    ids = [f"{i // 10}_{i % 10}" for i in range(N)]
    out["text-normalization-challenge-english-language"] = (
        "accuracy",
        pd.DataFrame({"id": ids, "after": after}),
        pd.DataFrame({"id": ids, "after": "<self>"}),
        pd.DataFrame({"id": ids, "after": guess}),
    )
    return out


LITE = _lite_layouts()


@pytest.mark.parametrize("competition_id", list(LITE))
def test_mlebench_lite_grader_on_its_real_column_layout(tmp_path, competition_id):
    import yaml

    grader_name, answers, sample, submission = LITE[competition_id]
    root = tmp_path / "data"
    public, private = root / competition_id / "prepared" / "public", root / competition_id / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    answers.to_csv(private / "answers.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    (root / competition_id / "config.yaml").write_text(yaml.safe_dump({
        "id": competition_id, "name": competition_id, "competition_type": "simple", "awards_medals": True,
        "dataset": {"answers": f"{competition_id}/prepared/private/answers.csv",
                    "sample_submission": f"{competition_id}/prepared/public/sample_submission.csv"},
        "grader": {"name": grader_name, "grade_fn": f"mlebench.competitions.{competition_id}.grade:grade"},
    }))
    competition = load_competition(competition_id, root)
    assert competition.grader.name == grader_name
    for name, frame in (("a submission", submission), ("the sample", sample), ("10 rows missing", submission.iloc[10:])):
        path = tmp_path / "submission.csv"
        frame.to_csv(path, index=False)
        read = pd.read_csv(path, float_precision="round_trip")
        expected = mlebench_score_of(competition_id, read, pd.read_csv(private / "answers.csv", float_precision="round_trip"))
        report = grade_submission(path, competition)
        ours = report.score if report.valid_submission else None
        TABLE.append((competition_id, f"{name} ({grader_name})", _show(expected), _show(ours)))
        if expected is None:
            assert ours is None, (name, ours)
        else:
            assert ours == pytest.approx(expected, abs=1e-9), (name, ours, expected, report.error)


def mlebench_score_of(competition_id: str, submission: pd.DataFrame, answers: pd.DataFrame) -> float | None:
    """MLE-bench's outcome, where its grade function itself fails on a bad answer (an
    AssertionError in jigsaw for a short submission) counted as invalid, as Grader.__call__ does."""
    return mlebench_score(competition_id, submission, answers)


def test_zz_print_the_table():  # runs last in this module: the comparison table (-s)
    print("\n| competition | submission | MLE-bench | swarm-evo |\n|---|---|---|---|")
    for row in TABLE:
        print("| " + " | ".join(row) + " |")
