"""Gradient-boosting library families (LightGBM, XGBoost, CatBoost) and the optuna CV search.

Offered only when the sandbox's interpreter has the library: ``ctx["packages"]`` (distribution
name -> version, from the runtime probe; ``xgboost`` also stands for ``xgboost-cpu``; a CTX
without the key counts as ``{}``). With none of them installed the offline model writes
exactly the scikit-learn programs it always wrote.

Each family maps the shared ``cfg`` constants onto its library's parameters (same defaults
as the scikit-learn families: ``N_ESTIMATORS`` 250, ``LEARNING_RATE`` 0.06, ``MAX_DEPTH``
None, ``REG_STRENGTH`` 1.0, ``MIN_SAMPLES_LEAF`` 20, ``RANDOM_STATE`` 42):

==============  ===========================  =========================  ===========================
constant        LightGBM                     XGBoost                    CatBoost
==============  ===========================  =========================  ===========================
N_ESTIMATORS    n_estimators                 n_estimators               iterations
LEARNING_RATE   learning_rate                learning_rate              learning_rate
MAX_DEPTH       max_depth (None: -1) and     max_depth (None: 6,        depth (None: 6, cap 10)
                num_leaves <= 2**MAX_DEPTH   cap 12)
REG_STRENGTH    reg_lambda                   reg_lambda                 l2_leaf_reg = 3 x strength
MIN_SAMPLES_    min_child_samples            min_child_weight =         min_data_in_leaf (honoured
LEAF                                         max(1, leaf // 10)         by Depthwise/Lossguide)
REG_LOSS        objective regression /       reg:squarederror /         RMSE / MAE / Huber
                regression_l1 / huber        absoluteerror / pseudohuber
CLASS_WEIGHT    class_weight                 (none)                     auto_class_weights
RANDOM_STATE    random_state                 random_state               random_seed
==============  ===========================  =========================  ===========================

Every estimator is quiet (``verbose=-1`` / ``verbosity=0`` / ``verbose=0``) and uses the
threads the sandbox gives it (``OMP_NUM_THREADS``: cores / parallel workers; a fixed 2 threads
per program made a LightGBM fit 4.5x slower on 2 busy cores); CatBoost writes no ``catboost_info`` directory. Family
constants (``NUM_LEAVES``, ``SUBSAMPLE``, ``COLSAMPLE``, ``GROW_POLICY``,
``BAGGING_TEMPERATURE``) are perturbed by mutation within bounds of their own
(``programs._BOUNDS``, ``programs._FLOAT_BOUNDS``; ``GROW_POLICY`` among :data:`GROW_POLICIES`). Priors make the three libraries together the likeliest draft families
for tabular data (≈ 60 %, as a real LLM asked for a strong tabular solution); they are never
offered for text data.
"""

from __future__ import annotations

from .family import Family

_RS = 'random_state=int(cfg("RANDOM_STATE", 42))'
_THREADS = 'int(os.environ.get("OMP_NUM_THREADS", "1"))'
_LGBM_COMMON = (
    '        n_estimators=int(cfg("N_ESTIMATORS", 250)), learning_rate=float(cfg("LEARNING_RATE", 0.06)),\n'
    '        num_leaves=min(NUM_LEAVES, 2 ** int(cfg("MAX_DEPTH", None) or 16)), max_depth=int(cfg("MAX_DEPTH", None) or -1),\n'
    '        min_child_samples=int(cfg("MIN_SAMPLES_LEAF", 20)), reg_lambda=float(cfg("REG_STRENGTH", 1.0)),\n'
    "        subsample=SUBSAMPLE, subsample_freq=1, colsample_bytree=COLSAMPLE,\n")
_XGB_COMMON = (
    '        n_estimators=int(cfg("N_ESTIMATORS", 250)), learning_rate=float(cfg("LEARNING_RATE", 0.06)),\n'
    '        max_depth=min(int(cfg("MAX_DEPTH", None) or 6), 12),\n'
    '        min_child_weight=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 10), reg_lambda=float(cfg("REG_STRENGTH", 1.0)),\n'
    '        subsample=SUBSAMPLE, colsample_bytree=COLSAMPLE, tree_method="hist",\n')
_CAT_COMMON = (
    '        iterations=int(cfg("N_ESTIMATORS", 250)), learning_rate=float(cfg("LEARNING_RATE", 0.06)),\n'
    '        depth=min(int(cfg("MAX_DEPTH", None) or 6), 10), l2_leaf_reg=3.0 * float(cfg("REG_STRENGTH", 1.0)),\n'
    '        min_data_in_leaf=int(cfg("MIN_SAMPLES_LEAF", 20)), grow_policy=GROW_POLICY,\n'
    "        bagging_temperature=BAGGING_TEMPERATURE,\n")
_CAT_TAIL = '        thread_count=int(os.environ.get("OMP_NUM_THREADS", "1")), verbose=0, allow_writing_files=False, random_seed=int(cfg("RANDOM_STATE", 42)))'

_LGBM_CONSTS = {"NUM_LEAVES": 31, "SUBSAMPLE": 0.8, "COLSAMPLE": 0.8}
_XGB_CONSTS = {"SUBSAMPLE": 0.8, "COLSAMPLE": 0.8}
_CAT_CONSTS = {"GROW_POLICY": "SymmetricTree", "BAGGING_TEMPERATURE": 1.0}

BOOSTER_CLASSIFIERS: dict[str, Family] = {f.key: f for f in [
    Family("lgbm", "LightGBM", "tree",
           "LGBMClassifier(\n" + _LGBM_COMMON
           + f'        class_weight=cfg("CLASS_WEIGHT", None), n_jobs={_THREADS}, verbose=-1, {_RS})',
           _LGBM_CONSTS, prior=8.0, package="lightgbm", imports=("from lightgbm import LGBMClassifier",)),
    Family("xgb", "XGBoost", "tree",
           "XGBClassifier(\n" + _XGB_COMMON + f"        n_jobs={_THREADS}, verbosity=0, {_RS})",
           _XGB_CONSTS, prior=6.5, package="xgboost", imports=("from xgboost import XGBClassifier",)),
    Family("cat", "CatBoost", "tree",
           "CatBoostClassifier(\n" + _CAT_COMMON
           + '        auto_class_weights="Balanced" if cfg("CLASS_WEIGHT", None) == "balanced" else None,\n'
           + _CAT_TAIL,
           _CAT_CONSTS, prior=5.5, package="catboost", imports=("from catboost import CatBoostClassifier",)),
]}

BOOSTER_REGRESSORS: dict[str, Family] = {f.key: f for f in [
    Family("lgbm", "LightGBM", "tree",
           "LGBMRegressor(\n"
           '        objective={"absolute_error": "regression_l1", "huber": "huber"}.get(cfg("REG_LOSS", "squared_error"), "regression"),\n'
           + _LGBM_COMMON + f"        n_jobs={_THREADS}, verbose=-1, {_RS})",
           _LGBM_CONSTS, prior=8.0, package="lightgbm", imports=("from lightgbm import LGBMRegressor",)),
    Family("xgb", "XGBoost", "tree",
           "XGBRegressor(\n"
           '        objective={"absolute_error": "reg:absoluteerror", "huber": "reg:pseudohubererror"}.get(\n'
           '            cfg("REG_LOSS", "squared_error"), "reg:squarederror"),\n'
           + _XGB_COMMON + f"        n_jobs={_THREADS}, verbosity=0, {_RS})",
           _XGB_CONSTS, prior=7.0, package="xgboost", imports=("from xgboost import XGBRegressor",)),
    Family("cat", "CatBoost", "tree",
           "CatBoostRegressor(\n"
           '        loss_function={"absolute_error": "MAE", "huber": "Huber:delta=1.0"}.get(cfg("REG_LOSS", "squared_error"), "RMSE"),\n'
           + _CAT_COMMON + _CAT_TAIL,
           _CAT_CONSTS, prior=5.5, package="catboost", imports=("from catboost import CatBoostRegressor",)),
]}

LIBRARY_IMPORTS: dict[str, str] = {
    line.split(" import ")[1]: line
    for fam in [*BOOSTER_CLASSIFIERS.values(), *BOOSTER_REGRESSORS.values()] for line in fam.imports
} | {"optuna": "import optuna"}
"""Bound name -> import line of every library name an offline program may use (NameError repair)."""

ESTIMATOR_LIBRARY: dict[str, str] = {
    "LGBMClassifier": "lightgbm", "LGBMRegressor": "lightgbm", "XGBClassifier": "xgboost",
    "XGBRegressor": "xgboost", "CatBoostClassifier": "catboost", "CatBoostRegressor": "catboost",
}
"""Estimator class -> library (finding the library a MODEL gene uses)."""

GROW_POLICIES = ("SymmetricTree", "Depthwise", "Lossguide")
"""CatBoost's tree growing policies (``GROW_POLICY``; min_data_in_leaf needs the last two)."""

_ALIASES = {"xgboost": ("xgboost", "xgboost-cpu")}


def installed(packages: dict | None, name: str) -> bool:
    """True when ``packages`` (distribution name -> version, or None) lists library ``name``."""
    return any(alias in (packages or {}) for alias in _ALIASES.get(name, (name,)))


def families(task: str) -> dict[str, Family]:
    """Every library family of ``task`` (``"classification"`` or ``"regression"``)."""
    return BOOSTER_REGRESSORS if task == "regression" else BOOSTER_CLASSIFIERS


def available(task: str, packages: dict | None) -> dict[str, Family]:
    """The library families of ``task`` whose library ``packages`` lists (empty without any)."""
    if not packages:
        return {}
    return {k: f for k, f in families(task).items() if installed(packages, f.package)}


def library_of(code: str) -> str | None:
    """The library (``"lightgbm"``, ``"xgboost"``, ``"catboost"``) whose estimator ``code``
    constructs, else None."""
    for cls, lib in ESTIMATOR_LIBRARY.items():
        if f"{cls}(" in code:
            return lib
    return None


# ----------------------------------------------------------------------------- optuna search
OPTUNA_DEFAULTS = {"OPTUNA_TRIALS": 8, "OPTUNA_TIMEOUT": 60, "OPTUNA_N_PARAMS": 3}
"""TRAINING_TRICKS constants of the optuna variant: trials, seconds, parameters tuned."""
OPTUNA_DRAFT_RATE = 0.3
"""Share of tabular drafts that tune with optuna when it is installed."""

SEARCH_SPACE = (
    ("learning_rate", "float", 0.01, 0.3),
    ("num_leaves", "int", 8, 128),
    ("depth", "int", 3, 10),
    ("min_child_samples", "int", 5, 100),
    ("min_child_weight", "float", 0.5, 20.0),
    ("max_leaf_nodes", "int", 8, 128),
    ("min_samples_leaf", "int", 1, 80),
    ("max_depth", "int", 3, 12),
    ("l2_leaf_reg", "float", 0.5, 30.0),
    ("reg_lambda", "float", 0.01, 30.0),
    ("l2_regularization", "float", 0.01, 30.0),
    ("max_features", "float", 0.2, 1.0),
    ("C", "float", 0.01, 100.0),
    ("alpha", "float", 1e-5, 100.0),
    ("n_neighbors", "int", 3, 80),
)
"""(estimator parameter, "int" | "float", low, high), all searched on a log scale; a study
tunes the first ``OPTUNA_N_PARAMS`` the model's estimator has with a positive number as value,
so one TRAINING_TRICKS gene tunes any MODEL gene (LightGBM: learning_rate, num_leaves,
min_child_samples; XGBoost: learning_rate, min_child_weight, max_depth; CatBoost:
learning_rate, depth, l2_leaf_reg; HistGradientBoosting: learning_rate, max_leaf_nodes,
min_samples_leaf)."""


def optuna_search_lines(lower_is_better: bool) -> list[str]:
    """Lines of the optuna variant of the TRAINING_TRICKS CV (after ``splitter`` is defined):
    a seeded TPE study of ``OPTUNA_TRIALS`` trials (at most ``OPTUNA_TIMEOUT`` s), each trial the
    same K-fold CV on the competition metric, the gene's own settings as first trial; defines
    ``cv_score`` (the best trial's mean fold score) and ``final_model`` (unfitted, best params)."""
    direction = "minimize" if lower_is_better else "maximize"
    space = ",\n".join(f"    {entry!r}" for entry in SEARCH_SPACE)
    return [
        f"SEARCH_SPACE = (\n{space},\n)",
        "",
        "",
        "def tuned_model(params):",
        '    """build_model() with the estimator\'s parameters ``params`` set (unfitted)."""',
        "    model = build_model()",
        "    step = model.steps[-1][0]",
        '    return model.set_params(**{f"{step}__{k}": v for k, v in params.items()})',
        "",
        "",
        "def search_space(model):",
        '    """The first OPTUNA_N_PARAMS entries of SEARCH_SPACE the estimator has (positive number)."""',
        "    have = model.steps[-1][1].get_params()",
        "    return [(name, kind, lo, hi) for name, kind, lo, hi in SEARCH_SPACE",
        "            if isinstance(have.get(name), (int, float)) and not isinstance(have.get(name), bool)",
        "            and have[name] > 0][:OPTUNA_N_PARAMS]",
        "",
        "",
        "def cv_score_of(params):",
        '    """Mean fold score of the model with ``params`` (same folds and metric as every trial)."""',
        "    scores = []",
        "    for tr_idx, va_idx in splitter.split(X, y):",
        "        model = tuned_model(params)",
        "        model.fit(X.iloc[tr_idx], fit_target(y[tr_idx]))",
        "        scores.append(compute_metric(y[va_idx], predict(model, X.iloc[va_idx])))",
        "    return float(np.mean(scores))",
        "",
        "",
        "def objective(trial):",
        '    """One trial: sample the space, return the CV score."""',
        "    params = {}",
        "    for name, kind, lo, hi in SPACE:",
        '        suggest = trial.suggest_int if kind == "int" else trial.suggest_float',
        "        params[name] = suggest(name, lo, hi, log=True)",
        "    score = cv_score_of(params)",
        '    print(f"trial {trial.number + 1}/{OPTUNA_TRIALS}: {GRADER} = {score:.5f} {params}", flush=True)',
        "    return score",
        "",
        "",
        "SPACE = search_space(build_model())",
        "base_params = build_model().steps[-1][1].get_params()",
        "optuna.logging.set_verbosity(optuna.logging.WARNING)",
        f'study = optuna.create_study(direction="{direction}",',
        '                            sampler=optuna.samplers.TPESampler(seed=int(cfg("RANDOM_STATE", 42))))',
        "study.enqueue_trial({name: (int if kind == \"int\" else float)(min(max(base_params[name], lo), hi))",
        "                     for name, kind, lo, hi in SPACE})  # the gene's own settings first",
        "study.optimize(objective, n_trials=OPTUNA_TRIALS if SPACE else 1, timeout=OPTUNA_TIMEOUT)",
        "cv_score = float(study.best_value)",
        'print(f"optuna: best {GRADER} = {cv_score:.5f} with {study.best_params} after {len(study.trials)} trials")',
        "",
        "final_model = tuned_model(study.best_params)",
    ]
