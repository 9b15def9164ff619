"""Genes other than DATA and MODEL: LOSS, OPTIMIZER, REGULARIZATION, INITIALIZATION, TRAINING_TRICKS.

LOSS, OPTIMIZER and INITIALIZATION are either stubs (comment-only, seed 000 §11) or small
blocks of constants the model builder reads through ``cfg``; REGULARIZATION always holds the
strength constants; TRAINING_TRICKS runs the K-fold CV on the grader's metric, fits on all
data, writes ``./submission/submission.csv`` and prints ``Validation metric: <float>``; its
optuna variant (constant ``OPTUNA_TRIALS`` present; only drafted when optuna is installed,
:mod:`.boosters`) runs that CV inside a small seeded study and refits the best parameters.
"""

from __future__ import annotations

import json

from . import boosters
from .dataset import DatasetInfo
from .preamble import IMPORT_LINES

STUBS = {
    "LOSS": "# Loss: the estimator's default objective.\n\n",
    "OPTIMIZER": "# Optimizer: the estimator's default solver and iteration settings.\n\n",
    "INITIALIZATION": "# Initialization: scikit-learn defaults.\n\n",
}

REG_LOSSES = ("squared_error", "absolute_error", "huber")
CLF_LOSSES = ("log_loss", "modified_huber")


def loss_options(info: DatasetInfo) -> list[dict]:
    """Possible LOSS constant sets for this competition."""
    if info.task == "regression":
        return [{"REG_LOSS": v} for v in REG_LOSSES]
    opts = [{"CLF_LOSS": v, "CLASS_WEIGHT": None} for v in CLF_LOSSES]
    if info.output == "label":
        opts.append({"CLF_LOSS": "log_loss", "CLASS_WEIGHT": "balanced"})
    return opts


def render_constants(header: str, consts: dict) -> str:
    """A gene made of a comment header and ``NAME = value`` lines."""
    lines = [header] + [f"{k} = {v!r}" for k, v in consts.items()]
    return "\n".join(lines) + "\n\n"


def render_loss(consts: dict | None) -> str:
    """A LOSS gene (stub when ``consts`` is None)."""
    if consts is None:
        return STUBS["LOSS"]
    return render_constants("# Loss: objective settings read by build_model() via cfg().", consts)


def render_optimizer(consts: dict | None) -> str:
    """An OPTIMIZER gene (stub when ``consts`` is None)."""
    if consts is None:
        return STUBS["OPTIMIZER"]
    return render_constants("# Optimizer: boosting rounds, step size and solver iterations.", consts)


def default_optimizer(info: DatasetInfo) -> dict:
    """Default OPTIMIZER constants."""
    return {"LEARNING_RATE": 0.06, "N_ESTIMATORS": 250, "MAX_ITER": 1000}


def default_regularization(info: DatasetInfo) -> dict:
    """Default REGULARIZATION constants."""
    return {"REG_STRENGTH": 1.0, "MAX_DEPTH": None, "MIN_SAMPLES_LEAF": 20}


def render_regularization(consts: dict) -> str:
    """A REGULARIZATION gene."""
    return render_constants(
        "# Regularization: REG_STRENGTH scales each family's penalty (alpha, 1/C, l2); tree limits.",
        consts)


def render_initialization(seed: int | None) -> str:
    """An INITIALIZATION gene (stub when ``seed`` is None)."""
    if seed is None:
        return STUBS["INITIALIZATION"]
    return (
        "# Initialization: one seed for numpy and every estimator.\n"
        f"RANDOM_STATE = {seed}\n"
        "np.random.seed(RANDOM_STATE)\n\n"
    )


def default_tricks(info: DatasetInfo) -> dict:
    """Default TRAINING_TRICKS constants."""
    consts = {"N_FOLDS": 3 if info.is_text else 5}
    if info.task == "regression":
        consts["LOG_TARGET"] = True
    if info.output == "proba_multi" or info.output == "proba_binary":
        consts["CLIP_EPS"] = 1e-6
    return consts


PORTABLE_METRICS = {
    "root_mean_squared_error": "float(np.sqrt(mean_squared_error(y_true, pred)))",
    "root_mean_squared_log_error": "float(np.sqrt(mean_squared_error(np.log1p(y_true), np.log1p(np.clip(pred, 0, None)))))",
}
"""``sklearn.metrics`` functions newer than some program environments' scikit-learn (1.4), written
with the functions every version has; the value is the same."""


def metric_function(info: DatasetInfo) -> str:
    """The ``sklearn.metrics`` function of the competition's metric: the CTX's
    ``competition.metric`` (the grader's), else ``accuracy_score`` for classification and
    ``root_mean_squared_error`` for regression."""
    return info.metric or ("accuracy_score" if info.task == "classification" else "root_mean_squared_error")


def metric_lines(info: DatasetInfo) -> list[str]:
    """The body of ``compute_metric(y_true, pred)``: the grader's metric (:func:`metric_function`
    with the CTX's ``competition.metric_kwargs``) on the encoded targets and the predictions in
    the grader's space (:func:`_predict_lines`). A probability metric of two classes gets both
    columns (``log_loss``'s ``labels=[0, 1]``, as the grader passes them), of several classes
    the encoded class indices; a function the preamble does not import is imported here."""
    fn = metric_function(info)
    kwargs = "".join(f", {k}={json.dumps(v)}" for k, v in sorted(info.metric_kwargs.items()))
    if fn == "log_loss" and info.output == "proba_binary":
        call = f"log_loss(y_true, np.column_stack([1 - pred, pred]), labels=[0, 1]{kwargs})"
    elif fn == "log_loss" and info.output == "proba_multi":
        call = f"log_loss(y_true, pred, labels=list(range(len(CLASSES))){kwargs})"
    elif fn in PORTABLE_METRICS and not kwargs:
        return [f"    return {PORTABLE_METRICS[fn]}"]
    else:
        call = f"{fn}(y_true, pred{kwargs})"
    if f"from sklearn.metrics import {fn}" in IMPORT_LINES:
        return [f"    return {call}"]
    return [f"    from sklearn.metrics import {fn}", "", f"    return {call}"]


def _predict_lines(info: DatasetInfo) -> list[str]:
    head = ["def predict(model, features):", '    """Predictions in the grader\'s space."""']
    if info.output == "label":
        return head + ["    return model.predict(features)"]
    if info.output == "proba_binary":
        return head + ['    return np.clip(model.predict_proba(features)[:, 1], cfg("CLIP_EPS", 1e-6), 1 - cfg("CLIP_EPS", 1e-6))']
    if info.output == "proba_multi":
        return head + [
            '    proba = np.clip(model.predict_proba(features), cfg("CLIP_EPS", 1e-6), 1.0)',
            "    return proba / proba.sum(axis=1, keepdims=True)",
        ]
    clip = "np.clip(pred, 0, None)" if info.non_negative else "pred"
    return head + [
        "    pred = model.predict(features)",
        '    if cfg("LOG_TARGET", False):',
        "        pred = np.expm1(np.clip(pred, -20, 30))",
        f"    return {clip}",
    ]


def _submission_lines(info: DatasetInfo) -> list[str]:
    lines = [
        f'sample = pd.read_csv(os.path.join(INPUT_DIR, "{info.sample_file}"))',
        "submission = pd.DataFrame({ID_COL: test_ids})",
    ]
    if info.output == "label":
        lines += [
            "labels = label_encoder.inverse_transform(np.asarray(test_pred).astype(int))",
            "if pd.api.types.is_bool_dtype(sample[SUBMISSION_COLS[0]]):",
            "    labels = pd.Series(labels).astype(str).str.lower().isin([\"true\", \"1\"]).to_numpy()",
            "submission[SUBMISSION_COLS[0]] = labels",
        ]
    elif info.output == "proba_multi":
        lines += [
            "for col in SUBMISSION_COLS:",
            "    submission[col] = test_pred[:, CLASSES.index(str(col))]",
        ]
    else:
        lines += ["submission[SUBMISSION_COLS[0]] = test_pred"]
    lines += [
        "submission = submission.set_index(ID_COL).loc[sample[ID_COL]].reset_index()[[ID_COL] + SUBMISSION_COLS]",
        "os.makedirs(os.path.dirname(SUBMISSION_PATH), exist_ok=True)",
        "submission.to_csv(SUBMISSION_PATH, index=False)",
        'print(f"wrote {SUBMISSION_PATH}: {submission.shape}")',
    ]
    return lines


def render_tricks(info: DatasetInfo, consts: dict | None = None) -> str:
    """A TRAINING_TRICKS gene: CV on the grader's metric, final fit, submission, metric line.

    With ``OPTUNA_TRIALS`` in ``consts`` the CV runs inside an optuna study
    (:func:`.boosters.optuna_search_lines`; ``OPTUNA_TIMEOUT`` and ``OPTUNA_N_PARAMS`` default
    to :data:`.boosters.OPTUNA_DEFAULTS`) and the best trial's parameters are refitted.
    """
    c = default_tricks(info)
    c.update(consts or {})
    search = "OPTUNA_TRIALS" in c
    if search:
        c.update({k: v for k, v in boosters.OPTUNA_DEFAULTS.items() if k not in c})
        lines = ["# Training: an optuna study (seeded TPE) over the estimator's main parameters, each",
                 "# trial a stratified/plain K-fold CV on the grader's metric; refit the best on all",
                 "# rows, write the submission.",
                 "import optuna"]
    else:
        lines = ["# Training: stratified/plain K-fold CV on the grader's metric, refit on all rows,"
                 " write the submission."]
    lines += [f"{k} = {v!r}" for k, v in c.items()]
    lines += [
        "",
        "",
        "def compute_metric(y_true, pred):",
        f'    """The competition metric ({info.grader}) with sklearn.metrics."""',
        *metric_lines(info),
        "",
        "",
        "def fit_target(values):",
        '    """The target the estimator is trained on."""',
    ]
    if info.task == "regression":
        lines += ['    return np.log1p(values) if cfg("LOG_TARGET", False) else values']
    else:
        lines += ["    return values"]
    lines += ["", ""] + _predict_lines(info) + [
        "",
        "",
        "if TASK == \"classification\":",
        '    splitter = StratifiedKFold(n_splits=N_FOLDS, shuffle=True, random_state=int(cfg("RANDOM_STATE", 42)))',
        "else:",
        '    splitter = KFold(n_splits=N_FOLDS, shuffle=True, random_state=int(cfg("RANDOM_STATE", 42)))',
    ]
    if search:
        lines += boosters.optuna_search_lines(info.lower_is_better)
    else:
        lines += [
            "fold_scores = []",
            "for fold, (tr_idx, va_idx) in enumerate(splitter.split(X, y)):",
            "    model = build_model()",
            "    model.fit(X.iloc[tr_idx], fit_target(y[tr_idx]))",
            "    fold_scores.append(compute_metric(y[va_idx], predict(model, X.iloc[va_idx])))",
            '    print(f"fold {fold + 1}/{N_FOLDS}: {GRADER} = {fold_scores[-1]:.5f}", flush=True)',
            "cv_score = float(np.mean(fold_scores))",
            "",
            "final_model = build_model()",
        ]
    lines += [
        "final_model.fit(X, fit_target(y))",
        "test_pred = predict(final_model, X_test)",
        "",
    ]
    lines += _submission_lines(info)
    lines += ['print(f"Validation metric: {cv_score:.6f}")', ""]
    return "\n".join(lines)
