"""The hidden validation split of a run (issue 41, items 1 and 2).

At the start of a competition run the host takes ``fraction`` of the public training rows
(:func:`choose_hidden_rows`: stratified on the label for classification, whole groups when a
group column is named, seeded) and writes the run's own view of the public data,
``RUN_DIR/hidden_split/input/``, which programs get as ``./input`` instead of the competition's
public folder (:func:`write_split`):

* the training table without the hidden rows (other rows and their order unchanged);
* the test table with the hidden rows shuffled in among the real ones; each hidden row keeps
  its own id, which the training table no longer holds (issue 53, item 4: a row that took
  another hidden row's id stood out, its id no longer following its features, e.g.
  spaceship-titanic's group and cabin). That is as plausible as a real test id only where the
  competition's training and test ids interleave, which the layout checks
  (:func:`~swarm_evo.competition.hidden_layout.interleave_distance`; elsewhere no split);
* the sample submission with a row for every test row, in the test table's order, a hidden
  row's values copied from a random real row;
* media folders (images named by id): the hidden rows' files leave the training folder and
  are copied into the test folder; every test file is a fresh copy
  written in random order (no creation order, inode or time tells them apart);
* every file written here has one modification time, the original sample submission's; files
  that need no change are hard links (copies where links cannot be made);
* other public files as they are.

``RUN_DIR/hidden_split/answers.csv`` holds the hidden rows' answers in the private answers'
format (id, target columns; one-hot where the training table has a label column);
``split.json`` the parameters, the ``original id → id in the view`` pairs (the same id since
issue 53) and a digest
(recorded in the journal: a resumed run rebuilds the same split or stops). Programs see only
``input/`` (docs/CONTRACTS.md); the answers stay on the host beside it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .hidden_answers import answer_column, check_gradable
from .hidden_layout import HiddenLayout, HiddenSplitError, entry_id, hidden_layout, read_table, train_table
from .dates import as_dates
from .hidden_relation import chosen_relation
from .hidden_resolution import score_resolution
from .model import Competition

log = logging.getLogger(__name__)

SPLIT_DIR = "hidden_split"
"""``RUN_DIR/hidden_split/``: the run's view of the public data, the hidden answers, the record."""
VIEW_DIR = "input"
ANSWERS_FILE = "answers.csv"
RECORD_FILE = "split.json"
SEED_SALT = 41
"""Mixed into the run's seed (``numpy.random.SeedSequence([seed, 41, ...])``) for the split's draws."""


@dataclass
class HiddenSplit:
    """A run's hidden split as written (see the module docstring).

    Attributes:
        root: ``RUN_DIR/hidden_split``; ``view_dir`` its ``input/``, ``answers_path`` its answers.
        seed, fraction, group_column: what drew it (``group_column``: the one named by
            ``search.hidden_group_column`` or found, :mod:`~swarm_evo.competition.hidden_relation`).
        relation, time_column, relation_why: ``random``, ``group`` or ``time`` (the latest rows by
            ``time_column``), and why (issue 53, item 7).
        resolution: the bootstrap standard error of the grader on the hidden rows (issue 53,
            item 8: prompts show hidden scores rounded to it,
            :mod:`~swarm_evo.competition.hidden_resolution`); None when it cannot be computed.
        rows, train_rows: hidden rows, and training rows before the split.
        stratified: drawn stratified on the label (classification, when every class has 2 rows).
        fresh_ids: ``{original id: id in the view}`` of the hidden rows (ids as text); each keeps
            its own id (issue 53, item 4), so the two are equal.
        digest: sha256 of the parameters, the row count and the id pairs (the journal records it).
    """

    root: Path
    seed: int
    fraction: float
    group_column: str | None
    rows: int
    train_rows: int
    stratified: bool
    fresh_ids: dict[str, str] = field(default_factory=dict)
    digest: str = ""
    relation: str = "random"
    time_column: str | None = None
    relation_why: str = ""
    resolution: float | None = None

    @property
    def view_dir(self) -> Path:
        return self.root / VIEW_DIR

    @property
    def answers_path(self) -> Path:
        return self.root / ANSWERS_FILE

    def record(self) -> dict:
        """What the journal keeps (``info["hidden_split"]``): everything but the id pairs."""
        return {"dir": SPLIT_DIR, "seed": self.seed, "fraction": self.fraction, "group_column": self.group_column,
                "rows": self.rows, "train_rows": self.train_rows, "stratified": self.stratified,
                "relation": self.relation, "time_column": self.time_column, "relation_why": self.relation_why,
                "resolution": self.resolution,
                "digest": self.digest}


def _rng(seed: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), SEED_SALT, purpose]))


def _label(train: pd.DataFrame, layout: HiddenLayout) -> pd.Series:
    if layout.label_column is not None:
        return train[layout.label_column].astype(str)
    return train[list(layout.target_columns)].astype(str).agg("|".join, axis=1)


def choose_hidden_rows(train: pd.DataFrame, layout: HiddenLayout, fraction: float, seed: int,
                       group_column: str | None = None, time_column: str | None = None) -> tuple[np.ndarray, bool]:
    """``(positions of the hidden rows in ``train``, sorted; stratified?)``.

    ``round(fraction · rows)`` rows (at least 1): the latest by ``time_column`` when it is given
    (dates as :func:`~swarm_evo.competition.dates.as_dates` reads them, missing dates
    earliest, ties in table order), else drawn with scikit-learn's splitters and a seed from
    ``seed``: ``GroupShuffleSplit`` when ``group_column`` is given (its groups stay whole, so
    the count is near, not exactly, the fraction), else ``StratifiedShuffleSplit`` on the label
    for classification (``ShuffleSplit`` when a class has fewer than 2 rows), else
    ``ShuffleSplit`` (:mod:`swarm_evo.competition.hidden_relation`: which applies).

    Raises:
        HiddenSplitError: ``time_column`` does not hold dates.
    """
    from sklearn.model_selection import GroupShuffleSplit, ShuffleSplit, StratifiedShuffleSplit  # on use: module docstring of graders.py

    state = int(np.random.SeedSequence([int(seed), SEED_SALT, 0]).generate_state(1)[0])
    n_hidden = max(1, int(round(fraction * len(train))))
    index = np.arange(len(train))
    if time_column is not None:
        dates = as_dates(train[time_column])
        if dates is None:
            raise HiddenSplitError(f"column {time_column!r} of the training table does not hold dates")
        stamps = dates.map(lambda d: d.value if not pd.isna(d) else np.iinfo(np.int64).min).to_numpy(np.int64)
        return np.sort(np.argsort(stamps, kind="stable")[len(train) - n_hidden:]), False
    if group_column is not None:
        splitter = GroupShuffleSplit(n_splits=1, test_size=fraction, random_state=state)
        _, hidden = next(splitter.split(index, groups=train[group_column].astype(str).to_numpy()))
        return np.sort(hidden), False
    if layout.classification:
        try:
            splitter = StratifiedShuffleSplit(n_splits=1, test_size=n_hidden, random_state=state)
            _, hidden = next(splitter.split(index, _label(train, layout).to_numpy()))
            return np.sort(hidden), True
        except ValueError:  # a class with a single row
            pass
    _, hidden = next(ShuffleSplit(n_splits=1, test_size=n_hidden, random_state=state).split(index))
    return np.sort(hidden), False


def _digest(seed: int, fraction: float, group_column: str | None, train_rows: int, pairs: dict[str, str],
            time_column: str | None = None) -> str:
    parts = [seed, fraction, group_column, train_rows, sorted(pairs.items())]
    text = json.dumps(parts if time_column is None else [*parts, {"time_column": time_column}])
    return hashlib.sha256(text.encode()).hexdigest()


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, lineterminator="\n")


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link to ``source`` (its times unchanged), a copy where links cannot be made."""
    if source.is_dir():
        shutil.copytree(source, target, copy_function=_link_file)
    else:
        _link_file(str(source), str(target))


def _link_file(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _copy_fresh(source: Path, target: Path, written: list[Path]) -> None:
    """A new copy (new inode) of a file or folder, listed in ``written`` (its time is set later)."""
    if source.is_dir():
        shutil.copytree(source, target)
        written.extend(p for p in target.rglob("*"))
    else:
        shutil.copyfile(source, target)
    written.append(target)


def _write_media(public: Path, view: Path, layout: HiddenLayout, hidden_pairs: dict[str, str],
                 test_ids: set[str], train_ids: set[str], rng: np.random.Generator, written: list[Path]) -> None:
    """Each media folder of the view: training files linked (the hidden rows' left out), test
    files (real and hidden, the hidden under fresh names) copied anew in random order."""
    folders = sorted({m.train for m in layout.media} | {m.test for m in layout.media})
    for folder in folders:
        (view / folder).mkdir()
    fresh: list[tuple[Path, Path]] = []
    for media in layout.media:
        for name in sorted(os.listdir(public / media.train)):
            ident = entry_id(name, train_ids)
            if ident in hidden_pairs:
                fresh.append((public / media.train / name,
                              view / media.test / (hidden_pairs[ident] + name[len(ident):])))
    for folder in folders:
        is_test = any(m.test == folder for m in layout.media)
        for name in sorted(os.listdir(public / folder)):
            ident = entry_id(name, train_ids | test_ids)
            if ident in hidden_pairs and ident not in test_ids:
                continue  # a hidden row's file: copied under its fresh name below
            if is_test and ident in test_ids:
                fresh.append((public / folder / name, view / folder / name))
            else:
                _link_or_copy(public / folder / name, view / folder / name)
    for k in rng.permutation(len(fresh)):
        _copy_fresh(*fresh[k], written)


def write_split(competition: Competition, root: Path, seed: int, fraction: float,
                group_column: str | None = None, time_column: str | None = None) -> HiddenSplit:
    """Cut the hidden split and write ``root`` (= ``RUN_DIR/hidden_split``; see the module
    docstring), replacing what is there; deterministic for the same public data and arguments.

    The view is built in a temporary folder beside ``input/`` and renamed into place, and
    ``split.json`` is written last: a run killed meanwhile leaves no split that looks whole.

    The hidden answers are written in the grader's form and graded once before anything relies
    on them (:mod:`swarm_evo.competition.hidden_answers`).

    The rows are drawn as the competition's test rows were (issue 53, item 7:
    :func:`~swarm_evo.competition.hidden_relation.chosen_relation`): whole groups of
    ``group_column``, the latest by ``time_column`` (a date column), else what the built-in
    declares or the tables show; the split records the relation and why (``relation_why``, which
    the run's fitness line shows: :func:`swarm_evo.objective.fitness.apply_fitness`).

    Raises:
        HiddenSplitUnavailable: see :func:`~swarm_evo.competition.hidden_layout.hidden_layout`; also
            when the competition's grader cannot grade the hidden answers
            (:func:`~swarm_evo.competition.hidden_answers.check_gradable`).
        HiddenSplitError: see :func:`~swarm_evo.competition.hidden_layout.hidden_layout` and
            :func:`~swarm_evo.competition.hidden_relation.chosen_relation`.
        OSError: the folder cannot be written.
    """
    public = Path(competition.public_dir)
    train = read_table(public / train_table(public))
    layout = hidden_layout(competition, train, group_column)
    id_col = layout.id_column
    public_test = read_table(public / layout.test_file) if layout.test_file is not None else None
    relation = chosen_relation(competition.id, train, public_test, layout, group_column, time_column)
    log.debug("hidden split of %s: %s", competition.id, relation.why)  # the run's fitness line says it
    group_column = relation.column if relation.kind == "group" else None
    time_column = relation.column if relation.kind == "time" else None
    hidden_pos, stratified = choose_hidden_rows(train, layout, fraction, seed, group_column, time_column)
    hidden = train.iloc[hidden_pos]
    hidden_ids = hidden[id_col].astype(str).tolist()
    pairs = {ident: ident for ident in hidden_ids}  # each keeps its own id (module docstring)
    shuffle = _rng(seed, 2)
    stamp = os.stat(competition.sample_submission_path).st_mtime
    root.mkdir(parents=True, exist_ok=True)
    for stale in (root / RECORD_FILE, root / ANSWERS_FILE):
        stale.unlink(missing_ok=True)
    building = root / f".{VIEW_DIR}.building"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir()
    written: list[Path] = []

    kept = train.drop(train.index[hidden_pos])
    _write_table(kept, building / layout.train_file)
    written.append(building / layout.train_file)
    as_test = hidden.assign(**{id_col: [pairs[i] for i in hidden_ids]})
    sample = pd.read_csv(competition.sample_submission_path, dtype=str, keep_default_na=False)
    test_ids = set(sample[id_col])
    if layout.test_file is not None:
        test = public_test
        test_ids |= set(test[id_col].astype(str))
        test = pd.concat([test, as_test[list(layout.feature_columns)]], ignore_index=True)
        test = test.iloc[shuffle.permutation(len(test))].reset_index(drop=True)
        _write_table(test, building / layout.test_file)
        written.append(building / layout.test_file)
        order = test[id_col].astype(str).tolist()
    else:
        order = [*sample[id_col], *as_test[id_col]]
        order = [order[k] for k in shuffle.permutation(len(order))]
    copies = sample.iloc[shuffle.integers(0, len(sample), len(as_test))].assign(**{id_col: as_test[id_col].tolist()})
    full_sample = pd.concat([sample, copies], ignore_index=True).set_index(id_col, drop=False).loc[order]
    sample_name = Path(competition.sample_submission_path).name
    _write_table(full_sample.reset_index(drop=True), building / sample_name)
    written.append(building / sample_name)
    _write_media(public, building, layout, pairs, test_ids, set(train[id_col].astype(str)), shuffle, written)
    done = {layout.train_file, layout.test_file, sample_name} | {m.train for m in layout.media} | {
        m.test for m in layout.media}
    for entry in sorted(public.iterdir()):
        if entry.name not in done:
            _link_or_copy(entry, building / entry.name)
    for path in written:
        os.utime(path, (stamp, stamp), follow_symlinks=False)
    shutil.rmtree(root / VIEW_DIR, ignore_errors=True)
    os.replace(building, root / VIEW_DIR)

    answers = as_test[[id_col]].copy()
    if layout.label_column is not None:
        for column in layout.target_columns:
            answers[column] = (as_test[layout.label_column].astype(str) == column).astype(int)
    else:
        for column in layout.target_columns:
            answers[column] = answer_column(as_test[column], competition.grader, column, train[column])
    answers = answers.reset_index(drop=True)
    hidden_sample = full_sample[full_sample[id_col].isin(set(answers[id_col].astype(str)))].reset_index(drop=True)
    check_gradable(competition.grader, hidden_sample, answers, id_col, list(layout.target_columns))
    resolution = score_resolution(competition.grader, answers, id_col, list(layout.target_columns), seed)
    _write_table(answers, root / ANSWERS_FILE)
    split = HiddenSplit(root=root, seed=int(seed), fraction=float(fraction), group_column=group_column,
                        rows=len(hidden_ids), train_rows=len(train), stratified=stratified, fresh_ids=pairs,
                        relation=relation.kind, time_column=time_column, relation_why=relation.why,
                        resolution=resolution)
    split.digest = _digest(split.seed, split.fraction, group_column, split.train_rows, pairs, time_column)
    (root / RECORD_FILE).write_text(json.dumps({**split.record(), "fresh_ids": pairs}), encoding="utf-8")
    return split
