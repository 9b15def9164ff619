"""Infer what a competition's public data looks like (columns, target, output kind, images).

Reads only files under the competition's public directory (``train.csv``, ``test.csv``,
``sample_submission.csv``, and the folder listings and one image header of an image
competition); never private answers. The result steers which program the offline model
writes; the programs themselves re-read the data at run time.

What the grader wants comes from the CTX alone (docs/CONTRACTS.md; the grader's facts,
:meth:`swarm_evo.competition.graders.Grader.facts`): the kind's traits (``classification``,
``probabilities``, ``one_column_per_class``) decide the program's task and output (labels,
probabilities of one or several classes, values), ``is_lower_better`` the direction of its
searches, ``metric`` and ``metric_kwargs`` the metric it prints, ``non_negative`` whether its
predictions are clipped at 0. A CTX without the traits gets a guess from the target column
(regression for many distinct floats).

Image competitions (MLE-bench's layout, e.g. ``sklearn-digits-images``): a folder of images
(``train/``) whose file names are the id column of ``train.csv`` (``<id>.png`` or the id itself
as the file name), the test images in a folder named by the test ids (``test.csv``'s, else the
sample submission's); the target is the sample submission's column. ``test.csv`` may be absent.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd


@dataclass
class DatasetInfo:
    """What the offline model knows about a competition's public data."""

    public_dir: str
    grader: str
    id_col: str
    submission_cols: list[str]
    target_col: str
    task: str  # "classification" | "regression"
    output: str  # "label" | "proba_binary" | "proba_multi" | "value"
    text_cols: list[str] = field(default_factory=list)
    drop_cols: list[str] = field(default_factory=list)
    split_cols: dict[str, list[bool]] = field(default_factory=dict)  # col -> per part: numeric?
    group_id: bool = False
    spend_cols: list[str] = field(default_factory=list)
    n_rows: int = 0
    columns: list[str] = field(default_factory=list)
    sample_file: str = "sample_submission.csv"
    test_file: str = "test.csv"  # the file listing the test ids: test.csv, else the sample submission
    image_train_dir: str = ""  # image competitions: folder of the training images (relative to public_dir)
    image_test_dir: str = ""  # folder of the test images
    image_name: str = "{}.png"  # a file name from an id: "{}.png" (<id>.png) or "{}" (the id is the name)
    image_mode: str = "L"  # the PIL mode programs convert to: "L" (grayscale) or "RGB"
    image_shape: tuple[int, int] = (0, 0)  # (width, height) of a sampled training image, pixels
    packages: dict[str, str] = field(default_factory=dict)  # the sandbox's installed packages (name -> version)
    grader_kind: str | None = None  # the grader's kind (CTX competition.grader_kind), None: not given
    lower_is_better: bool = False  # the metric's direction (CTX competition.is_lower_better)
    metric: str | None = None  # the grader's sklearn.metrics function (CTX competition.metric)
    metric_kwargs: dict = field(default_factory=dict)  # its keyword arguments (CTX competition.metric_kwargs)
    non_negative: bool = False  # predictions must be >= 0 (CTX competition.non_negative: RMSLE)

    @property
    def is_text(self) -> bool:
        """True when the features are dominated by free text (TF-IDF programs)."""
        return bool(self.text_cols)

    @property
    def is_image(self) -> bool:
        """True for an image competition (a folder of images named by the train ids)."""
        return bool(self.image_train_dir)


@lru_cache(maxsize=32)
def _read(path: str, mtime: float) -> pd.DataFrame:
    return pd.read_csv(path)


def read_csv(path: str) -> pd.DataFrame:
    """Read a CSV, cached by path and modification time (the caller must not mutate it)."""
    return _read(path, os.path.getmtime(path))


def public_columns(public_dir: str) -> list[str]:
    """Every column name of the public CSV files (train, test, sample submission)."""
    cols: list[str] = []
    for name in ("train.csv", "test.csv", "sample_submission.csv"):
        path = os.path.join(public_dir, name)
        if os.path.exists(path):
            for c in pd.read_csv(path, nrows=0).columns:
                if c not in cols:
                    cols.append(str(c))
    return cols


def grader_output(competition: dict, n_sub_cols: int) -> tuple[str, str]:
    """``(task, output)`` from the CTX's grader facts (the kind's traits,
    :meth:`swarm_evo.competition.graders.Grader.facts`; never a kind's name) with ``n_sub_cols``
    target columns: regression values; probabilities of several classes (one column per class,
    or several columns) or of the positive class; else labels (also for a CTX without traits)."""
    if competition.get("classification") is False:
        return "regression", "value"
    if competition.get("probabilities"):
        several = competition.get("one_column_per_class") or n_sub_cols > 1
        return "classification", "proba_multi" if several else "proba_binary"
    return "classification", "label"


def _is_free_text(column: pd.Series) -> bool:
    """Long, mostly unique, multi-word strings (the rule used for text features below)."""
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return False
    st = column.dropna().astype(str)
    return (not st.empty and st.str.len().mean() > 30 and st.nunique() / max(len(column), 1) > 0.5
            and st.str.count(" ").mean() >= 3)


IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
IMAGE_MATCH = 0.9
"""Share of (the first ``IMAGE_PROBE``) ids that must name an image for a folder to count."""
IMAGE_PROBE = 200


@lru_cache(maxsize=64)
def _image_names(folder: str, mtime: float) -> frozenset[str]:
    """File names of the images directly in ``folder`` (cached by path and modification time)."""
    with os.scandir(folder) as entries:
        return frozenset(e.name for e in entries if e.name.lower().endswith(IMAGE_EXTS) and e.is_file())


def _image_folder(public_dir: str, ids: pd.Series) -> tuple[str, str] | None:
    """``(folder, name pattern)`` of the public sub-folder whose images ``ids`` name, or None.

    The pattern is ``"{}<ext>"`` (``5`` -> ``5.png``) or ``"{}"`` (the id is the file name). A
    folder counts when at least ``IMAGE_MATCH`` of the first ``IMAGE_PROBE`` ids have a file.
    """
    probe = [str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in ids.dropna().head(IMAGE_PROBE)]
    if not probe:
        return None
    best: tuple[float, str, str] | None = None
    for entry in sorted(os.scandir(public_dir), key=lambda e: e.name):
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        names = _image_names(entry.path, os.path.getmtime(entry.path))
        if not names:
            continue
        exts = {os.path.splitext(n)[1] for n in list(names)[:50]}
        for pattern in ["{}"] + ["{}" + e for e in sorted(exts)]:
            share = sum(pattern.format(v) in names for v in probe) / len(probe)
            if share >= IMAGE_MATCH and (best is None or share > best[0]):
                best = (share, entry.name, pattern)
    return (best[1], best[2]) if best else None


def _image_mode_shape(path: str) -> tuple[str, tuple[int, int]]:
    """("L" or "RGB", (width, height)) of one image: grayscale stays "L", anything else "RGB"."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            mode, size = im.mode, im.size
    except Exception:  # noqa: BLE001 - no pillow or an unreadable file: read the header
        from swarm_evo.prompting.data_preview_images import image_header

        head = image_header(Path(path))
        mode, size = (head[1], head[0]) if head else ("RGB", (0, 0))
    return ("L" if mode in ("L", "LA", "1", "I;16", "I", "F") else "RGB"), (int(size[0]), int(size[1]))


def infer_dataset(competition: dict, packages: dict | None = None) -> DatasetInfo:
    """Build a :class:`DatasetInfo` from the CTX ``competition`` dict (its grader facts: module
    docstring) and the public files.

    ``packages`` is the CTX's ``packages`` (what the sandbox has installed, name -> version);
    it decides e.g. whether image programs may add HOG features (``scikit-image``).

    Every model call of a run asks again with the same CTX facts: the answer is kept per CTX
    facts and modification times of the public CSV files (10-45 ms of pandas string work per
    call on the test suite's sampled competitions, more on full ones); each caller gets its
    own copy.
    """
    public_dir = competition["public_dir"]
    sample = competition.get("sample_submission") or os.path.join(public_dir, "sample_submission.csv")
    stamps = tuple(_mtime(path) for path in (os.path.join(public_dir, "train.csv"),
                                             os.path.join(public_dir, "test.csv"), sample))
    key = (json.dumps([competition, packages or {}], sort_keys=True, default=str), stamps)
    info = _KEPT.get(key)
    if info is None:
        info = _infer(competition, packages or {})
        if len(_KEPT) >= _KEEP:
            _KEPT.clear()
        _KEPT[key] = info
    return copy.deepcopy(info)


_KEEP = 16
_KEPT: dict[tuple, DatasetInfo] = {}  # infer_dataset's answers by CTX facts and file times


def _mtime(path: str) -> float | None:
    try:
        return os.path.getmtime(path)
    except OSError:
        return None


def _infer(competition: dict, packages: dict) -> DatasetInfo:
    """:func:`infer_dataset`'s work, uncached."""
    public_dir = competition["public_dir"]
    grader = competition.get("grader") or "accuracy"
    train = read_csv(os.path.join(public_dir, "train.csv"))
    sample_path = competition.get("sample_submission") or os.path.join(public_dir, "sample_submission.csv")
    sample = read_csv(sample_path)
    id_col = competition.get("id_column") or str(sample.columns[0])
    test_path = os.path.join(public_dir, "test.csv")
    test = read_csv(test_path) if os.path.exists(test_path) else sample[[id_col]]
    sub_cols = list(competition.get("target_columns") or [c for c in sample.columns if c != id_col])
    only_train = [c for c in train.columns if c not in test.columns and c != id_col]
    if len(sub_cols) == 1 and sub_cols[0] in train.columns:
        target = sub_cols[0]
    elif only_train:
        target = only_train[0]
    else:
        target = sub_cols[0]
    kind = competition.get("grader_kind")
    task, output = grader_output(competition, len(sub_cols))
    if competition.get("classification") is None and pd.api.types.is_float_dtype(train[target]) \
            and train[target].nunique() > 20:
        task, output = "regression", "value"  # no traits given: guess from the target
    info = DatasetInfo(public_dir=public_dir, grader=grader, id_col=id_col, submission_cols=sub_cols,
                       target_col=target, task=task, output=output, n_rows=len(train),
                       columns=[str(c) for c in train.columns], sample_file=os.path.basename(sample_path),
                       test_file="test.csv" if os.path.exists(test_path) else os.path.basename(sample_path),
                       packages=dict(packages or {}), grader_kind=kind,
                       lower_is_better=bool(competition.get("is_lower_better", False)),
                       metric=competition.get("metric"), metric_kwargs=dict(competition.get("metric_kwargs") or {}),
                       non_negative=bool(competition.get("non_negative", False)))
    if id_col in train.columns and id_col in test.columns:
        found = _image_folder(public_dir, train[id_col])
        found_test = _image_folder(public_dir, test[id_col]) if found else None
        if found and found_test:
            info.image_train_dir, info.image_name = found
            info.image_test_dir = found_test[0]
            first = info.image_name.format(train[id_col].iloc[0])
            info.image_mode, info.image_shape = _image_mode_shape(os.path.join(public_dir, info.image_train_dir, first))
            return info
    # The id is a feature too when it is the text itself (detecting-insults: id column Comment).
    feats = [c for c in train.columns if c != target and c in test.columns and (c != id_col or _is_free_text(train[c]))]
    n = max(len(train), 1)
    for c in feats:
        s = train[c]
        if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s):
            continue
        st = s.dropna().astype(str)
        if st.empty:
            info.drop_cols.append(c)
            continue
        mean_len = st.str.len().mean()
        uniq = st.nunique() / n
        if mean_len > 30 and uniq > 0.5 and st.str.count(" ").mean() >= 3:
            info.text_cols.append(c)
            continue
        slash = st.str.count("/")
        if (slash > 0).mean() > 0.9 and slash.nunique() == 1:
            k = int(slash.iloc[0]) + 1
            parts = st.str.split("/", expand=True)
            info.split_cols[c] = [bool(parts[i].str.fullmatch(r"\d+").mean() > 0.9) for i in range(k)]
        if uniq > 0.5 or st.nunique() > 200:
            info.drop_cols.append(c)
    ids = train[id_col].astype(str)
    info.group_id = bool(ids.str.fullmatch(r"\d+_\d+").mean() > 0.95)
    for c in feats:
        s = train[c]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            if s.min() >= 0 and (s == 0).mean() > 0.3 and s.nunique() > 20:
                info.spend_cols.append(c)
    if len(info.spend_cols) < 2:
        info.spend_cols = []
    return info


def safe_name(col: str) -> str:
    """A Python-identifier-friendly version of a column name (for derived feature names)."""
    return re.sub(r"\W+", "_", col).strip("_") or "col"
