"""The program preamble: imports and competition constants shared by every offline program.

All offline programs of one competition carry the same preamble, so any gene of one program
can replace the same gene of another (merge). One import per line, so a repair can add a
missing one back and a planted fault can be reasoned about line by line.
"""

from __future__ import annotations

from .dataset import DatasetInfo

IMPORT_LINES: tuple[str, ...] = (
    "import os",
    "import warnings",
    "",
    "import numpy as np",
    "import pandas as pd",
    "from sklearn.calibration import CalibratedClassifierCV",
    "from sklearn.compose import ColumnTransformer",
    "from sklearn.decomposition import TruncatedSVD",
    "from sklearn.ensemble import ExtraTreesClassifier",
    "from sklearn.ensemble import ExtraTreesRegressor",
    "from sklearn.ensemble import GradientBoostingClassifier",
    "from sklearn.ensemble import GradientBoostingRegressor",
    "from sklearn.ensemble import HistGradientBoostingClassifier",
    "from sklearn.ensemble import HistGradientBoostingRegressor",
    "from sklearn.ensemble import RandomForestClassifier",
    "from sklearn.ensemble import RandomForestRegressor",
    "from sklearn.feature_extraction.text import TfidfVectorizer",
    "from sklearn.impute import SimpleImputer",
    "from sklearn.linear_model import ElasticNet",
    "from sklearn.linear_model import LogisticRegression",
    "from sklearn.linear_model import Ridge",
    "from sklearn.linear_model import SGDClassifier",
    "from sklearn.linear_model import SGDRegressor",
    "from sklearn.metrics import accuracy_score",
    "from sklearn.metrics import f1_score",
    "from sklearn.metrics import log_loss",
    "from sklearn.metrics import mean_absolute_error",
    "from sklearn.metrics import mean_squared_error",
    "from sklearn.metrics import roc_auc_score",
    "from sklearn.model_selection import KFold",
    "from sklearn.model_selection import StratifiedKFold",
    "from sklearn.naive_bayes import ComplementNB",
    "from sklearn.naive_bayes import MultinomialNB",
    "from sklearn.neighbors import KNeighborsClassifier",
    "from sklearn.neighbors import KNeighborsRegressor",
    "from sklearn.pipeline import make_pipeline",
    "from sklearn.preprocessing import LabelEncoder",
    "from sklearn.preprocessing import MinMaxScaler",
    "from sklearn.preprocessing import OneHotEncoder",
    "from sklearn.preprocessing import OrdinalEncoder",
    "from sklearn.preprocessing import StandardScaler",
    "from sklearn.svm import LinearSVC",
    "from sklearn.svm import SVR",
)

EXTRA_IMPORTS: dict[str, str] = {
    "time": "import time",
    "gc": "import gc",
    "math": "import math",
    "sys": "import sys",
    "json": "import json",
    "re": "import re",
    "random": "import random",
}


def known_imports() -> dict[str, str]:
    """Map of a bound name (``np``, ``KFold``, ``time``, ``LGBMClassifier``, ``optuna``) to the
    import line that binds it."""
    from .boosters import LIBRARY_IMPORTS

    out = {**EXTRA_IMPORTS, **LIBRARY_IMPORTS}
    for line in IMPORT_LINES:
        if not line:
            continue
        if line.startswith("from "):
            out[line.split(" import ")[1].strip()] = line
        elif " as " in line:
            out[line.split(" as ")[1].strip()] = line
        else:
            out[line.split()[1]] = line
    return out


def render_preamble(info: DatasetInfo, title: str) -> str:
    """The preamble text (docstring, imports, constants, ``cfg`` helper) for a competition."""
    lines = [f'"""{title} (offline model: pandas + scikit-learn)."""', ""]
    lines += list(IMPORT_LINES)
    lines += [
        "",
        'warnings.filterwarnings("ignore")',
        "",
        'INPUT_DIR = "./input"',
        'SUBMISSION_PATH = "./submission/submission.csv"',
        f"ID_COL = {info.id_col!r}",
        f"TARGET_COL = {info.target_col!r}",
        f"SUBMISSION_COLS = {list(info.submission_cols)!r}",
        f"GRADER = {info.grader!r}",
        f"TASK = {info.task!r}",
        f"OUTPUT = {info.output!r}",
        "",
        "",
        "def cfg(name, default):",
        '    """A constant set by an optional gene (LOSS, OPTIMIZER, ...), else ``default``."""',
        "    return globals().get(name, default)",
        "",
        "",
    ]
    return "\n".join(lines)
