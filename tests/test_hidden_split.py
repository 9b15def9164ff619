"""The hidden validation split (issue 41): how it is cut, what a program can and cannot read, the
host's grading of it, and ranking on it.

Real competitions (the sklearn built-ins; spaceship-titanic and spooky from ../shared through
the ``data_dir`` fixture), real graders and MLE-bench's own grading logic
(``tests/mlebench_reference``); programs run in the real local sandbox.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from factories import make_node, program
from mlebench_reference import mlebench_score
from swarm_evo.competition import CompetitionError, load_competition, prepare_competition, validate_submission
from swarm_evo.competition.hidden_grading import HiddenGrader
from swarm_evo.competition.hidden_layout import HiddenSplitError
from swarm_evo.competition.hidden_split import SPLIT_DIR, write_split
from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.learning.quality import node_quality
from swarm_evo.objective.competition import SUBMISSION, CompetitionObjective
from swarm_evo.objective.fitness import apply_fitness, choose_fitness
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.search.pheromone import build_gene_pools
from swarm_evo.search.selection import tournament_select

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def builtins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hidden-data")
    for cid in ("sklearn-breast-cancer", "sklearn-wine", "sklearn-digits-images"):
        prepare_competition(cid, None, root)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _split(competition_id: str, data: Path, run_dir: Path, seed: int = 0):
    competition = load_competition(competition_id, data)
    return competition, write_split(competition, run_dir / SPLIT_DIR, seed, 0.15)


# ------------------------------------------------------------------ the split itself
def test_the_split_is_seeded_stratified_and_the_same_when_drawn_again(builtins, tmp_path):
    competition, first = _split("sklearn-wine", builtins, tmp_path / "a")
    _, again = _split("sklearn-wine", builtins, tmp_path / "b")
    _, other = _split("sklearn-wine", builtins, tmp_path / "c", seed=1)
    assert first.digest == again.digest and first.fresh_ids == again.fresh_ids
    assert _files(first.root) == {k: v for k, v in _files(again.root).items()}, "same bytes, file by file"
    assert other.digest != first.digest, "another seed draws another split"
    train = pd.read_csv(competition.public_dir / "train.csv")
    assert first.rows == round(0.15 * len(train)) and first.train_rows == len(train) and first.stratified
    hidden = train[train["id"].astype(str).isin(first.fresh_ids)]
    shares = hidden["target"].value_counts(normalize=True)
    for cls, share in train["target"].value_counts(normalize=True).items():
        assert abs(shares.get(cls, 0.0) - share) < 0.05, f"class {cls} keeps its share in the hidden rows"
    answers = pd.read_csv(first.answers_path)
    assert list(answers.columns) == ["id", *competition.target_columns], "one-hot, as the private answers"
    assert (answers[competition.target_columns].sum(axis=1) == 1).all()


def test_nothing_in_the_view_holds_the_hidden_labels(builtins, tmp_path):
    competition, split = _split("sklearn-breast-cancer", builtins, tmp_path)
    view = split.view_dir
    original, fresh = set(split.fresh_ids), set(split.fresh_ids.values())
    train = pd.read_csv(view / "train.csv", dtype=str)
    assert not set(train["id"]) & (original | fresh), "no hidden row is left in the training table"
    test = pd.read_csv(view / "test.csv", dtype=str)
    assert "target" not in test.columns and fresh <= set(test["id"])
    answers_text = split.answers_path.read_text()
    assert all(path.read_bytes() != answers_text.encode() for path in view.rglob("*") if path.is_file())
    assert not any(path.name in ("answers.csv", "split.json") for path in view.rglob("*"))
    # a hidden row keeps its own id (issue 53, item 4: another row's id broke the id's tie to the row's features)
    assert all(split.fresh_ids[i] == i for i in split.fresh_ids) and fresh == original


@pytest.mark.slow  # a real program in the local sandbox
def test_a_program_in_the_sandbox_cannot_read_the_hidden_answers(builtins, tmp_path):
    from swarm_evo.sandbox.factory import make_sandbox

    competition, split = _split("sklearn-breast-cancer", builtins, tmp_path / "run")
    hunt = f"""
import os
for path in ({str(split.answers_path)!r}, {str(split.root / 'split.json')!r}, '../../hidden_split/answers.csv',
             os.path.join(os.path.realpath('input'), '..', 'answers.csv')):
    try:
        open(path).read()
        print('READ', path)
    except OSError as exc:
        print('DENIED', path, type(exc).__name__)
print('INPUT', sorted(os.listdir('input')))
"""
    sandbox = make_sandbox(RunConfig.model_validate({"sandbox": {"python": sys.executable}}))
    workdir = tmp_path / "run" / "nodes" / "hunter"
    result = sandbox.execute(hunt, workdir, split.view_dir, 60)
    assert result.exc_type is None, result.term_out
    assert "READ" not in result.stdout and result.stdout.count("DENIED") == 4, result.stdout
    assert "answers.csv" not in result.stdout.split("INPUT", 1)[1]


def _digit_form(value: str) -> str:
    return re.sub(r"\d", "9", value)


def test_hidden_rows_cannot_be_told_from_test_rows(data_dir, tmp_path):
    """Position, id pattern, order (spaceship-titanic's test table)."""
    competition, split = _split("spaceship-titanic", data_dir, tmp_path)
    test = pd.read_csv(split.view_dir / "test.csv", dtype=str)
    sample = pd.read_csv(split.view_dir / "sample_submission.csv", dtype=str)
    assert test["PassengerId"].tolist() == sample["PassengerId"].tolist(), "the sample lists the test rows in order"
    is_hidden = test["PassengerId"].isin(set(split.fresh_ids.values())).to_numpy()
    real = pd.read_csv(competition.public_dir / "test.csv", dtype=str)
    assert is_hidden.sum() == split.rows and (~is_hidden).sum() == len(real)
    positions = np.flatnonzero(is_hidden) / len(test)
    assert positions.min() < 0.02 and positions.max() > 0.98 and 0.45 < positions.mean() < 0.55, "spread over the file"
    runs = np.count_nonzero(np.diff(is_hidden.astype(int)))
    assert runs > len(test) / 4, "interleaved, not in blocks"
    assert {_digit_form(i) for i in test["PassengerId"][is_hidden]} == {_digit_form(i) for i in real["PassengerId"]}
    assert set(test.columns) == set(real.columns) and list(test.columns) == list(real.columns)
    stamps = {os.stat(split.view_dir / name).st_mtime for name in ("train.csv", "test.csv", "sample_submission.csv")}
    assert len(stamps) == 1, "one modification time for every file written"


def test_hidden_images_cannot_be_told_from_test_images(builtins, tmp_path):
    """File name, file time, creation order (inodes) of an image competition's test folder."""
    competition, split = _split("sklearn-digits-images", builtins, tmp_path)
    folder = split.view_dir / "test"
    names = sorted(os.listdir(folder))
    fresh = {f"{i}.png" for i in split.fresh_ids.values()}
    assert fresh <= set(names) and len(names) == split.rows + len(os.listdir(competition.public_dir / "test"))
    assert not {f"{i}.png" for i in split.fresh_ids} & set(os.listdir(split.view_dir / "train")) - fresh
    assert {Path(n).suffix for n in names} == {".png"} and all(re.fullmatch(r"\d+\.png", n) for n in names)
    stats = {n: os.stat(folder / n) for n in names}
    assert len({s.st_mtime for s in stats.values()}) == 1, "one modification time"
    by_inode = sorted(names, key=lambda n: stats[n].st_ino)
    ranks = np.array([k for k, n in enumerate(by_inode) if n in fresh]) / len(names)
    assert 0.4 < ranks.mean() < 0.6, "the hidden files were not written after (or before) the real ones"
    # a hidden image is a training image under its fresh name
    original = next(i for i, f in split.fresh_ids.items())
    assert (folder / f"{split.fresh_ids[original]}.png").read_bytes() == (
        competition.public_dir / "train" / f"{original}.png").read_bytes()


# ------------------------------------------------------------------ grading
@pytest.mark.parametrize("competition_id", ["spaceship-titanic", "spooky-author-identification"])
def test_hidden_score_equals_mlebench_grade_on_the_same_rows(competition_id, data_dir, tmp_path):
    competition, split = _split(competition_id, data_dir, tmp_path)
    grader = HiddenGrader(competition, split)
    sample = pd.read_csv(grader.view.sample_submission_path)
    rng = np.random.default_rng(5)
    if competition_id == "spaceship-titanic":
        sample["Transported"] = rng.integers(0, 2, len(sample)).astype(bool)
    else:
        probs = rng.dirichlet([1, 1, 1], len(sample))
        sample[["EAP", "HPL", "MWS"]] = probs
    workdir = tmp_path / "node"
    (workdir / "submission").mkdir(parents=True)
    sample.to_csv(workdir / SUBMISSION, index=False)
    assert grader.program_errors(workdir / SUBMISSION) == []
    written = pd.read_csv(workdir / SUBMISSION, float_precision="round_trip")
    answers = pd.read_csv(split.answers_path, float_precision="round_trip")
    id_col = competition.id_column
    hidden_rows = written[written[id_col].astype(str).isin(set(answers[id_col].astype(str)))]
    outcome = grader.split_submission(workdir, SUBMISSION)
    assert outcome.score == round(mlebench_score(competition_id, hidden_rows.reset_index(drop=True), answers), 5)
    assert outcome.hidden_rows == split.rows
    assert validate_submission(workdir / SUBMISSION, competition) == [], "the real rows are the competition's submission"
    assert outcome.real_rows == len(pd.read_csv(competition.sample_submission_path))


# ------------------------------------------------------------------ resume, data changes
def test_a_split_killed_while_written_is_written_again_the_same(builtins, tmp_path):
    competition = load_competition("sklearn-digits-images", builtins)
    objective = CompetitionObjective(competition)
    split = objective.use_hidden_split(tmp_path, 4, 0.15)
    files = _files(split.root)
    record = split.record()
    (split.root / "split.json").unlink()  # killed before the record was written, half a view beside it
    os.rename(split.view_dir, split.root / ".input.building")
    for path in list((split.root / ".input.building" / "test").iterdir())[::2]:
        path.unlink()
    again = CompetitionObjective(competition).use_hidden_split(tmp_path, 4, 0.15, recorded=record)
    assert again.digest == record["digest"] and _files(again.root) == files
    assert not (split.root / ".input.building").exists()
    other = CompetitionObjective(load_competition("sklearn-wine", builtins))
    with pytest.raises(CompetitionError, match="differs from the one this run began with"):
        other.use_hidden_split(tmp_path / "wine", 4, 0.15, recorded=record)
    old = {k: v for k, v in record.items() if k not in ("relation", "time_column", "relation_why", "resolution")}
    old["digest"] = "0" * 64  # a run begun before issue 53: fresh ids, another digest, no relation recorded
    with pytest.raises(CompetitionError, match="older than issue 53"):
        CompetitionObjective(competition).use_hidden_split(tmp_path, 4, 0.15, recorded=old)


# ------------------------------------------------------------------ where it applies
def _own_competition(root: Path, with_train: bool) -> Path:
    """A competition in MLE-bench's layout: sample + answers, and a training table or not."""
    comp = root / "own-comp"
    (comp / "prepared" / "public").mkdir(parents=True)
    (comp / "prepared" / "private").mkdir(parents=True)
    ids = [f"T{i}" for i in range(30)]
    pd.DataFrame({"key": ids, "y": 0.5}).to_csv(comp / "prepared" / "public" / "sample_submission.csv", index=False)
    pd.DataFrame({"key": ids, "y": 1.0}).to_csv(comp / "prepared" / "private" / "test.csv", index=False)
    pd.DataFrame({"key": ids, "x": range(30)}).to_csv(comp / "prepared" / "public" / "test.csv", index=False)
    if with_train:
        pd.DataFrame({"key": [f"R{i}" for i in range(100)], "x": range(100), "y": 1.0}).to_csv(
            comp / "prepared" / "public" / "train.csv", index=False)
    (comp / "config.yaml").write_text(
        "id: own-comp\nname: Own\ndataset:\n  answers: own-comp/prepared/private/test.csv\n"
        "  sample_submission: own-comp/prepared/public/sample_submission.csv\ngrader:\n  name: mean-absolute-error\n")
    return root


def test_fitness_source_follows_the_layout_and_the_key(builtins, tmp_path):
    own = _own_competition(tmp_path / "own", with_train=False)
    objective = CompetitionObjective(load_competition("own-comp", own))
    auto = RunConfig().search
    source, why = choose_fitness(objective, auto)
    assert source == "printed" and "no training table" in why and "own-comp" in why
    with pytest.raises(ConfigError, match=r"search.fitness is hidden, but competition own-comp allows no hidden "
                                          r"split: no training table"):
        choose_fitness(objective, auto.model_copy(update={"fitness": "hidden"}))
    differ = CompetitionObjective(load_competition("own-comp", _own_competition(tmp_path / "differ", True)))
    assert "differ in form" in choose_fitness(differ, auto)[1], "R<n> training ids, T<n> test ids"
    wine = CompetitionObjective(load_competition("sklearn-wine", builtins))
    assert choose_fitness(wine, auto)[0] == "hidden"
    assert choose_fitness(wine, auto.model_copy(update={"fitness": "printed"}))[0] == "printed"
    with pytest.raises(ConfigError, match="hidden_group_column 'nope' is not a column"):
        choose_fitness(wine, auto.model_copy(update={"hidden_group_column": "nope"}))
    info: dict = {}
    assert apply_fitness(wine, auto, 0, tmp_path / "run", info) == "hidden"
    assert info["fitness"]["source"] == "hidden" and info["hidden_split"]["rows"] == 24
    assert wine.public_dir == tmp_path / "run" / SPLIT_DIR / "input"
    resumed = CompetitionObjective(load_competition("sklearn-wine", builtins))
    apply_fitness(resumed, auto.model_copy(update={"hidden_fraction": 0.3}), 9, tmp_path / "run", info)
    assert info["hidden_split"]["rows"] == 24, "a resumed run keeps the split it began with"
    before_issue_41: dict = {}
    older = CompetitionObjective(load_competition("sklearn-wine", builtins))
    assert apply_fitness(older, auto, 0, tmp_path / "old", before_issue_41, nodes=5) == "printed"
    assert older.hidden is None and "hidden_split" not in before_issue_41, "its nodes were ranked on printed metrics"


def test_grouped_split_keeps_groups_whole(builtins, tmp_path):
    competition = load_competition("sklearn-breast-cancer", builtins)
    train = pd.read_csv(competition.public_dir / "train.csv")
    group = (train["id"] // 10).astype(str)
    public = tmp_path / "sklearn-breast-cancer"
    import shutil

    shutil.copytree(competition.data_dir, public)
    train.assign(batch=group).to_csv(public / "prepared" / "public" / "train.csv", index=False)
    test = pd.read_csv(public / "prepared" / "public" / "test.csv")
    test.assign(batch="x").to_csv(public / "prepared" / "public" / "test.csv", index=False)
    grouped = load_competition("sklearn-breast-cancer", tmp_path)
    split = write_split(grouped, tmp_path / "run" / SPLIT_DIR, 0, 0.15, group_column="batch")
    hidden = set(split.fresh_ids)
    for _, ids in train.assign(batch=group).groupby("batch")["id"]:
        inside = {str(i) in hidden for i in ids}
        assert len(inside) == 1, "a group is hidden whole or kept whole"
    with pytest.raises(HiddenSplitError):
        write_split(grouped, tmp_path / "run2" / SPLIT_DIR, 0, 0.15, group_column="no-such-column")


@pytest.mark.slow  # a `swarm-evo` process
def test_forcing_hidden_where_no_split_is_possible_is_bad_input(tmp_path):
    own = _own_competition(tmp_path / "data", with_train=False)
    (tmp_path / "config.yaml").write_text("search: {fitness: hidden}\n")
    proc = subprocess.run([sys.executable, "-m", "swarm_evo.cli", "run", "--competition-id", "own-comp",
                           "--data-dir", str(own), "--config", str(tmp_path / "config.yaml"),
                           "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "own-comp" in line and "no training table" in line and "search.fitness" in line, line
    assert not (tmp_path / "run").exists(), "nothing written"


# ------------------------------------------------------------------ ranking on the hidden score
def test_every_choice_between_nodes_uses_the_hidden_score():
    """A node whose program printed the best metric but whose hidden rows score worst loses
    everywhere the search chooses: best node, hand-in, tournament, gene source, quality."""
    journal = Journal()
    liar = make_node(metric=0.99, hidden_score=0.50, code=program(MODEL="model = liar_model(depth=99)\n"))
    honest = make_node(metric=0.80, hidden_score=0.79)
    middle = make_node(metric=0.85, hidden_score=0.70, code=program(DATA="frame = load_frame(cols=3)\n"))
    for node in (liar, honest, middle):
        journal.append(node)
    assert journal.best_node() is honest
    assert [n for n, _ in journal.submission_candidates()] == [honest, middle, liar]
    assert "hidden-split score" in journal.submission_candidates()[0][1]
    assert tournament_select(journal.valid_pool(), 3, random.Random(0)) is honest
    assert node_quality(journal, honest) == 1.0 and node_quality(journal, liar) == pytest.approx(1 / 3)
    pools = build_gene_pools(journal, 4)
    assert pools["LOSS"][0].source_node_id == honest.id, "the shared gene's best carrier"
    assert ranking.printed_misleads(liar) and not ranking.printed_misleads(honest)
    assert ranking.printed_gap(liar) == pytest.approx(0.49)
    printed = Journal()
    for node in (liar, honest, middle):
        printed.append(node.model_copy(update={"hidden_score": None, "step": None}))
    assert printed.best_node().metric_value == 0.99, "without hidden scores the printed metric ranks, as before"


def test_lower_is_better_hidden_scores_rank_in_their_direction():
    journal = Journal()
    a = make_node(metric=0.1, hidden_score=0.9, lower_is_better=True)
    b = make_node(metric=0.5, hidden_score=0.4, lower_is_better=True)
    journal.append(a)
    journal.append(b)
    assert journal.best_node() is b and ranking.score(b) == 0.4
    assert ranking.printed_gap(a) == pytest.approx(0.8) and ranking.printed_misleads(a)


def test_the_run_report_ranks_the_printed_metric_against_the_hidden_score():
    from swarm_evo.reporting.fitness_report import fitness_lines, fitness_summary

    journal = Journal(info={"fitness": {"source": "hidden", "why": "test"}})
    for printed, hidden in ((0.9, 0.5), (0.8, 0.8), (0.7, 0.7), (0.6, 0.6)):
        journal.append(make_node(metric=printed, hidden_score=hidden))
    summary = fitness_summary(journal)
    assert summary["scored"] == 4 and summary["spearman"] == pytest.approx(-0.2)
    assert summary["misleading"] == 1
    assert [m["printed"] for m in summary["most_misleading"]] == [0.9]
    text = "\n".join(fitness_lines(summary))
    assert "Spearman rho -0.2" in text and "| 1 |" in text


def test_prompts_show_the_gap_of_a_misleading_node():
    """mutate.j2 and merge.j2 show a parent's fitness and, with a hidden score, the gap (the
    heading's lines as the templates write them; the whole prompts: tests/test_prompts_render.py)."""
    from swarm_evo.prompting.prompts import _environment, templates_dir

    mutate = (templates_dir() / "mutate.j2").read_text()
    heading = mutate[mutate.index("## Parent solution"):mutate.index("```python")]
    template = _environment(str(templates_dir())).from_string(
        '{% from "skills/held_out.j2" import fitness, held_out %}' + heading)
    leaky = make_node(metric=0.95, hidden_score=0.81)
    leaky.metadata["printed_misleads"] = ranking.printed_misleads(leaky)
    text = template.render(parent=leaky)
    assert text.startswith("## Parent solution (fitness 0.81)\n")
    assert "printed validation metric was 0.95" in text
    assert "Your validation said 0.95; held-out rows say 0.81: your validation leaks" in text
    fair = make_node(metric=0.80, hidden_score=0.81)
    assert "leaks" not in template.render(parent=fair)
    assert template.render(parent=make_node(metric=0.95)) == "## Parent solution (fitness 0.95)\n", \
        "no hidden score: the heading as before issue 41"


# ------------------------------------------------------------------ MLE-bench layouts (docs/mle-bench.md)
def _layout(root: Path, train: pd.DataFrame, test: pd.DataFrame | None, sample: pd.DataFrame,
            extra: dict[str, pd.DataFrame] | None = None, files: tuple[str, ...] = ()) -> CompetitionObjective:
    comp = root / "layout"
    public, private = comp / "prepared" / "public", comp / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    if test is not None:
        test.to_csv(public / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    sample.to_csv(private / "test.csv", index=False)
    for name, frame in (extra or {}).items():
        frame.to_csv(public / name, index=False)
    for name in files:
        (public / name).parent.mkdir(parents=True, exist_ok=True)
        (public / name).write_text("x")
    (comp / "config.yaml").write_text(
        "id: layout\nname: Layout\ndataset:\n  answers: layout/prepared/private/test.csv\n"
        "  sample_submission: layout/prepared/public/sample_submission.csv\ngrader:\n  name: accuracy\n")
    return CompetitionObjective(load_competition("layout", root))


def _ids(kind: str, start: int, n: int) -> list[str]:
    rng = random.Random(start)
    return {
        "hex": lambda: ["".join(rng.choice("0123456789abcdef") for _ in range(12)) for _ in range(n)],
        "int": lambda: [str(start + i) for i in range(n)],
        "train_": lambda: [f"Train_{i}" for i in range(n)],
        "test_": lambda: [f"Test_{i}" for i in range(n)],
        "text": lambda: [f"comment number {start + i} " + "words " * 15 for i in range(n)],
    }[kind]()


@pytest.mark.parametrize("case, reason", [
    ("hex ids (aptos2019, histopathologic, jigsaw)", None),
    ("Train_n and Test_n (plant-pathology)", "differ in form"),
    ("ids shared by train and test (nomad2018)", "are test ids too"),
    ("test ids after the training ids (tabular-may-2022)", "do not interleave"),
    ("a comment as its own id (detecting-insults)", "free text"),
    ("another table keyed by the id (ranzcr's train_annotations.csv)", "another table keyed by"),
    ("training images deeper in another folder (siim-isic's jpeg/train/)", "is named by a training id"),
    ("packed records (siim-isic's tfrecords/)", "packs rows"),
])
def test_which_layouts_allow_a_hidden_split(case, reason, tmp_path):
    train_ids, test_ids, extra, files = _ids("int", 0, 60), _ids("int", 60, 20), None, ()
    if case.startswith("hex"):
        train_ids, test_ids = _ids("hex", 1, 60), _ids("hex", 2, 20)
    elif case.startswith("Train_n"):
        train_ids, test_ids = _ids("train_", 0, 60), _ids("test_", 0, 20)
    elif case.startswith("ids shared"):
        test_ids = _ids("int", 0, 20)
    elif case.startswith("a comment"):
        train_ids, test_ids = _ids("text", 0, 60), _ids("text", 60, 20)
    elif case.startswith("another table"):
        extra = {"train_annotations.csv": pd.DataFrame({"key": train_ids[:5], "label": 1})}
    elif case.startswith("training images"):
        files = tuple(f"jpeg/train/{i}.jpg" for i in train_ids[:3])
    elif case.startswith("packed"):
        files = ("tfrecords/train00.tfrec",)
    if case.startswith("test ids after"):
        train_ids, test_ids = _ids("int", 0, 60), _ids("int", 100, 20)
    elif not case.startswith("ids shared") and not case.startswith("hex") and not case.startswith("Train_n") \
            and not case.startswith("a comment"):
        train_ids, test_ids = [str(2 * i) for i in range(60)], [str(6 * i + 1) for i in range(20)]
    train = pd.DataFrame({"key": train_ids, "x": range(60), "y": [i % 2 for i in range(60)]})
    test = pd.DataFrame({"key": test_ids, "x": range(20)})
    objective = _layout(tmp_path, train, test, pd.DataFrame({"key": test_ids, "y": 0}), extra, files)
    why = objective.hidden_split_unavailable()
    if reason is None:
        assert why is None
    else:
        assert why is not None and reason in why, why
