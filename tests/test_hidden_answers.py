"""A split the grader cannot grade never stops a run (issue 53, items 6 and 10).

The case from the issue: a binary AUC competition whose training labels are ``no``/``yes``
while its answers and submissions are 0/1 probabilities. Before issue 53 the layout passed,
every step's hidden grading raised ``CompetitionError`` and the run exited 1 in its first
epoch. Now the host maps labels whose spelling fixes the positive class, checks at start that
the grader grades the hidden answers (else ``auto`` selects on the printed metric, saying why),
and a node whose hidden grading fails on the host's side records it and is never ranked.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from factories import make_node
from swarm_evo.competition import load_competition
from swarm_evo.competition.hidden_split import SPLIT_DIR
from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.objective.competition import SUBMISSION, CompetitionObjective
from swarm_evo.objective.fitness import apply_fitness
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.sandbox.factory import make_sandbox


def _auc_competition(root: Path, labels: list[str]) -> Path:
    """``churn``: 200 training rows (``x`` drives the label), 60 test rows, auc-roc on 0/1 answers."""
    comp = root / "churn"
    public, private = comp / "prepared" / "public", comp / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=260)
    y = (x + rng.normal(scale=0.8, size=260) > 0).astype(int)
    ids = [str(i) for i in rng.permutation(260)]  # train and test ids interleave, as a random split's do
    train_ids, test_ids = ids[:200], ids[200:]
    pd.DataFrame({"id": train_ids, "x": x[:200], "churned": [labels[v] for v in y[:200]]}).to_csv(
        public / "train.csv", index=False)
    pd.DataFrame({"id": test_ids, "x": x[200:]}).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": test_ids, "churned": 0.5}).to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"id": test_ids, "churned": y[200:]}).to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text("# Churn\nPredict the probability that a customer churned.\n")
    (comp / "config.yaml").write_text(
        "id: churn\nname: Churn\ndataset:\n  answers: churn/prepared/private/test.csv\n"
        "  sample_submission: churn/prepared/public/sample_submission.csv\ngrader:\n  name: auc-roc\n")
    return root


def test_no_yes_labels_become_the_graders_answers_and_a_submission_is_graded(tmp_path):
    data = _auc_competition(tmp_path / "data", ["no", "yes"])
    objective = CompetitionObjective(load_competition("churn", data))
    info: dict = {}
    assert apply_fitness(objective, RunConfig().search, 0, tmp_path / "run", info) == "hidden", info
    split = objective.hidden.split
    answers = pd.read_csv(split.answers_path, dtype=str)
    train = pd.read_csv(data / "churn" / "prepared" / "public" / "train.csv", dtype=str).set_index("id")
    original = {fresh: orig for orig, fresh in split.fresh_ids.items()}
    assert set(answers["churned"]) == {"0", "1"}
    assert all(train.loc[original[i], "churned"] == ("yes" if v == "1" else "no")
               for i, v in zip(answers["id"], answers["churned"])), "yes is the positive class"
    # a program's submission: every row the view lists, scored by x
    view_test = pd.read_csv(split.view_dir / "test.csv", dtype={"id": str})
    workdir = tmp_path / "node"
    (workdir / "submission").mkdir(parents=True)
    prob = 1 / (1 + np.exp(-view_test["x"]))
    pd.DataFrame({"id": view_test["id"], "churned": prob}).to_csv(workdir / SUBMISSION, index=False)
    outcome = objective.hidden.split_submission(workdir, SUBMISSION)
    by_id = dict(zip(view_test["id"], prob))
    expected = roc_auc_score(answers["churned"].astype(int), [by_id[i] for i in answers["id"]])
    assert outcome.score == round(expected, 5) and math.isfinite(outcome.score)


@pytest.mark.parametrize("labels, needle", [
    (["cat", "dog"], "no positive class can be read"),
    (["no", "yes"], "no finite score"),  # with one 'yes' in 200 rows the hidden rows hold no positive
])
def test_a_split_the_grader_cannot_grade_falls_back_to_printed_in_one_line(labels, needle, tmp_path, caplog):
    data = _auc_competition(tmp_path / "data", labels)
    if needle == "no finite score":
        train_path = data / "churn" / "prepared" / "public" / "train.csv"
        train = pd.read_csv(train_path, dtype=str)
        train["churned"] = ["yes" if i == 7 else "no" for i in range(len(train))]
        train.to_csv(train_path, index=False)
    objective = CompetitionObjective(load_competition("churn", data))
    info: dict = {}
    with caplog.at_level("WARNING", logger="swarm_evo.objective.fitness"):
        assert apply_fitness(objective, RunConfig().search, 0, tmp_path / "run", info) == "printed"
    why = info["fitness"]["why"]
    assert needle in why and "printed validation metrics" in why, why
    assert [r.getMessage() for r in caplog.records] == [f"fitness: {why}"], "one line says why"
    assert objective.hidden is None and "hidden_split" not in info
    assert not (tmp_path / "run" / SPLIT_DIR).exists(), "no half-made split is left for programs"
    forced = RunConfig().search.model_copy(update={"fitness": "hidden"})
    with pytest.raises(ConfigError, match=f"search.fitness is hidden, but competition churn allows no hidden split.*{needle}"):
        apply_fitness(CompetitionObjective(load_competition("churn", data)), forced, 0, tmp_path / "run2", {})


@pytest.mark.slow  # a real program in the local sandbox
def test_a_hidden_grading_the_host_cannot_do_is_recorded_on_the_node_not_a_crashed_step(tmp_path):
    data = _auc_competition(tmp_path / "data", ["no", "yes"])
    objective = CompetitionObjective(load_competition("churn", data))
    apply_fitness(objective, RunConfig().search, 0, tmp_path / "run", {})
    answers = pd.read_csv(objective.hidden.split.answers_path, dtype=str)
    answers.assign(churned=answers["churned"].map({"1": "yes", "0": "no"})).to_csv(
        objective.hidden.split.answers_path, index=False)  # answers the grader refuses, as before issue 53
    objective.hidden._answers = None
    code = ("import pandas as pd\nt = pd.read_csv('input/test.csv')\n"
            "pd.DataFrame({'id': t['id'], 'churned': 0.5}).to_csv('submission/submission.csv', index=False)\n"
            "print('Validation metric: 0.9')\n")
    sandbox = make_sandbox(RunConfig.model_validate({"sandbox": {"python": sys.executable}}))
    assessment = objective.assess(sandbox, code, tmp_path / "run" / "nodes" / "a", 60)
    assert assessment.problems == [] and assessment.metric == 0.9, "the program did nothing wrong"
    assert assessment.hidden_score is None and "must be binary" in assessment.hidden_error


def test_a_node_without_a_finite_hidden_score_is_never_ranked():
    journal = Journal()
    graded = make_node(metric=0.70, hidden_score=0.71)
    ungraded = make_node(metric=0.99, metadata={"hidden_error": "answers column 'churned' must be binary"})
    undefined = make_node(metric=0.98, hidden_score=float("nan"))
    for node in (ungraded, undefined, graded):
        journal.append(node)
    assert ranking.fitness(ungraded) is None and ranking.fitness(undefined) is None, \
        "never ranked on its printed metric instead"
    assert journal.valid_pool() == [graded] and journal.best_node() is graded
    assert [n for n, _ in journal.submission_candidates()] == [graded]
