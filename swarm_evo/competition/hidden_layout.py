"""Which public layouts a hidden validation split can be cut from (issue 41, item 5).

A hidden split takes rows of the public training table whose labels no program sees and puts
them among the test rows (:mod:`swarm_evo.competition.hidden_split`). That needs, in
``prepared/public/``:

* a **training table** keyed by the sample submission's id column: ``train.csv`` /
  ``train.parquet`` (or MLE-bench's ``labels.csv``, ``train_labels.csv``), unique ids;
* the **answers** of its rows in the sample submission's columns: the target columns
  themselves (spaceship-titanic's ``Transported``, house-prices' ``SalePrice``, jigsaw's six
  labels), or one label column whose values are the target columns' names (spooky's
  ``author`` over ``EAP,HPL,MWS``, sklearn-wine's ``target``), one-hot encoded as the private
  answers are;
* **features for a hidden row as a test row**: a test table (``test.csv`` / ``test.parquet``)
  whose columns the training table has, and/or a folder of files named by the ids (an image
  folder: ``train/<id>.png`` with the test ids' files in ``test/``, or one folder for both);
* ids of the **same form** in training and test, so a hidden row's id cannot tell it from a
  real test row: structured ids (few forms among the test ids: :data:`STRUCTURED_SHARE`)
  match digits aside (``0013_01`` and ``0271_02`` are one form, ``Train_7`` and ``Test_7`` are
  not) and overlap in range when they are numbers; opaque ids (hashes) have the test ids'
  lengths and characters; no id is both a training and a test id, and ids are not free text
  (a comment as its own id, detecting-insults: re-keying it would change the row's features);
* nothing else in the public folder that names the training rows: no other table with the id
  column (ranzcr's ``train_annotations.csv``), no files named by training ids deeper in other
  folders (siim-isic's ``jpeg/train/``), no packed records (``*.tfrec``).

Anything else (no training table, a target the training table does not hold, ids that differ
in form) has no hidden split: :func:`hidden_layout` raises :class:`HiddenSplitUnavailable`
with the reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import CompetitionError
from .dates import as_dates
from .label_copies import holds_id_table
from .model import Competition

TRAIN_TABLES = ("train.csv", "train.parquet", "labels.csv", "train_labels.csv")
"""Training tables, first found wins (MLE-bench: nyc taxi's ``labels.csv``, histopathologic's ``train_labels.csv``)."""
TEST_TABLES = ("test.csv", "test.parquet")
MIN_TRAIN_ROWS = 20
"""Fewer training rows than this leave no hidden split worth grading."""
MEDIA_SHARE = 0.5
"""A folder is a media folder of a set of ids when it holds files named by at least this share of them."""
STRUCTURED_SHARE = 0.05
"""Ids are structured when their forms (:func:`id_form`) number at most 3 or this share of the test
ids (``0013_01``: one form for all); more: opaque (hashes, one form per id)."""
FREE_TEXT_CHARS = 64
"""Ids whose median length exceeds this, or with a line break, are free text."""
ORDER_SAMPLE = 200_000
"""At most this many training ids are ordered to see whether they interleave with the test ids."""
INTERLEAVE_SLACK = 0.1
"""Training and test ids interleave when the Kolmogorov–Smirnov distance between their places
in the id order is at most this plus the random split's 1 % critical value (:func:`interleave_limit`)."""
PACKED_SUFFIXES = (".tfrec", ".tfrecord", ".tfrecords")
"""Files that pack many rows (a training row among them could not be taken out)."""


class HiddenSplitUnavailable(CompetitionError):
    """The competition's public layout allows no hidden split; the message says why."""


class HiddenSplitError(CompetitionError):
    """A hidden split was asked for in a way that cannot work (e.g. ``search.hidden_group_column``
    names no column of the training table): bad input, whatever ``search.fitness`` says."""


@dataclass(frozen=True)
class MediaFolder:
    """Folders of files named by ids (``<id>`` or ``<id>.<ext>``): ``train`` holds the training
    rows' files, ``test`` the test rows' (the same folder when both are in one)."""

    train: str
    test: str


@dataclass(frozen=True)
class HiddenLayout:
    """How to cut a hidden split from a competition's public data (see the module docstring).

    Attributes:
        train_file, test_file: the training and test tables (names in ``public_dir``); no
            ``test_file`` for an image competition that lists its test ids in the sample only.
        id_column, target_columns: the sample submission's.
        label_column: the training column one-hot encoded into the target columns, or None
            when the training table holds the target columns themselves.
        feature_columns: the test table's columns, in order (a hidden row as a test row).
        media: folders of files named by ids.
        classification: the grader scores classes (the split is stratified on the label).
    """

    train_file: str
    test_file: str | None
    id_column: str
    target_columns: tuple[str, ...]
    label_column: str | None
    feature_columns: tuple[str, ...]
    media: tuple[MediaFolder, ...]
    classification: bool


def read_table(path: Path) -> pd.DataFrame:
    """A public table as text (CSV: every cell the string the file holds, empty cells ""), so a
    table written back keeps its values' spelling; Parquet: as typed."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def id_form(value: object) -> str:
    """The form of an id: its text with every run of digits as ``#`` (``0013_01`` → ``#_#``)."""
    return re.sub(r"\d+", "#", str(value))


def _first(public: Path, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if (public / n).is_file()), None)


def train_table(public: Path) -> str:
    """The name of the training table in ``public`` (the first of :data:`TRAIN_TABLES` there).

    Raises:
        HiddenSplitUnavailable: there is none.
    """
    name = _first(public, TRAIN_TABLES)
    if name is None:
        raise HiddenSplitUnavailable(f"no training table ({', '.join(TRAIN_TABLES)}) in {public}")
    return name


def entry_id(name: str, ids: set[str]) -> str | None:
    """The id a file or folder name stands for: the name itself or the name before its last dot."""
    if name in ids:
        return name
    stem = name.rsplit(".", 1)[0]
    return stem if stem in ids else None


def _media_folders(public: Path, train_ids: set[str], test_ids: set[str]) -> tuple[list[str], list[str]]:
    """``(folders named by training ids, folders named by test ids)`` among ``public``'s folders."""
    train, test = [], []
    for entry in sorted(os.scandir(public), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        names = os.listdir(entry.path)
        in_train = sum(1 for n in names if entry_id(n, train_ids) is not None)
        in_test = sum(1 for n in names if entry_id(n, test_ids) is not None)
        if train_ids and in_train >= MEDIA_SHARE * len(train_ids):
            train.append(entry.name)
        if test_ids and in_test >= MEDIA_SHARE * len(test_ids):
            test.append(entry.name)
    return train, test


def _id_column(path: Path, id_col: str) -> pd.Series:
    """The id column of a public table, as text."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path, columns=[id_col])[id_col].astype(str)
    return pd.read_csv(path, dtype=str, keep_default_na=False, usecols=[id_col])[id_col]


def _check_test_ids(test_file: str, test_ids: pd.Series, sample_ids: pd.Series) -> None:
    """The test table lists the sample submission's rows, no more, no fewer: the view's test
    table and sample are written in one order (issue 53, item 9: an id the sample lacked passed
    here and crashed the run when the split was written)."""
    extra = sorted(set(test_ids) - set(sample_ids))
    lacking = sorted(set(sample_ids) - set(test_ids))
    if extra or lacking or test_ids.duplicated().any():
        example = f" (e.g. {(extra or lacking)[0]!r})" if extra or lacking else ""
        raise HiddenSplitUnavailable(
            f"{test_file} and the sample submission list different rows: {len(extra)} test id(s) the sample lacks, "
            f"{len(lacking)} sample id(s) the test table lacks{example}"
            f"{', duplicated test ids' if test_ids.duplicated().any() else ''}")


def _check_ids(competition: Competition, train_file: str, train_ids: pd.Series, test_ids: pd.Series) -> None:
    """Same id form in training and test, and ids that interleave (module docstring)."""
    shared = set(train_ids) & set(test_ids)
    if shared:
        raise HiddenSplitUnavailable(f"{len(shared)} id(s) of {train_file} are test ids too (e.g. {sorted(shared)[0]!r})")
    lengths = train_ids.str.len()
    if lengths.median() > FREE_TEXT_CHARS or train_ids.str.contains("\n", regex=False).any():
        raise HiddenSplitUnavailable(f"the id column {competition.id_column!r} holds free text (the row itself): "
                                     "ids that are not of one kind cannot be checked to interleave with the test ids")
    train_forms, test_forms = set(train_ids.map(id_form)), set(test_ids.map(id_form))
    if len(test_forms) > max(3, STRUCTURED_SHARE * len(test_ids)):  # opaque ids: hashes, uuids
        if not set(lengths) <= set(test_ids.str.len()) or not set("".join(train_ids)) <= set("".join(test_ids)):
            raise HiddenSplitUnavailable(f"the ids of {train_file} differ from the test ids in length or characters: "
                                         "a hidden row would stand out by its id")
    elif not train_forms <= test_forms:
        odd = sorted(train_forms - test_forms)[:3]
        raise HiddenSplitUnavailable(
            f"the ids of {train_file} ({odd}) differ in form from the test ids ({sorted(test_forms)[:3]}): "
            "a hidden row would stand out by its id")
    _check_interleaved(train_file, train_ids, test_ids)


def id_order_key(value: str) -> tuple:
    """Where an id stands in the competition's id order: its form, then its numbers
    (``0013_02`` → ``("#_#", (13, 2), "0013_02")``; ``ID_00200`` after ``ID_00199``), then its text."""
    return id_form(value), tuple(int(d) for d in re.findall(r"\d+", value)), value


def interleave_distance(train_ids: pd.Series, test_ids: pd.Series, seed: int = 0) -> float:
    """The Kolmogorov–Smirnov distance between where the training ids and the test ids fall in
    the id order (:func:`id_order_key`): 0 when they interleave evenly, 1 when every test id
    follows (or precedes) every training id. At most :data:`ORDER_SAMPLE` training ids are
    ordered (a seeded sample of them)."""
    train_ids, test_ids = train_ids.astype(str), test_ids.astype(str)
    if len(train_ids) > ORDER_SAMPLE:
        train_ids = train_ids.sample(ORDER_SAMPLE, random_state=seed)
    keys = [*map(id_order_key, train_ids), *map(id_order_key, test_ids)]
    is_test = np.zeros(len(keys), dtype=float)
    is_test[len(train_ids):] = 1.0
    in_order = is_test[sorted(range(len(keys)), key=keys.__getitem__)]
    test_share = np.cumsum(in_order) / len(test_ids)
    train_share = np.cumsum(1.0 - in_order) / len(train_ids)
    return float(np.abs(test_share - train_share).max())


def interleave_limit(train_rows: int, test_rows: int) -> float:
    """The largest :func:`interleave_distance` that still counts as interleaved:
    :data:`INTERLEAVE_SLACK` plus the distance a random split exceeds with probability 1 %
    (1.63·√((n+m)/(n·m)), the two-sample Kolmogorov–Smirnov test's critical value)."""
    n, m = min(train_rows, ORDER_SAMPLE), test_rows
    return INTERLEAVE_SLACK + 1.63 * float(np.sqrt((n + m) / (n * m)))


def _check_interleaved(train_file: str, train_ids: pd.Series, test_ids: pd.Series) -> None:
    """A hidden row keeps its own id (:mod:`swarm_evo.competition.hidden_split`): that id must
    fall where the test ids fall. Where the competition's test ids follow the training ids (a
    range of their own, a later time), the hidden rows would be exactly the test ids within the
    training range (issue 53, item 4)."""
    distance = interleave_distance(train_ids, test_ids)
    limit = interleave_limit(len(train_ids), len(test_ids))
    if distance > limit:
        train_sorted = sorted(train_ids.astype(str), key=id_order_key)
        test_sorted = sorted(test_ids.astype(str), key=id_order_key)
        raise HiddenSplitUnavailable(
            f"the ids of {train_file} ({train_sorted[0]}..{train_sorted[-1]}) and the test ids "
            f"({test_sorted[0]}..{test_sorted[-1]}) do not interleave (Kolmogorov-Smirnov distance {distance:.2f} "
            f"between their places in the id order, more than {limit:.2f}): a hidden row would stand out by its id")


def _check_other_files(public: Path, tables: set[str | None], media: set[str], id_col: str,
                       train_ids: set[str], test_ids: set[str]) -> None:
    """Nothing else in ``public`` names the training rows (module docstring): every file, at any
    depth, that is not the training/test table, the sample submission or a media folder's file
    named by an id is read for a table with the id column (:func:`holds_id_table`)."""
    row_ids = train_ids | test_ids
    for folder, dirs, files in os.walk(public):
        dirs.sort()
        here = Path(folder)
        top = here.relative_to(public).parts[0] if here != public else None
        for name in sorted(files):
            path = here / name
            relative = path.relative_to(public)
            if here == public and name in tables:
                continue
            if path.suffix in PACKED_SUFFIXES:
                raise HiddenSplitUnavailable(f"{relative} packs rows that cannot be taken out")
            if top in media and entry_id(name, row_ids) is not None:
                continue  # a row's file (an image)
            if top is not None and entry_id(name, train_ids) is not None:
                raise HiddenSplitUnavailable(f"{relative} is named by a training id (folder {top}/): it would "
                                             "still hold the hidden rows")
            try:
                names_rows = holds_id_table(path, id_col)
            except OSError as exc:
                raise HiddenSplitUnavailable(f"{relative} cannot be read ({exc}): it might hold the hidden rows") from None
            if names_rows:
                raise HiddenSplitUnavailable(f"{relative} is another table keyed by {id_col!r} (a column of that name): "
                                             "it would still hold the hidden rows")


def hidden_layout(competition: Competition, train: pd.DataFrame | None = None,
                  group_column: str | None = None, time_column: str | None = None) -> HiddenLayout:
    """The layout a hidden split is cut from (module docstring), read from ``public_dir``.

    Args:
        competition: the loaded competition.
        train: the training table when the caller has read it already (:func:`read_table`).
        group_column: ``search.hidden_group_column``, checked against the training table.
        time_column: ``search.hidden_time_column``, checked: a training column holding dates.

    Raises:
        HiddenSplitUnavailable: no hidden split is possible; the message says why.
        HiddenSplitError: ``group_column`` is not a column of the training table, ``time_column``
            not one holding dates, or both are given.
    """
    public = Path(competition.public_dir)
    id_col, targets = competition.id_column, tuple(competition.target_columns)
    train_file = train_table(public)
    if train is None:
        train = read_table(public / train_file)
    if id_col not in train.columns:
        raise HiddenSplitUnavailable(f"{train_file} has no column {id_col!r} (the sample submission's id column)")
    if train[id_col].duplicated().any():
        raise HiddenSplitUnavailable(f"the ids of {train_file} (column {id_col!r}) are not unique")
    if len(train) < MIN_TRAIN_ROWS:
        raise HiddenSplitUnavailable(f"{train_file} has {len(train)} rows, fewer than {MIN_TRAIN_ROWS}")
    if group_column is not None and group_column not in train.columns:
        raise HiddenSplitError(
            f"search.hidden_group_column {group_column!r} is not a column of {public / train_file} "
            f"(columns: {list(train.columns)[:12]}): name one of them or drop the key")
    if time_column is not None:
        if group_column is not None:
            raise HiddenSplitError(f"search.hidden_group_column {group_column!r} and search.hidden_time_column "
                                   f"{time_column!r}: a hidden split is grouped or ordered by time, not both")
        if time_column not in train.columns or as_dates(train[time_column]) is None:
            raise HiddenSplitError(
                f"search.hidden_time_column {time_column!r} is not a column of {public / train_file} holding dates "
                f"(2021-03-04, 2021/3/4 10:00; columns: {list(train.columns)[:12]}): name one or drop the key")
    test_file = _first(public, TEST_TABLES)
    test_columns: tuple[str, ...] = ()
    if test_file is not None:
        test_columns = tuple(read_table(public / test_file).columns) if test_file.endswith(".parquet") else tuple(
            pd.read_csv(public / test_file, nrows=0).columns)
        if id_col not in test_columns:
            raise HiddenSplitUnavailable(f"{test_file} has no column {id_col!r}")
        missing = [c for c in test_columns if c not in train.columns]
        if missing:
            raise HiddenSplitUnavailable(f"{test_file} has column(s) {missing[:5]} that {train_file} lacks")
    label_column = None
    if not all(c in train.columns for c in targets):
        label_column = next((c for c in train.columns if c != id_col and c not in test_columns
                             and len(targets) > 1 and set(train[c].astype(str)) <= set(targets)), None)
        if label_column is None:
            raise HiddenSplitUnavailable(
                f"{train_file} holds neither the target column(s) {list(targets)[:5]} of the sample submission "
                "nor one label column whose values name them")
    sample_ids = pd.read_csv(competition.sample_submission_path, dtype=str, keep_default_na=False,
                             usecols=[id_col])[id_col]
    if sample_ids.duplicated().any():
        raise HiddenSplitUnavailable(f"the ids of the sample submission (column {id_col!r}) are not unique")
    if test_file is not None:
        _check_test_ids(test_file, _id_column(public / test_file, id_col), sample_ids)
    train_ids = train[id_col].astype(str)
    _check_ids(competition, train_file, train_ids, sample_ids)
    train_media, test_media = _media_folders(public, set(train_ids), set(sample_ids))
    if train_media and not test_media:
        raise HiddenSplitUnavailable(
            f"folder(s) {train_media} hold files named by the training ids but no folder holds the test ids' files")
    if test_file is None and not train_media:
        raise HiddenSplitUnavailable("no test table and no folder of files named by the ids: a hidden row "
                                     "would have no features")
    _check_other_files(public, {train_file, test_file, Path(competition.sample_submission_path).name},
                       set(train_media) | set(test_media), id_col, set(train_ids), set(sample_ids))
    media = tuple(MediaFolder(train=t, test=t if t in test_media else test_media[0]) for t in train_media)
    return HiddenLayout(
        train_file=train_file,
        test_file=test_file,
        id_column=id_col,
        target_columns=targets,
        label_column=label_column,
        feature_columns=test_columns,
        media=media,
        classification=competition.grader.traits.classification,
    )
