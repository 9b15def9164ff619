"""Medal thresholds for each leaderboard-size band (MLE-bench's rank_score rules), leaderboards
read as MLE-bench reads them (compared with its own rank_score), and Git LFS pointers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlebench_reference import mlebench_rank_score
from swarm_evo.competition import CompetitionError, medal_positions, medal_thresholds
from swarm_evo.competition.leaderboard import leaderboard_is_lower_better, load_leaderboard_scores, rank_score


@pytest.mark.parametrize(
    "n, expected",
    [
        (1, (1, 1, 1)),
        (50, (5, 10, 20)),  # < 100: 10 %, 20 %, 40 %
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),  # 100-249: position 10, 20 %, 40 %
        (200, (10, 40, 80)),
        (250, (10, 50, 100)),  # 250-999: 10 + 0.2 % N, position 50, position 100
        (600, (11, 50, 100)),
        (999, (11, 50, 100)),
        (1000, (12, 50, 100)),  # >= 1000: 10 + 0.2 % N, 5 %, 10 %
        (5000, (20, 250, 500)),
    ],
)
def test_medal_positions_per_band(n, expected):
    assert medal_positions(n) == expected


def test_medal_positions_rejects_empty():
    with pytest.raises(CompetitionError):
        medal_positions(0)


def test_thresholds_higher_is_better_in_file_order():
    scores = [i / 100 for i in range(50, 0, -1)]  # 50 teams, best 0.50 first
    t = medal_thresholds(scores)
    assert (t.gold, t.silver, t.bronze) == (0.46, 0.41, 0.31)  # positions 5, 10, 20
    assert t.median == pytest.approx(0.255)
    assert leaderboard_is_lower_better(scores) is False


def test_thresholds_lower_is_better():
    scores = [float(i) for i in range(1, 301)]  # 300 teams, best 1.0 first
    t = medal_thresholds(scores)
    assert (t.gold, t.silver, t.bronze) == (10.0, 50.0, 100.0)  # 10 + int(0.6) = 10
    assert t.median == 150.5
    assert leaderboard_is_lower_better(scores) is True


def test_rank_score_exclusive_medals_and_median():
    scores = [float(i) for i in range(50, 0, -1)]
    t = medal_thresholds(scores)  # gold 46, silver 41, bronze 31
    gold = rank_score(46.0, t, False)
    assert gold.gold_medal and not gold.silver_medal and gold.any_medal
    silver = rank_score(45.0, t, False)
    assert silver.silver_medal and not silver.gold_medal and not silver.bronze_medal
    bronze = rank_score(31.0, t, False)
    assert bronze.bronze_medal and bronze.above_median
    none = rank_score(20.0, t, False)
    assert not none.any_medal and not none.above_median
    assert not rank_score(None, t, False).above_median
    lower = medal_thresholds(scores[::-1])  # gold 5
    assert rank_score(5.0, lower, True).gold_medal
    assert not rank_score(6.0, lower, True).gold_medal


# ------------------------------------------------- leaderboards read as MLE-bench reads them


def _leaderboards():
    rng = np.random.default_rng(3)
    out = {}
    for n in (1, 7, 50, 99, 100, 180, 250, 640, 1000, 2400):
        high = np.sort(rng.random(n))[::-1]
        out[f"{n} teams, higher better"] = high.tolist()
        out[f"{n} teams, lower better"] = np.sort(rng.random(n) * 10).tolist()
    with_gaps = np.sort(rng.random(120))[::-1].tolist()
    out["120 teams, 6 empty scores at the bottom (a real Kaggle export)"] = with_gaps[:114] + [None] * 6
    out["40 teams, not sorted"] = rng.random(40).tolist()
    out["ties at the thresholds"] = [0.9] * 12 + [0.8] * 20 + [0.7] * 18
    return out


@pytest.mark.parametrize("name", list(_leaderboards()))
def test_thresholds_and_medals_equal_mlebench(tmp_path, name):
    """Our reading of a leaderboard.csv (file order, every row, direction from the order) gives
    MLE-bench's thresholds, direction and medals for scores across the board."""
    scores = _leaderboards()[name]
    path = tmp_path / "leaderboard.csv"
    pd.DataFrame({"teamId": range(len(scores)), "score": scores}).to_csv(path, index=False)
    leaderboard = pd.read_csv(path)  # mlebench.data.get_leaderboard
    ours_scores = load_leaderboard_scores(path)
    ours = medal_thresholds(ours_scores)
    lower = leaderboard_is_lower_better(ours_scores)
    finite = [s for s in scores if s is not None]
    for score in [None, min(finite), max(finite), float(np.median(finite)), *finite[:: max(1, len(finite) // 25)]]:
        expected = mlebench_rank_score(score, leaderboard)
        medals = rank_score(score, ours, lower)
        assert lower == expected["is_lower_better"]
        for key, value in (("gold_threshold", ours.gold), ("silver_threshold", ours.silver),
                           ("bronze_threshold", ours.bronze), ("median_threshold", ours.median)):
            assert value == pytest.approx(expected[key], nan_ok=True), key
        assert medals.model_dump() == {k: expected[k] for k in ("gold_medal", "silver_medal", "bronze_medal",
                                                                 "above_median")}, score


def test_a_git_lfs_pointer_is_reported_never_parsed(data_dir, tmp_path, caplog):
    """MLE-bench's leaderboard.csv files are LFS objects: a checkout without `git lfs pull` has a
    pointer. Grading says how to fetch it and reports the thresholds as absent (null/NaN)."""
    from swarm_evo.competition import grade_submission, load_competition
    from swarm_evo.competition.leaderboard import LeaderboardPointerError

    pointer = tmp_path / "leaderboard.csv"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0f3a\nsize 1234\n")
    with pytest.raises(LeaderboardPointerError, match=r"run `git lfs pull` in"):
        load_leaderboard_scores(pointer)
    competition = load_competition("spaceship-titanic", data_dir).model_copy(update={"leaderboard_path": pointer})
    sample = competition.sample_submission_path
    with caplog.at_level("WARNING"):
        report = grade_submission(sample, competition)
    assert report.valid_submission and report.gold_threshold is None and not report.any_medal
    assert "git lfs pull" in caplog.text
