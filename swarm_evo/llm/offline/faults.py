"""Planted faults: one realistic bug (wrong column, missing import, shape error) per faulty reply.

Every fault makes the program fail when executed, and :mod:`.repair` knows how to undo it from
the traceback alone (a misspelled column is fuzzy-matched against the public files' columns,
a missing import is added back, a self-slicing line is removed).

Programs of a library family (:mod:`.boosters`) can also get the library's classic mistakes
(:data:`LIBRARY_FAULT_KINDS`), drawn together with the generic kinds; a scikit-learn program
draws exactly as before:

================  =======  =========================  ==============================================
kind              gene     library                    error when run
================  =======  =========================  ==============================================
raw_frame         MODEL    all (plain CV only)        ``return estimator`` without the preprocessor:
                                                      LightGBM "pandas dtypes must be int, float or
                                                      bool", XGBoost "DataFrame.dtypes for data must
                                                      be int, float, bool or category", CatBoost
                                                      "Cannot convert '...' to float"
early_stopping    MODEL    LightGBM, XGBoost          ``early_stopping_rounds=50`` with no eval_set:
                                                      "For early stopping, at least one dataset and
                                                      eval metric is required" / "Must have at least
                                                      1 validation dataset for early stopping"
catboost_verbose  MODEL    CatBoost                   ``verbose=True, logging_level="Verbose"``:
                                                      "Only one of parameters ['verbose',
                                                      'logging_level', ...] should be set"
library_import    MODEL    all                        the gene's own import removed: NameError
string_labels     DATA     XGBoost classifier         class names as ``y``: "Invalid classes inferred
                                                      from unique values of `y`"
================  =======  =========================  ==============================================
"""

from __future__ import annotations

import random
import re

import os

import pandas as pd

from swarm_evo.population import genes as G
from . import boosters
from .dataset import infer_dataset, public_columns, read_csv
from .preamble import IMPORT_LINES

FAULT_KINDS = ("wrong_column", "missing_import", "shape_error")
LIBRARY_FAULT_KINDS = ("raw_frame", "early_stopping", "catboost_verbose", "library_import", "string_labels")
"""Faults only a library-family program can get (see the module docstring)."""

PIPELINE_RETURN = "return make_pipeline(build_preprocessor(PREPROCESS_KIND), estimator)"
RAW_RETURN = "return estimator  # boosted trees handle missing values natively"
LABEL_LINE = "y = label_encoder.fit_transform(target_raw)"
STRING_LABEL_LINES = "label_encoder.fit(target_raw)\ny = target_raw.astype(str).to_numpy()  # class names as labels"

_SUBSCRIPT = re.compile(r'(\w+)\["([^"\n]+)"\](?!\s*=[^=])')
SLICE_LINES = ("y = y[:-1]", "X_test = X_test.iloc[:-1]", "X = X.iloc[1:]")
TIMER_LINES = ("_t_start = time.time()", "gc.collect()")


def _misspell(name: str, rng: random.Random, columns: list[str]) -> str | None:
    lowered = {c.lower() for c in columns}
    for _ in range(20):
        if len(name) < 3:
            cand = name + name[-1]
        else:
            i = rng.randrange(1, len(name) - 1)
            op = rng.choice(["drop", "swap", "double"])
            if op == "drop":
                cand = name[:i] + name[i + 1:]
            elif op == "swap":
                cand = name[:i] + name[i + 1] + name[i] + name[i + 2:]
            else:
                cand = name[:i] + name[i] + name[i:]
        if cand != name and cand.lower() not in lowered:
            return cand
    return None


def _insert_top(text: str, line: str) -> str:
    """Insert ``line`` after the gene's leading comment lines."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and lines[i].lstrip().startswith("#"):
        i += 1
    lines.insert(i, line)
    return "\n".join(lines)


def _append(text: str, line: str) -> str:
    return text.rstrip("\n") + "\n" + line + "\n\n"


def _has_string_features(public_dir: str) -> bool:
    """True when the DATA gene keeps a non-numeric feature column (it casts those to ``str``):
    a train.csv column shared with test.csv, not the id, the target or a dropped column."""
    info = infer_dataset({"public_dir": public_dir})
    train = read_csv(os.path.join(public_dir, "train.csv"))
    test_cols = set(read_csv(os.path.join(public_dir, "test.csv")).columns)
    return any(c in test_cols and c not in (info.id_col, info.target_col) and c not in info.drop_cols
               and not (pd.api.types.is_numeric_dtype(train[c]) or pd.api.types.is_bool_dtype(train[c]))
               for c in train.columns)


def library_faults(code: str, locus: str, public_dir: str) -> list[str]:
    """The :data:`LIBRARY_FAULT_KINDS` that apply to the gene at ``locus`` of ``code`` (empty for
    a program without a library family)."""
    genes = G.parse_genes(code)
    model = genes.get("MODEL") or ""
    lib = boosters.library_of(model)
    if lib is None:
        return []
    text = genes.get(locus) or ""
    kinds = []
    if locus == "MODEL":
        if (PIPELINE_RETURN in text and "import optuna" not in code and _has_string_features(public_dir)):
            kinds.append("raw_frame")
        if lib in ("lightgbm", "xgboost") and re.search(r"\bn_jobs=", text) and "early_stopping" not in text:
            kinds.append("early_stopping")
        if lib == "catboost" and "verbose=0," in text:
            kinds.append("catboost_verbose")
        if re.search(rf"^from {lib} import \w+$", text, re.M):
            kinds.append("library_import")
    if locus == "DATA" and "XGBClassifier(" in model and LABEL_LINE in text:
        kinds.append("string_labels")
    return kinds


def plant_library_fault(text: str, kind: str) -> tuple[str, str]:
    """The gene ``text`` with library fault ``kind`` planted; returns (text, description)."""
    if kind == "raw_frame":
        return text.replace(PIPELINE_RETURN, RAW_RETURN), "raw_frame: estimator fitted on the raw DataFrame"
    if kind == "early_stopping":
        return (re.sub(r"\bn_jobs=", "early_stopping_rounds=50, n_jobs=", text, count=1),
                "early_stopping: early_stopping_rounds=50 without an eval_set")
    if kind == "catboost_verbose":
        return (text.replace("verbose=0,", 'verbose=True, logging_level="Verbose",', 1),
                "catboost_verbose: verbose=True and logging_level='Verbose'")
    if kind == "library_import":
        m = re.search(r"^from \w+ import (\w+)\n", text, re.M)
        return text[: m.start()] + text[m.end():], f"library_import: removed the import of {m.group(1)}"
    if kind == "string_labels":
        return text.replace(LABEL_LINE, STRING_LABEL_LINES), "string_labels: XGBoost given class names as y"
    raise ValueError(f"unknown library fault {kind!r}")


def plant(code: str, locus: str, rng: random.Random, public_dir: str) -> tuple[str, str]:
    """Plant one fault in the gene at ``locus`` of ``code``; returns (code, description).

    The kind is drawn among :data:`FAULT_KINDS` and the :func:`library_faults` that apply
    (the first applicable in a shuffled order wins).
    """
    preamble, genes = G.split_program(code)
    text = genes.get(locus, "")
    columns = public_columns(public_dir)
    kinds = list(FAULT_KINDS) + library_faults(code, locus, public_dir)
    rng.shuffle(kinds)
    for kind in kinds:
        if kind in LIBRARY_FAULT_KINDS:
            genes[locus], desc = plant_library_fault(text, kind)
            return G.render_program(preamble, genes), f"{desc} in {locus}"
        if kind == "wrong_column":
            hits = [m for m in _SUBSCRIPT.finditer(text) if m.group(2) in columns]
            if not hits:
                continue
            m = rng.choice(hits)
            bad = _misspell(m.group(2), rng, columns)
            if not bad:
                continue
            new = text[: m.start(2)] + bad + text[m.end(2):]
            genes[locus] = new
            return G.render_program(preamble, genes), f"wrong_column: {m.group(2)} -> {bad} in {locus}"
        if kind == "missing_import":
            imported = [ln for ln in IMPORT_LINES if ln.startswith("from ") and ln in preamble.split("\n")]
            used = [ln for ln in imported
                    if re.search(rf"\b{ln.split(' import ')[1]}\(", text)]
            if locus == "MODEL" and used and rng.random() < 0.5:
                line = rng.choice(used)
                pre_lines = preamble.split("\n")
                pre_lines.remove(line)
                return (G.render_program("\n".join(pre_lines), genes),
                        f"missing_import: removed '{line}'")
            stmt = rng.choice(TIMER_LINES)
            module = stmt.split(".")[0].split("= ")[-1]
            if re.search(rf"^import {module}\b", preamble, re.M):
                continue
            genes[locus] = _insert_top(text, stmt)
            return G.render_program(preamble, genes), f"missing_import: '{stmt}' without 'import {module}'"
        if kind == "shape_error":
            stmt = rng.choice(SLICE_LINES)
            genes[locus] = _append(text, stmt) if locus == "DATA" else _insert_top(text, stmt)
            return G.render_program(preamble, genes), f"shape_error: '{stmt}' in {locus}"
    stmt = SLICE_LINES[0]
    genes[locus] = _append(text, stmt) if locus == "DATA" else _insert_top(text, stmt)
    return G.render_program(preamble, genes), f"shape_error: '{stmt}' in {locus}"
