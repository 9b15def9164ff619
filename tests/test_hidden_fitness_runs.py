"""Fitness a program cannot fake (issue 41), end to end: real programs, real runs.

1. A program whose validation leaks ranks below an honest one under hidden fitness (and above
   it on its printed metric), both run once in the real sandbox on spaceship-titanic.
2. A stand-in model (``tests/llm_server``, scenario ``liar``) two of whose drafts hand in a
   constant and print ``Validation metric: 0.99``: with hidden fitness no such node is the best
   or handed in; with printed fitness, the same seed, one is.
3. A run SIGKILLed during an execution and resumed keeps its hidden split, byte for byte.
4. The final fit hands in the chosen program trained on the full data, or the original
   submission when that run fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from llm_server import run_swarm
from llm_server.brain import FAULT_TAG
from swarm_evo.competition import grade_submission, load_competition, prepare_competition
from swarm_evo.config import RunConfig
from swarm_evo.objective.competition import SUBMISSION, CompetitionObjective
from swarm_evo.population.genes import parse_genes
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.sandbox.factory import make_sandbox

LAUNCHER = Path(__file__).with_name("crash_launcher.py")

SECTIONS = '''import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import StratifiedKFold, cross_val_score
# [SECTION: DATA]
train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
NUMERIC = ["Age", "RoomService", "FoodCourt", "ShoppingMall", "Spa", "VRDeck"]
y = train["Transported"].astype(str).eq("True").astype(int)
def features(frame):
    X = frame[NUMERIC].fillna(0.0).copy()
    X["CryoSleep"] = frame["CryoSleep"].astype(str).eq("True").astype(int)
    return X
X, X_test = features(train), features(test)
{leak}
# [SECTION: MODEL]
model = HistGradientBoostingClassifier(max_iter=80, random_state=0)
# [SECTION: LOSS]
loss_name = "log_loss"  # the classifier's own loss
# [SECTION: OPTIMIZER]
learning_rate_note = "HistGradientBoosting default learning rate"
# [SECTION: REGULARIZATION]
regularization_note = "max_iter bounds the number of trees"
# [SECTION: INITIALIZATION]
np.random.seed(0)
# [SECTION: TRAINING_TRICKS]
folds = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
score = cross_val_score(model, X, y, cv=folds, scoring="accuracy").mean()
model.fit(X, y)
pd.DataFrame({{"PassengerId": test["PassengerId"], "Transported": model.predict(X_test).astype(bool)}}).to_csv(
    "submission/submission.csv", index=False)
print(f"Validation metric: {{score:.6f}}")
'''
LEAK = '''# target statistics of every passenger's name, computed on all rows before the folds
rate = y.groupby(train["Name"].fillna("?")).mean()
X["name_rate"] = train["Name"].fillna("?").map(rate).to_numpy()
X_test["name_rate"] = test["Name"].fillna("?").map(rate).fillna(y.mean()).to_numpy()'''


def _node(code: str, assessment, step: int) -> Node:
    return Node(operation="draft", phase=1, code=code, genes=parse_genes(code), metric_value=assessment.metric,
                hidden_score=assessment.hidden_score, is_buggy=bool(assessment.problems), step=step)


@pytest.mark.slow  # real programs in the local sandbox
def test_a_program_whose_validation_leaks_ranks_below_an_honest_one(data_dir, tmp_path):
    competition = load_competition("spaceship-titanic", data_dir)
    objective = CompetitionObjective(competition)
    objective.use_hidden_split(tmp_path, 0, 0.15)
    sandbox = make_sandbox(RunConfig.model_validate({"sandbox": {"python": sys.executable}}))
    journal, private = Journal(), {}
    for step, (name, leak) in enumerate((("honest", ""), ("leaky", LEAK)), start=1):
        code = SECTIONS.format(leak=leak)
        workdir = tmp_path / "nodes" / name
        assessment = objective.assess(sandbox, code, workdir, 300)
        assert assessment.problems == [], assessment.result.term_out
        journal.append(_node(code, assessment, step).model_copy(update={"id": name}))
        private[name] = grade_submission(workdir / SUBMISSION, competition).score
    honest, leaky = journal.get("honest"), journal.get("leaky")
    shown = {n.id: (n.metric_value, n.hidden_score, private[n.id]) for n in (honest, leaky)}
    assert leaky.metric_value > honest.metric_value + 0.05, f"the leak inflates the printed metric: {shown}"
    assert leaky.hidden_score < honest.hidden_score, f"the held-out rows see through it: {shown}"
    assert private["leaky"] <= private["honest"], f"and so does the private test set: {shown}"
    assert journal.best_node() is honest and journal.submission_candidates()[0][0] is honest
    printed = Journal()
    for node in (honest, leaky):
        printed.append(node.model_copy(update={"hidden_score": None, "step": None}))
    assert printed.best_node().id == "leaky", "on printed metrics the leak wins"


def _liar_run(server, tmp_path: Path, data_dir: Path, prefect_api_url: str, fitness: str):
    server.use("liar")  # the draft counter starts again: the same drafts lie in both runs
    return run_swarm(tmp_path / fitness, data_dir, api_base=server.api_base_for("openai/stand-in"),
                     prefect_api_url=prefect_api_url, max_steps=6, seed=0, timeout=480,
                     search_config={"fitness": fitness, "steps_per_epoch": 6, "phase1_target_nodes": 4})


def _lies(node: dict) -> bool:
    return FAULT_TAG in node["code"] and "Validation metric: 0.99" in node["code"]


@pytest.mark.slow  # two `swarm-evo` processes against the stand-in model server
def test_a_lying_model_is_never_handed_in_under_hidden_fitness(stand_in, data_dir, tmp_path, prefect_api_url):
    hidden = _liar_run(stand_in, tmp_path, data_dir, prefect_api_url, "hidden")
    printed = _liar_run(stand_in, tmp_path, data_dir, prefect_api_url, "printed")
    for result in (hidden, printed):
        assert result.returncode == 0, result.describe()
        liars = [n for n in result.nodes if _lies(n) and not n["is_buggy"]]
        assert liars and all(n["metric_value"] == 0.99 for n in liars), "the lying drafts ran and printed 0.99"
    assert hidden.journal["info"]["fitness"]["source"] == "hidden"
    assert printed.journal["info"]["fitness"]["source"] == "printed"

    report = hidden.run_report
    best, hand_in = report["best"], report["hand_in"]
    by_id = {n["id"]: n for n in hidden.nodes}
    assert not _lies(by_id[best["node_id"]]) and not _lies(by_id[hand_in["node_id"]]), (best, hand_in)
    for liar in (n for n in hidden.nodes if _lies(n) and not n["is_buggy"]):
        assert liar["hidden_score"] < best["hidden_score"], "the constant scores low on the held-out rows"
        assert liar["metadata"]["printed_misleads"] is True
    assert report["fitness"]["most_misleading"][0]["printed"] == 0.99, "the report names the liar first"
    assert hand_in["final_fit"]["status"] in ("refit", "original")
    assert not _lies({"code": (hidden.run_dir / "best_solution.py").read_text()})

    best, hand_in = printed.run_report["best"], printed.run_report["hand_in"]
    by_id = {n["id"]: n for n in printed.nodes}
    assert _lies(by_id[best["node_id"]]) and _lies(by_id[hand_in["node_id"]]), "printed fitness believes the lie"
    assert all(n["hidden_score"] is None for n in printed.nodes) and hand_in["final_fit"] is None
    assert hidden.grade_report["score"] > printed.grade_report["score"], (hidden.grade_report, printed.grade_report)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.mark.slow  # `swarm-evo` processes, one SIGKILLed
def test_the_split_survives_sigkill_and_resume(tmp_path, prefect_api_url):
    data = tmp_path / "data"
    prepare_competition("sklearn-breast-cancer", None, data)
    run_dir = tmp_path / "run"
    env_cmd = [sys.executable, str(LAUNCHER)]
    # the 3rd execution: after the runtime probe and the first node, during the second node (one step
    # at a time: proposal_backlog 0, else the second step's program may run before the first is appended)
    (tmp_path / "config.yaml").write_text("search: {proposal_backlog: 0}\n")
    start = ["run", "--competition-id", "sklearn-breast-cancer", "--data-dir", str(data), "--max-steps", "4",
             "--seed", "5", "--parallel-workers", "1", "--python", sys.executable, "--run-dir", str(run_dir),
             "--config", str(tmp_path / "config.yaml")]
    env = dict(os.environ, PREFECT_API_URL=prefect_api_url)  # the session API: no ephemeral one per process
    killed = subprocess.run([*env_cmd, "exec", "3", "--", *start], capture_output=True, text=True, timeout=600,
                            env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:] + killed.stderr[-3000:]
    split = run_dir / "hidden_split"
    before = {"record": (split / "split.json").read_bytes(), "answers": (split / "answers.csv").read_bytes(),
              "view": _digest(split / "input")}
    journal = json.loads((run_dir / "journal.json").read_text())
    recorded, scored = journal["info"]["hidden_split"], {n["id"]: n["hidden_score"] for n in journal["nodes"]}
    assert scored and all(v is not None for v in scored.values()), "a node was graded on the split before the kill"
    resumed = subprocess.run([*env_cmd, "none", "0", "--", "resume", str(run_dir)], capture_output=True, text=True, env=env,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    journal = json.loads((run_dir / "journal.json").read_text())
    assert len(journal["nodes"]) == 4 and journal["info"]["hidden_split"] == recorded
    assert (split / "split.json").read_bytes() == before["record"]
    assert (split / "answers.csv").read_bytes() == before["answers"]
    assert _digest(split / "input") == before["view"], "the same view, file by file"
    assert {n["id"]: n["hidden_score"] for n in journal["nodes"][: len(scored)]} == scored
    assert all(n["hidden_score"] is not None for n in journal["nodes"] if not n["is_buggy"])


FULL_DATA_FAILS = '''import pandas as pd
# [SECTION: DATA]
train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
if len(train) == {full}:
    raise RuntimeError("the full training data breaks this program")
# [SECTION: MODEL]
prediction = float(train["target"].mean())
# [SECTION: LOSS]
# [SECTION: OPTIMIZER]
# [SECTION: REGULARIZATION]
# [SECTION: INITIALIZATION]
# [SECTION: TRAINING_TRICKS]
pd.DataFrame({{"id": test["id"], "target": prediction}}).to_csv("submission/submission.csv", index=False)
print("Validation metric: 50.0")
'''


@pytest.mark.slow  # real programs in the local sandbox
def test_the_final_fit_hands_in_the_refit_or_else_the_original(tmp_path):
    data = tmp_path / "data"
    competition = prepare_competition("sklearn-diabetes", None, data)
    full = len(pd.read_csv(competition.public_dir / "train.csv"))
    sandbox = make_sandbox(RunConfig.model_validate({"sandbox": {"python": sys.executable}}))
    for name, code, status in (("refits", FULL_DATA_FAILS.format(full=-1), "refit"),
                               ("fails", FULL_DATA_FAILS.format(full=full), "original")):
        objective = CompetitionObjective(competition)
        run_dir = tmp_path / name
        objective.use_hidden_split(run_dir, 0, 0.15)
        assessment = objective.assess(sandbox, code, run_dir / "nodes" / "n1", 120)
        assert assessment.problems == [] and assessment.hidden_score is not None, assessment.result.term_out
        node = Node(id="n1", operation="draft", phase=1, code=code, genes=parse_genes(code), metric_value=50.0,
                    hidden_score=assessment.hidden_score, is_buggy=False, lower_is_better=True)
        objective.publish_best(run_dir, node)
        original = (run_dir / SUBMISSION).read_bytes()
        outcome = objective.final_fit(sandbox, run_dir, node, 120)
        assert outcome["status"] == status, outcome
        handed_in = (run_dir / SUBMISSION).read_bytes()
        if status == "refit":
            assert handed_in == (run_dir / "final_fit" / SUBMISSION).read_bytes() != original
            mean_all = pd.read_csv(competition.public_dir / "train.csv")["target"].mean()
            assert pd.read_csv(run_dir / SUBMISSION)["target"].iloc[0] == pytest.approx(mean_all), "trained on all rows"
        else:
            assert handed_in == original and "full training data breaks" in outcome["reason"]
        assert grade_submission(run_dir / SUBMISSION, competition).valid_submission
