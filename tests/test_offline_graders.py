"""Grader facts reach the offline model through its context (issue 43, item 3).

Every grader of swarm_evo/competition/graders.py — MSE, r2, QWK and the column-wise ROC AUC
included, which the offline model's own tables used to miss — gets a small competition of its
kind; the offline model drafts a program from a CTX that carries the grader's facts
(``Grader.facts``: kind, direction, metric) and nothing else of the grader, and the program's
``compute_metric`` — the metric it prints — moves in the grader's direction: better
predictions score lower for a loss, higher otherwise. The slow test runs every program.
"""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from swarm_evo.competition.graders import GRADERS, Grader
from swarm_evo.llm.offline import respond
from swarm_evo.llm.offline.dataset import infer_dataset
from swarm_evo.population import genes as G

N_TRAIN, N_TEST = 150, 40
CLASSES = ["ash", "birch", "cedar"]
METRIC_RE = re.compile(r"^Validation metric:\s*([-+0-9.eE]+|nan|inf)\s*$", re.M)


def _competition(root: Path, grader: Grader) -> dict:
    """A learnable table of ``grader``'s kind in MLE-bench's public layout; the CTX's ``competition``."""
    rng = np.random.default_rng(0)
    n = N_TRAIN + N_TEST
    x = rng.normal(size=(n, 3))
    frame = pd.DataFrame({"id": np.arange(n), "x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2]})
    score = x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.normal(size=n)
    targets = ["target"]
    if grader.kind == "regression":
        frame["target"] = 20 + 5 * score  # positive: RMSLE takes log(1 + y)
        default = 1.0
    elif grader.kind == "ordinal":
        frame["target"] = np.digitize(score, [-1.0, -0.3, 0.3, 1.0])  # grades 0..4
        default = 0
    elif grader.kind == "probability":
        frame["target"] = (score > 0).astype(int)
        default = 0.5
    else:  # label, multiclass_probability: three named classes
        frame["target"] = np.array(CLASSES)[np.digitize(score, [-0.4, 0.4])]
        default = CLASSES[0]
    public = root / grader.name
    public.mkdir(parents=True)
    frame.iloc[:N_TRAIN].to_csv(public / "train.csv", index=False)
    test = frame.iloc[N_TRAIN:]
    test.drop(columns=["target"]).to_csv(public / "test.csv", index=False)
    sample = pd.DataFrame({"id": test["id"].to_numpy()})
    if grader.kind == "multiclass_probability":
        targets = list(CLASSES)
        for c in CLASSES:
            sample[c] = 1 / len(CLASSES)
    else:
        sample["target"] = default
    sample.to_csv(public / "sample_submission.csv", index=False)
    return {"id": f"toy-{grader.name}", "competition_type": "simple", **grader.facts(), "public_dir": str(public),
            "id_column": "id", "target_columns": targets, "sample_submission": str(public / "sample_submission.csv")}


def _draft(competition: dict) -> str:
    ctx = {"purpose": "draft", "seed": 0, "call_key": f"draft-{competition['grader']}", "fault_rate": 0.0,
           "repair_rate": 1.0, "competition": competition, "loci": list(G.LOCI), "draft_history": []}
    reply = respond(ctx).content
    return re.search(r"```python\n(.*?)```", reply, re.S).group(1)


def _compute_metric(code: str, classes: list[str]):
    """The program's own ``compute_metric``, run with numpy and sklearn.metrics as the program has them."""
    tree = ast.parse(code)
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "compute_metric")
    namespace: dict = {"CLASSES": classes}
    exec("import numpy as np\nfrom sklearn.metrics import *", namespace)  # noqa: S102 - the program's own imports
    exec(ast.get_source_segment(code, func), namespace)  # noqa: S102
    return namespace["compute_metric"]


def _predictions(output: str, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(good, poor)`` predictions of encoded targets ``y`` in the space the program predicts."""
    if output == "label":
        return y, (y + 1) % k
    if output == "proba_binary":
        return np.where(y == 1, 0.9, 0.1), np.where(y == 1, 0.2, 0.8)
    if output == "proba_multi":
        good = np.full((len(y), k), 0.05)
        good[np.arange(len(y)), y] = 1 - 0.05 * (k - 1)
        return good, np.roll(good, 1, axis=1)
    return y, y * 1.5 + 3


@pytest.fixture(scope="module")
def competitions(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("graders")
    return {name: _competition(root, grader) for name, grader in GRADERS.items()}


@pytest.mark.parametrize("name", sorted(GRADERS))
def test_the_printed_metric_has_the_graders_direction(name, competitions):
    grader, competition = GRADERS[name], competitions[name]
    info = infer_dataset(competition)
    assert (info.grader_kind, info.lower_is_better, info.metric) == (
        grader.kind, grader.is_lower_better, grader.metric.__name__), "the CTX's facts, not a table"
    assert info.task == ("classification" if grader.traits.classification else "regression")
    code = _draft(competition)
    compute_metric = _compute_metric(code, CLASSES)
    train = pd.read_csv(Path(competition["public_dir"]) / "train.csv")
    if info.task == "regression":
        y, k = train["target"].to_numpy(dtype=float), 0
    else:
        labels = sorted(train["target"].astype(str).unique())
        y, k = train["target"].astype(str).map(labels.index).to_numpy(), len(labels)
    good, poor = _predictions(info.output, y, k)
    better, worse = compute_metric(y, good), compute_metric(y, poor)
    assert math.isfinite(better) and math.isfinite(worse) and better != worse
    assert (better < worse) if grader.is_lower_better else (better > worse), (
        f"{name}: better predictions printed {better}, worse ones {worse}")


def test_a_ctx_without_a_kind_still_gets_a_program(competitions):
    """A hand-written CTX naming only the grader: the kind is guessed from the target (many
    distinct floats: regression), the metric defaults to the task's."""
    competition = {k: v for k, v in competitions["r2-score"].items()
                   if k not in ("grader_kind", "classification", "probabilities", "one_column_per_class",
                                "metric", "metric_kwargs", "non_negative")}
    info = infer_dataset(competition)
    assert (info.task, info.output, info.grader_kind) == ("regression", "value", None)
    assert "return float(np.sqrt(mean_squared_error(y_true, pred)))" in _draft(competition)


@pytest.mark.slow
def test_every_graders_program_runs_and_hands_in_a_gradable_submission(competitions, tmp_path):
    """The drafted programs themselves, run: each prints a finite validation metric and writes a
    submission its grader accepts."""
    failures = []
    for name, grader in sorted(GRADERS.items()):
        competition = competitions[name]
        node = tmp_path / name
        (node / "submission").mkdir(parents=True)
        (node / "input").symlink_to(competition["public_dir"])
        (node / "solution.py").write_text(_draft(competition))
        done = subprocess.run([sys.executable, "solution.py"], cwd=node, capture_output=True, text=True,
                              timeout=300, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
        printed = METRIC_RE.findall(done.stdout)
        if done.returncode != 0 or not printed or not math.isfinite(float(printed[-1])):
            failures.append(f"{name}: exit {done.returncode}, printed {printed}: {done.stderr[-600:]}")
            continue
        sample = pd.read_csv(competition["sample_submission"])
        try:
            grader.check_format(pd.read_csv(node / "submission" / "submission.csv"), sample, "id",
                                competition["target_columns"])
        except Exception as exc:  # noqa: BLE001 - collected, all graders reported at once
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)


def test_the_facts_are_json_values():
    """A CTX travels through litellm's metadata and the run's files as JSON."""
    for grader in GRADERS.values():
        facts = grader.facts()
        assert set(facts) == {"grader", "grader_kind", "classification", "probabilities", "one_column_per_class",
                              "is_lower_better", "metric", "metric_kwargs", "non_negative"}
        assert json.loads(json.dumps(facts)) == facts
