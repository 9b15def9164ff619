"""An adversary's probe of a hidden split (issue 53, item 4): can hidden rows be told from real
test rows by what a program sees?

:func:`probe_auc` gives the adversary more than any program has: it knows which test rows are
hidden and trains a classifier on them (5-fold cross-validated), with

* id-derived features: the id's numbers (its digit runs), length and form, its rank among all
  visible ids (training and test), the distance in that order to the nearest visible training
  id;
* the row's own features (numbers; other columns as category codes; for an image competition
  the file's size and mean pixel);
* features that tie the id to the row through the visible training rows: for each column of
  many values, the mean id number of the training rows with the same value (spaceship-titanic's
  cabin holds one group, whose number is the id's) and the gap to the row's own; a 5-nearest-
  neighbour regression of the id number on the numeric features, and its gap.

A hidden row that takes another row's id breaks that tie; a row that keeps its own does not.
Two classifiers (gradient boosting, logistic regression); the better one's AUC (hidden =
positive) over the rows of several splits (seeds) pooled is the number; 0.5 is chance.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from swarm_evo.competition.hidden_layout import read_table, train_table
from swarm_evo.competition.hidden_split import SPLIT_DIR, write_split

MAX_CATEGORY_VALUES = 0.9
"""A column is an id-tying key when its values number more than 20 and at most this share of rows."""


def _numbers(ids: pd.Series, parts: int = 3) -> pd.DataFrame:
    runs = ids.astype(str).map(lambda s: [int(d) for d in re.findall(r"\d+", s)][:parts])
    return pd.DataFrame({f"id_n{k}": runs.map(lambda r, k=k: r[k] if len(r) > k else np.nan) for k in range(parts)},
                        index=ids.index).astype(float)


def _id_features(test_ids: pd.Series, train_ids: pd.Series) -> pd.DataFrame:
    test_ids, train_ids = test_ids.astype(str), train_ids.astype(str)
    features = _numbers(test_ids)
    features["id_len"] = test_ids.str.len().to_numpy()
    features["id_form"] = pd.factorize(test_ids.map(lambda s: re.sub(r"\d+", "#", s)))[0]
    everyone = pd.concat([train_ids, test_ids], ignore_index=True)
    key = everyone.map(lambda s: (re.sub(r"\d+", "#", s), tuple(int(d) for d in re.findall(r"\d+", s)), s))
    order = np.array(sorted(range(len(key)), key=key.__getitem__))
    rank = np.empty(len(everyone), dtype=float)
    rank[order] = np.arange(len(everyone))
    is_train = np.zeros(len(everyone), dtype=bool)
    is_train[:len(train_ids)] = True
    train_ranks = np.sort(rank[is_train])
    own = rank[len(train_ids):]
    pos = np.searchsorted(train_ranks, own)
    below = np.where(pos > 0, own - train_ranks[np.clip(pos - 1, 0, None)], np.inf)
    above = np.where(pos < len(train_ranks), train_ranks[np.clip(pos, None, len(train_ranks) - 1)] - own, np.inf)
    features["id_rank"] = own / len(everyone)
    features["id_gap_train"] = np.minimum(below, above)
    return features


def _is_numeric(values: pd.Series) -> bool:
    return pd.to_numeric(values, errors="coerce").notna().mean() > 0.9


def _row_features(frame: pd.DataFrame, columns: list[str], codes_from: pd.DataFrame) -> pd.DataFrame:
    """Numbers as numbers; other columns as category codes, plus the numbers inside them
    (spaceship-titanic's cabin ``B/12/P``: 12)."""
    out = {}
    for column in columns:
        if _is_numeric(codes_from[column]):
            out[column] = pd.to_numeric(frame[column], errors="coerce").astype(float).to_numpy()
            continue
        values = pd.concat([codes_from[column], frame[column]]).astype(str)
        codes = pd.Series(pd.factorize(values)[0][len(codes_from):], index=frame.index)
        out[column] = codes.to_numpy().astype(float)
        if frame[column].astype(str).str.len().median() < 32:
            for name, part in _numbers(frame[column], parts=2).items():
                if part.notna().mean() > 0.5:
                    out[f"{column}_{name}"] = part.to_numpy()
    return pd.DataFrame(out, index=frame.index)


def _tie_features(test: pd.DataFrame, train: pd.DataFrame, id_col: str, columns: list[str]) -> pd.DataFrame:
    """How well each test row's id number follows from its features through the training rows."""
    from sklearn.neighbors import KNeighborsRegressor

    out = pd.DataFrame(index=test.index)
    train_n = _numbers(train[id_col])["id_n0"]
    test_n = _numbers(test[id_col])["id_n0"]
    if train_n.isna().all():
        return out
    for column in columns:
        values = train[column].astype(str)
        distinct = values.nunique()
        if 20 < distinct <= MAX_CATEGORY_VALUES * len(train):
            means = train_n.groupby(values).mean()
            expected = test[column].astype(str).map(means)
            out[f"tie_{column}"] = (test_n - expected).abs().to_numpy()
        own = _row_features(train, [column], train)
        if own.shape[1] > 1:  # a column with numbers inside (a cabin): its nearest training row's id
            near = KNeighborsRegressor(n_neighbors=1).fit(own.fillna(-1.0).to_numpy(float), train_n.fillna(0.0))
            guess = near.predict(_row_features(test, [column], train).fillna(-1.0).to_numpy(float))
            out[f"near_{column}"] = np.abs(guess - test_n.fillna(0.0).to_numpy())
    x_train = _row_features(train, columns, train).fillna(-1.0).to_numpy(float)
    x_test = _row_features(test, columns, train).fillna(-1.0).to_numpy(float)
    if x_train.shape[1]:
        scale = x_train.std(axis=0) + 1e-9
        knn = KNeighborsRegressor(n_neighbors=5).fit(x_train / scale, train_n.fillna(0.0).to_numpy())
        out["tie_knn"] = np.abs(knn.predict(x_test / scale) - test_n.fillna(0.0).to_numpy())
    return out


def _image_features(view: Path, folder: str, ids: pd.Series) -> pd.DataFrame:
    from PIL import Image

    names = {p.name.rsplit(".", 1)[0]: p for p in (view / folder).iterdir()}
    sizes, means = [], []
    for ident in ids.astype(str):
        path = names[ident]
        sizes.append(path.stat().st_size)
        with Image.open(path) as image:
            means.append(float(np.asarray(image).mean()))
    return pd.DataFrame({"file_size": sizes, "pixel_mean": means}, index=ids.index)


def probe_frame(competition, split) -> tuple[pd.DataFrame, np.ndarray]:
    """``(features of every test row of the split's view, is-hidden labels)`` (module docstring)."""
    view = split.view_dir
    id_col = competition.id_column
    train = read_table(view / train_table(view))
    hidden_ids = set(split.fresh_ids.values())
    test_path = next((view / n for n in ("test.csv", "test.parquet") if (view / n).is_file()), None)
    if test_path is not None:
        test = read_table(test_path)
        columns = [c for c in test.columns if c != id_col]
    else:
        test = pd.read_csv(view / Path(competition.sample_submission_path).name, dtype=str,
                           keep_default_na=False)[[id_col]]
        columns = []
    test = test.reset_index(drop=True)
    parts = [_id_features(test[id_col], train[id_col]), _row_features(test, columns, train),
             _tie_features(test, train, id_col, columns)]
    if test_path is None:
        parts.append(_image_features(view, "test", test[id_col]))
    labels = test[id_col].astype(str).isin(hidden_ids).to_numpy()
    return pd.concat(parts, axis=1), labels


def probe_auc(competition, run_dir: Path, seeds: tuple[int, ...] = (0, 1, 2), fraction: float = 0.15,
              group_column: str | None = None) -> float:
    """The adversary's cross-validated AUC (hidden rows = positive) over the test rows of one
    split per seed, pooled (module docstring)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores: dict[str, list[np.ndarray]] = {"boosting": [], "linear": []}
    labels = []
    for seed in seeds:
        split = write_split(competition, Path(run_dir) / f"seed{seed}" / SPLIT_DIR, seed, fraction, group_column)
        features, is_hidden = probe_frame(competition, split)
        x = features.to_numpy(float)
        models = {
            "boosting": HistGradientBoostingClassifier(max_iter=60, max_leaf_nodes=15, random_state=0,
                                                       min_samples_leaf=max(3, len(x) // 50)),
            "linear": make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)),
        }
        folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
        for name, model in models.items():
            fill = np.nan_to_num(x, nan=-1.0, posinf=-1.0) if name == "linear" else x
            scores[name].append(cross_val_predict(model, fill, is_hidden, cv=folds, method="predict_proba")[:, 1])
        labels.append(is_hidden)
    truth = np.concatenate(labels)
    return max(float(roc_auc_score(truth, np.concatenate(s))) for s in scores.values())


if __name__ == "__main__":  # python tests/hidden_probe.py: the AUC per built-in (docs/mle-bench.md)
    import sys
    import tempfile

    from swarm_evo.competition import load_competition, prepare_competition

    shared = Path(__file__).resolve().parents[2] / "shared" / "data"
    root = Path(tempfile.mkdtemp())
    for cid in sys.argv[1:] or ("spaceship-titanic", "house-prices", "spooky-author-identification",
                                 "sklearn-breast-cancer", "sklearn-diabetes", "sklearn-wine", "sklearn-digits",
                                 "sklearn-digits-images"):
        prepare_competition(cid, None if cid.startswith("sklearn") else shared / cid / "raw", root)
        seeds = (0, 1, 2)
        print(f"{cid}: AUC {probe_auc(load_competition(cid, root), root / 'runs' / cid, seeds=seeds):.3f}", flush=True)
