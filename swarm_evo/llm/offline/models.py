"""The MODEL gene: model families with one interface, ``build_model()`` → unfitted pipeline.

A MODEL gene defines ``MODEL_NAME``, ``PREPROCESS_KIND`` and ``build_model()``, which returns
``make_pipeline(build_preprocessor(PREPROCESS_KIND), estimator)``. Hyper-parameters come from
other genes through ``cfg(name, default)``: LOSS (``REG_LOSS``, ``CLF_LOSS``, ``CLASS_WEIGHT``),
OPTIMIZER (``LEARNING_RATE``, ``N_ESTIMATORS``, ``MAX_ITER``), REGULARIZATION
(``REG_STRENGTH``, ``MAX_DEPTH``, ``MIN_SAMPLES_LEAF``), INITIALIZATION (``RANDOM_STATE``),
so any gene of one offline program can replace the same gene of another.

The tables here hold the scikit-learn families, always offered. The gradient-boosting library
families (LightGBM, XGBoost, CatBoost: :mod:`.boosters`) join them only when the sandbox's
interpreter has the library (``ctx["packages"]``, distribution name -> version); with no
such package every function below answers as if they did not exist.
"""

from __future__ import annotations

from . import boosters
from .family import Family

_RS = 'random_state=int(cfg("RANDOM_STATE", 42))'
_DEPTH = 'max_depth=cfg("MAX_DEPTH", None)'

CLASSIFIERS: dict[str, Family] = {f.key: f for f in [
    Family("hgb", "HistGradientBoosting", "tree",
           "HistGradientBoostingClassifier(\n"
           '        max_iter=int(cfg("N_ESTIMATORS", 250)), learning_rate=float(cfg("LEARNING_RATE", 0.06)),\n'
           f'        max_leaf_nodes=MAX_LEAF_NODES, {_DEPTH},\n'
           '        min_samples_leaf=int(cfg("MIN_SAMPLES_LEAF", 20)),\n'
           '        l2_regularization=float(cfg("REG_STRENGTH", 1.0)), class_weight=cfg("CLASS_WEIGHT", None),\n'
           f"        {_RS})",
           {"MAX_LEAF_NODES": 31}, prior=3.0),
    Family("rf", "RandomForest", "tree",
           "RandomForestClassifier(\n"
           '        n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 200), max_features=MAX_FEATURES_FRAC,\n'
           f'        {_DEPTH}, min_samples_leaf=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 8),\n'
           f'        class_weight=cfg("CLASS_WEIGHT", None), n_jobs=2, {_RS})',
           {"MAX_FEATURES_FRAC": 0.5}, prior=2.0),
    Family("et", "ExtraTrees", "tree",
           "ExtraTreesClassifier(\n"
           '        n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 200), max_features=MAX_FEATURES_FRAC,\n'
           f'        {_DEPTH}, min_samples_leaf=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 6),\n'
           f'        class_weight=cfg("CLASS_WEIGHT", None), n_jobs=2, {_RS})',
           {"MAX_FEATURES_FRAC": 0.6}, prior=1.5),
    Family("gb", "GradientBoosting", "tree",
           "GradientBoostingClassifier(\n"
           '        n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 120), learning_rate=float(cfg("LEARNING_RATE", 0.06)) * 1.5,\n'
           '        max_depth=int(cfg("MAX_DEPTH", None) or 3), subsample=SUBSAMPLE,\n'
           f'        min_samples_leaf=int(cfg("MIN_SAMPLES_LEAF", 20)), {_RS})',
           {"SUBSAMPLE": 0.8}, prior=2.0),
    Family("logreg", "LogisticRegression", "linear",
           "LogisticRegression(\n"
           '        C=1.0 / float(cfg("REG_STRENGTH", 1.0)) * C_SCALE, max_iter=int(cfg("MAX_ITER", 1000)),\n'
           '        solver=cfg("SOLVER", LR_SOLVER), tol=1e-3, class_weight=cfg("CLASS_WEIGHT", None))',
           {"C_SCALE": 1.0, "LR_SOLVER": "lbfgs"}, text=True, prior=1.5,
           text_constants={"C_SCALE": 5.0, "LR_SOLVER": "saga"}),
    Family("knn", "KNeighbors", "linear",
           "KNeighborsClassifier(n_neighbors=N_NEIGHBORS, weights=\"distance\")",
           {"N_NEIGHBORS": 25}, prior=0.8),
    Family("sgd", "SGDClassifier", "linear",
           "SGDClassifier(\n"
           '        loss=cfg("CLF_LOSS", "log_loss"), alpha=1e-4 * float(cfg("REG_STRENGTH", 1.0)),\n'
           '        max_iter=int(cfg("MAX_ITER", 1000)), tol=1e-4, class_weight=cfg("CLASS_WEIGHT", None),\n'
           f"        early_stopping=False, average=AVERAGE, {_RS})",
           {"AVERAGE": True}, text=True, prior=0.8),
    Family("nb", "MultinomialNB", "nonneg",
           "MultinomialNB(alpha=NB_ALPHA * float(cfg(\"REG_STRENGTH\", 1.0)))",
           {"NB_ALPHA": 0.1}, tabular=False, text=True, prior=1.2),
    Family("svc", "CalibratedLinearSVC", "linear",
           "CalibratedClassifierCV(\n"
           '        LinearSVC(C=SVC_C / float(cfg("REG_STRENGTH", 1.0)), max_iter=int(cfg("MAX_ITER", 1000)),\n'
           '                  class_weight=cfg("CLASS_WEIGHT", None)),\n'
           "        cv=3)",
           {"SVC_C": 0.5}, text=True, prior=1.3),
]}

REGRESSORS: dict[str, Family] = {f.key: f for f in [
    Family("hgb", "HistGradientBoosting", "tree",
           "HistGradientBoostingRegressor(\n"
           '        loss=cfg("REG_LOSS", "squared_error") if cfg("REG_LOSS", "squared_error") in ("squared_error", "absolute_error") else "squared_error",\n'
           '        max_iter=int(cfg("N_ESTIMATORS", 250)), learning_rate=float(cfg("LEARNING_RATE", 0.06)),\n'
           f'        max_leaf_nodes=MAX_LEAF_NODES, {_DEPTH},\n'
           '        min_samples_leaf=int(cfg("MIN_SAMPLES_LEAF", 20)),\n'
           f'        l2_regularization=float(cfg("REG_STRENGTH", 1.0)), {_RS})',
           {"MAX_LEAF_NODES": 31}, prior=3.0),
    Family("rf", "RandomForest", "tree",
           "RandomForestRegressor(\n"
           '        n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 300), max_features=MAX_FEATURES_FRAC,\n'
           f'        {_DEPTH}, min_samples_leaf=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 10),\n'
           f"        n_jobs=2, {_RS})",
           {"MAX_FEATURES_FRAC": 0.4}, prior=1.5),
    Family("et", "ExtraTrees", "tree",
           "ExtraTreesRegressor(\n"
           '        n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 300), max_features=MAX_FEATURES_FRAC,\n'
           f'        {_DEPTH}, min_samples_leaf=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 10),\n'
           f"        n_jobs=2, {_RS})",
           {"MAX_FEATURES_FRAC": 0.5}, prior=1.5),
    Family("gb", "GradientBoosting", "tree",
           "GradientBoostingRegressor(\n"
           '        loss=cfg("REG_LOSS", "squared_error"), n_estimators=min(int(cfg("N_ESTIMATORS", 250)), 300),\n'
           '        learning_rate=float(cfg("LEARNING_RATE", 0.06)), max_depth=int(cfg("MAX_DEPTH", None) or 3),\n'
           f'        subsample=SUBSAMPLE, min_samples_leaf=max(1, int(cfg("MIN_SAMPLES_LEAF", 20)) // 2), {_RS})',
           {"SUBSAMPLE": 0.8}, prior=2.5),
    Family("ridge", "Ridge", "linear",
           'Ridge(alpha=RIDGE_ALPHA * float(cfg("REG_STRENGTH", 1.0)))',
           {"RIDGE_ALPHA": 10.0}, text=True, prior=2.0),
    Family("enet", "ElasticNet", "linear",
           'ElasticNet(alpha=ENET_ALPHA * float(cfg("REG_STRENGTH", 1.0)), l1_ratio=L1_RATIO,\n'
           '                           max_iter=int(cfg("MAX_ITER", 1000)) * 5)',
           {"ENET_ALPHA": 0.001, "L1_RATIO": 0.5}, prior=1.5),
    Family("knn", "KNeighbors", "linear",
           'KNeighborsRegressor(n_neighbors=N_NEIGHBORS, weights="distance")',
           {"N_NEIGHBORS": 10}, prior=0.7),
    Family("svr", "SVR", "linear",
           'SVR(C=SVR_C / float(cfg("REG_STRENGTH", 1.0)), epsilon=SVR_EPSILON)',
           {"SVR_C": 3.0, "SVR_EPSILON": 0.01}, prior=1.2),
    Family("sgd", "SGDRegressor", "linear",
           "SGDRegressor(\n"
           '        loss=cfg("REG_LOSS", "squared_error") if cfg("REG_LOSS", "squared_error") in ("squared_error", "huber") else "epsilon_insensitive",\n'
           '        alpha=1e-3 * float(cfg("REG_STRENGTH", 1.0)),\n'
           f'        max_iter=int(cfg("MAX_ITER", 1000)), tol=1e-4, average=AVERAGE, {_RS})',
           {"AVERAGE": True}, prior=0.7),
]}


def families_for(task: str, packages: dict | None = None) -> dict[str, Family]:
    """The family table for ``"classification"`` or ``"regression"``: the scikit-learn
    families, then the library families whose package is in ``packages`` (name -> version)."""
    base = REGRESSORS if task == "regression" else CLASSIFIERS
    extra = boosters.available(task, packages)
    return {**base, **extra} if extra else base


def all_families(task: str) -> dict[str, Family]:
    """Every family of ``task``, installed or not (looking up a family a program names)."""
    return {**families_for(task), **boosters.families(task)}


def suitable(task: str, is_text: bool, packages: dict | None = None) -> list[Family]:
    """Families a draft may pick for this kind of data (all families stay runnable); library
    families only when ``packages`` lists their library."""
    fams = families_for(task, packages).values()
    return [f for f in fams if (f.text if is_text else f.tabular)]


def family_by_name(task: str, name: str) -> Family | None:
    """Look a family up by its display name (``MODEL_NAME``), library families included."""
    for f in all_families(task).values():
        if f.name == name:
            return f
    return None


def render_model_gene(fam: Family, constants: dict | None = None, is_text: bool = False) -> str:
    """Text of a MODEL gene for family ``fam`` (family constants overridable)."""
    consts = dict(fam.constants)
    if is_text:
        consts.update(fam.text_constants)
    consts.update(constants or {})
    lines = [
        f"# Model: {fam.name}; build_model() returns preprocessing + estimator, unfitted.",
        *fam.imports,
        f"MODEL_NAME = {fam.name!r}",
        f"PREPROCESS_KIND = {fam.kind!r}",
    ]
    lines += [f"{k} = {v!r}" for k, v in consts.items()]
    lines += [
        "",
        "",
        "def build_model():",
        '    """A fresh, unfitted pipeline: the DATA gene\'s preprocessing + the estimator."""',
        f"    estimator = {fam.estimator}",
        "    return make_pipeline(build_preprocessor(PREPROCESS_KIND), estimator)",
        "",
        "",
    ]
    return "\n".join(lines)
