"""Whole offline programs: draft assembly, approach tags and the per-locus mutation operators.

``packages`` arguments are the CTX's ``packages`` (distribution name -> version of what the
sandbox's interpreter has; None or missing = ``{}``): library families (:mod:`.boosters`) and
the optuna TRAINING_TRICKS variant are drafted or mutated into only when their library is
listed, and with none listed every function draws the same random numbers as before they
existed (same replies for the same CTX).
"""

from __future__ import annotations

import random
import re

from swarm_evo.population import genes as G

from . import alleles, boosters, data_gene, models
from .dataset import DatasetInfo
from .preamble import render_preamble

_CONST = re.compile(r"^([A-Z][A-Z0-9_]*) = (.+?)\s*$", re.M)


def constants(text: str) -> dict[str, str]:
    """``NAME = <source>`` assignments of upper-case constants in a gene (source text kept)."""
    return {m.group(1): m.group(2) for m in _CONST.finditer(text or "")}


def _lit(text: str | None):
    import ast
    try:
        return ast.literal_eval(text) if text is not None else None
    except (ValueError, SyntaxError):
        return text


def used_families(draft_history: list[dict] | None, task: str) -> set[str]:
    """Family keys whose display names appear in earlier drafts' approach tags."""
    used: set[str] = set()
    for rec in draft_history or []:
        tag = str(rec.get("approach_tag") or "")
        for fam in models.all_families(task).values():
            if re.search(rf"\b{re.escape(fam.name)}\b", tag):
                used.add(fam.key)
    return used


def _weighted_pick(rng: random.Random, items: list, weights: list[float]):
    total = sum(weights)
    r = rng.random() * total
    for item, w in zip(items, weights):
        r -= w
        if r <= 0:
            return item
    return items[-1]


def choose_draft_spec(info: DatasetInfo, rng: random.Random, draft_history: list[dict] | None,
                      packages: dict | None = None) -> dict:
    """Pick a family, feature set and gene settings; prefer families not in the draft history.

    Library families join the candidates when ``packages`` lists their library; with optuna
    listed, a tabular draft tunes with an optuna study with probability
    :data:`.boosters.OPTUNA_DRAFT_RATE`.
    """
    cands = models.suitable(info.task, info.is_text, packages)
    used = used_families(draft_history, info.task)
    fresh = [f for f in cands if f.key not in used] or cands
    fam = _weighted_pick(rng, fresh, [f.prior for f in fresh])
    sets = data_gene.feature_sets(info)
    feature_set = sets[0] if rng.random() < 0.35 else sets[1]
    if info.is_text:
        feature_set = sets[0] if rng.random() < 0.6 else sets[1]
    loss = None if rng.random() < 0.5 else rng.choice(alleles.loss_options(info))
    optimizer = None
    if rng.random() < 0.6:
        optimizer = alleles.default_optimizer(info)
        optimizer["LEARNING_RATE"] = rng.choice([0.04, 0.05, 0.06, 0.08])
        optimizer["N_ESTIMATORS"] = rng.choice([200, 250, 300])
    reg = alleles.default_regularization(info)
    reg["MIN_SAMPLES_LEAF"] = rng.choice([10, 20, 30])
    reg["REG_STRENGTH"] = rng.choice([0.5, 1.0, 1.0, 2.0])
    init = None if rng.random() < 0.5 else rng.randint(0, 9999)
    tricks: dict = {}
    if (not info.is_text and boosters.installed(packages, "optuna")
            and rng.random() < boosters.OPTUNA_DRAFT_RATE):
        tricks = {k: boosters.OPTUNA_DEFAULTS[k] for k in ("OPTUNA_TRIALS", "OPTUNA_TIMEOUT")}
    return {"family": fam.key, "feature_set": feature_set, "loss": loss, "optimizer": optimizer,
            "regularization": reg, "init": init, "tricks": tricks}


def render_genes(info: DatasetInfo, spec: dict) -> dict[str, str]:
    """The 7 genes of a program described by a draft spec."""
    fam = models.all_families(info.task)[spec["family"]]
    return {
        "DATA": data_gene.render_data_gene(info, spec["feature_set"], spec.get("data_params")),
        "MODEL": models.render_model_gene(fam, spec.get("model_constants"), info.is_text),
        "LOSS": alleles.render_loss(spec.get("loss")),
        "OPTIMIZER": alleles.render_optimizer(spec.get("optimizer")),
        "REGULARIZATION": alleles.render_regularization(spec["regularization"]),
        "INITIALIZATION": alleles.render_initialization(spec.get("init")),
        "TRAINING_TRICKS": alleles.render_tricks(info, spec.get("tricks")),
    }


def render_program_from_spec(info: DatasetInfo, spec: dict, title: str) -> str:
    """A whole runnable program (preamble + 7 genes in LOCI order)."""
    return G.render_program(render_preamble(info, title), render_genes(info, spec), G.LOCI)


def approach_tag(code: str) -> str:
    """One-line approach tag derived from a program, e.g. "HistGradientBoosting + engineered features + 5-fold CV"
    or "LightGBM + raw columns + 5-fold CV + optuna (10 trials)"."""
    c = constants(code)
    parts = []
    name = _lit(c.get("MODEL_NAME"))
    if isinstance(name, str):
        parts.append(name)
    else:
        for cls in re.findall(r"\b([A-Z][A-Za-z]+(?:Classifier|Regressor|Regression|NB|SVC|SVR))\(", code):
            parts.append(cls)
            break
        if not parts:
            parts.append("custom model")
    fs = _lit(c.get("FEATURE_SET"))
    if isinstance(fs, str):
        parts.append(data_gene.FEATURE_SET_LABELS.get(fs, fs))
    folds = _lit(c.get("N_FOLDS"))
    if isinstance(folds, int):
        parts.append(f"{folds}-fold CV")
    if _lit(c.get("LOG_TARGET")) is True:
        parts.append("log1p target")
    loss = _lit(c.get("REG_LOSS")) or (_lit(c.get("CLF_LOSS")) if "SGD" in str(name) else None)
    if isinstance(loss, str) and loss not in ("squared_error", "log_loss"):
        parts.append(f"{loss} loss")
    if _lit(c.get("CLASS_WEIGHT")) == "balanced":
        parts.append("balanced classes")
    trials = _lit(c.get("OPTUNA_TRIALS"))
    if isinstance(trials, int):
        parts.append(f"optuna ({trials} trials)")
    return " + ".join(parts)


def plan_text(code: str, opening: str, detail: str = "") -> str:
    """A short plan paragraph for a code reply: ``opening`` (``{tag}`` in it becomes the code's
    approach tag), then ``detail``."""
    base = opening.format(tag=approach_tag(code))
    return (base + (" " + detail if detail else "")).strip()


def draft_plan(info: DatasetInfo, code: str) -> str:
    """The plan paragraph of a drafted program (and of its optuna study, when it has one)."""
    opening = ("Draft: {tag}. The program infers the id and target columns from the sample submission, "
               "preprocesses each column type, runs K-fold cross-validation on the competition metric "
               f"({info.grader}), refits on all rows and writes ./submission/submission.csv.")
    if isinstance(_lit(constants(code).get("OPTUNA_TRIALS")), int):
        opening += (" The cross-validation runs inside a seeded optuna TPE study over the estimator's "
                    "main parameters; the best trial is refitted.")
    return plan_text(code, opening)


# ----------------------------------------------------------------------------- mutation
_BOUNDS = {
    "N_FOLDS": (3, 7), "TFIDF_NGRAMS": (1, 5), "N_ESTIMATORS": (50, 600), "MAX_ITER": (200, 3000),
    "MIN_SAMPLES_LEAF": (1, 80), "TFIDF_MAX_FEATURES": (2000, 60000), "SVD_COMPONENTS": (16, 160),
    "MAX_LEAF_NODES": (7, 127), "N_NEIGHBORS": (3, 80), "MIN_CATEGORY_FREQ": (1, 50),
    "MAX_DEPTH": (2, 20), "RANDOM_STATE": (0, 99999),
    "NUM_LEAVES": (7, 255), "OPTUNA_TRIALS": (3, 20), "OPTUNA_TIMEOUT": (20, 120), "OPTUNA_N_PARAMS": (1, 4),
}
_FLOAT_BOUNDS = {"SUBSAMPLE": (0.3, 1.0), "MAX_FEATURES_FRAC": (0.1, 1.0), "L1_RATIO": (0.05, 0.95),
                 "LEARNING_RATE": (0.005, 0.5), "CLIP_EPS": (1e-9, 1e-3),
                 "COLSAMPLE": (0.3, 1.0), "BAGGING_TEMPERATURE": (0.05, 10.0)}
_CHOICES = {"REG_LOSS": alleles.REG_LOSSES, "CLF_LOSS": alleles.CLF_LOSSES,
            "GROW_POLICY": boosters.GROW_POLICIES}
"""String constants a mutation may switch to another allowed value."""


def _perturb_value(name: str, value, rng: random.Random):
    if isinstance(value, bool):
        return not value
    if value is None:
        if name == "MAX_DEPTH":
            return rng.choice([4, 6, 8, 12])
        return None
    if name == "RANDOM_STATE":
        return rng.randint(0, 99999)
    if isinstance(value, int):
        lo, hi = _BOUNDS.get(name, (1, 10 ** 6))
        if name in ("N_FOLDS", "TFIDF_NGRAMS"):
            new = value + rng.choice([-1, 1])
        else:
            new = int(round(value * rng.choice([0.5, 0.7, 1.4, 2.0])))
        new = max(lo, min(hi, new))
        return new if new != value else (value + 1 if value + 1 <= hi else value - 1)
    if isinstance(value, float):
        lo, hi = _FLOAT_BOUNDS.get(name, (1e-12, 1e12))
        new = float(f"{value * rng.choice([0.5, 0.7, 1.4, 2.0]):.4g}")
        new = max(lo, min(hi, new))
        return new if new != value else float(f"{value * 0.8:.4g}")
    if isinstance(value, str) and name in _CHOICES:
        return rng.choice([v for v in _CHOICES[name] if v != value])
    if name == "CLASS_WEIGHT":
        return None if value else "balanced"
    return value


def perturb_constant(text: str, rng: random.Random, exclude: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """Change one numeric/bool/known-string constant of a gene; returns (new_text, description)."""
    names = [n for n, src in constants(text).items() if n not in exclude]
    rng.shuffle(names)
    for name in names:
        m = re.search(rf"^{name} = (.+?)\s*$", text, re.M)
        old_src = m.group(1)
        old = _lit(old_src)
        if isinstance(old, str) and name not in (*_CHOICES, "CLASS_WEIGHT"):
            continue
        if isinstance(old, (list, dict, tuple)):
            continue
        new = _perturb_value(name, old, rng)
        if new == old and type(new) is type(old):
            continue
        new_text = text[: m.start(1)] + repr(new) + text[m.end(1):]
        return new_text, f"{name}: {old_src} -> {new!r}"
    return None


OPTUNA_SWITCH_RATE = 0.25
"""Probability that a TRAINING_TRICKS mutation toggles the optuna study (optuna installed)."""


def switch_optuna(info: DatasetInfo, text: str) -> tuple[str, str]:
    """The TRAINING_TRICKS gene ``text`` with the optuna study added (plain CV) or removed."""
    consts = {k: _lit(v) for k, v in constants(text).items()
              if k in alleles.default_tricks(info) or k.startswith("OPTUNA_")}
    if "OPTUNA_TRIALS" in consts:
        plain = {k: v for k, v in consts.items() if not k.startswith("OPTUNA_")}
        return alleles.render_tricks(info, plain), "optuna study -> plain K-fold CV"
    consts.update({k: boosters.OPTUNA_DEFAULTS[k] for k in ("OPTUNA_TRIALS", "OPTUNA_TIMEOUT")})
    return alleles.render_tricks(info, consts), "plain K-fold CV -> optuna study"


def mutate_gene(info: DatasetInfo, locus: str, text: str, rng: random.Random, code: str,
                packages: dict | None = None) -> tuple[str, str]:
    """Return (new gene text, description) for one meaningful change of the gene at ``locus``.

    A MODEL family change may pick a library family ``packages`` lists; with optuna listed a
    TRAINING_TRICKS mutation switches between plain CV and the optuna study with probability
    :data:`OPTUNA_SWITCH_RATE`.
    """
    stub = G.is_stub(text)
    if locus == "DATA":
        c = constants(text)
        fs = _lit(c.get("FEATURE_SET"))
        sets = data_gene.feature_sets(info)
        if fs in sets and rng.random() < 0.5:
            other = rng.choice([s for s in sets if s != fs])
            params = {k: _lit(v) for k, v in c.items() if k in data_gene.default_params(info, other)}
            return data_gene.render_data_gene(info, other, params), f"feature set {fs} -> {other}"
        res = perturb_constant(text, rng, exclude=("FEATURE_SET",))
        if res:
            return res
        other = rng.choice(sets)
        return data_gene.render_data_gene(info, other), f"DATA rewritten with feature set {other}"
    if locus == "MODEL":
        name = _lit(constants(text).get("MODEL_NAME"))
        res = None if rng.random() < 0.5 else perturb_constant(text, rng, exclude=("MODEL_NAME", "PREPROCESS_KIND"))
        if res:
            return res
        cands = [f for f in models.suitable(info.task, info.is_text, packages) if f.name != name]
        fam = _weighted_pick(rng, cands, [f.prior for f in cands])
        return models.render_model_gene(fam, None, info.is_text), f"model family {name} -> {fam.name}"
    if locus == "LOSS":
        if stub:
            consts = rng.choice(alleles.loss_options(info))
            return alleles.render_loss(consts), f"LOSS stub -> {consts}"
        res = perturb_constant(text, rng)
        if res:
            return res
        return alleles.render_loss(rng.choice(alleles.loss_options(info))), "LOSS rewritten"
    if locus == "OPTIMIZER":
        if stub:
            consts = alleles.default_optimizer(info)
            consts["LEARNING_RATE"] = rng.choice([0.03, 0.05, 0.08, 0.1])
            return alleles.render_optimizer(consts), f"OPTIMIZER stub -> {consts}"
        res = perturb_constant(text, rng)
        if res:
            return res
    if locus == "REGULARIZATION":
        res = perturb_constant(text, rng)
        if res:
            return res
        return alleles.render_regularization(alleles.default_regularization(info)), "REGULARIZATION rewritten"
    if locus == "INITIALIZATION":
        if stub:
            seed = rng.randint(0, 9999)
            return alleles.render_initialization(seed), f"INITIALIZATION stub -> RANDOM_STATE = {seed}"
        res = perturb_constant(text, rng)
        if res:
            return res
    if locus == "TRAINING_TRICKS":
        if boosters.installed(packages, "optuna") and rng.random() < OPTUNA_SWITCH_RATE:
            return switch_optuna(info, text)
        exclude = ("LOG_TARGET",) if info.non_negative else ()
        res = perturb_constant(text, rng, exclude=exclude + ("CLIP_EPS",))
        if res:
            return res
    # unknown or constant-free gene: a harmless but real change (a documented seed line)
    new = text.rstrip("\n") + f"\n# mutation: revisit {locus.lower()} settings (variant {rng.randint(0, 999)})\n\n"
    return new, f"{locus} annotated"
