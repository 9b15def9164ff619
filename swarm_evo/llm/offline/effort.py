"""How much work an offline program does: sized to the time its prompt gives it (issue 33).

A real model learns its budget from the prompt's guidelines
(``prompt_templates/skills/guidelines.j2``)::

    - Time remaining for the whole run: 2m 51s; this program may run at most 2m 51s.
    - Steps remaining in the budget: 27.

and is expected to write a program that fits. The offline model reads the same two lines from
the prompt text it receives (:func:`read_budget`), never the run's configuration, so it sees
exactly what a real model sees. The draft, mutate, merge and debug prompts carry them; a call
whose prompt lacks them (the fix prompt, unit tests calling :func:`.respond.respond` directly)
gets today's full-size program.

The rule (:func:`share_seconds`): the program's *share* is

    share = min(program limit, time remaining / (steps remaining + 1))

seconds: the time left spread over this program and the steps still to start (the budget shown
counts neither this step's own reserved slot nor other steps in flight). The prompt does not
say how many programs run at once, so the share assumes one after another: with
``parallel_workers`` > 1 the run keeps the difference as headroom for debug attempts, reviews
and its own bookkeeping. The share picks an :class:`Effort` tier (:data:`TIERS`, first whose
``min_share`` it reaches); the tier caps the work constants of the genes the model writes:

==========  =========  =======  =============  ==============  ==============================
tier        share ≥    N_FOLDS  OPTUNA_TRIALS  OPTUNA_TIMEOUT  N_ESTIMATORS (and MAX_ITER)
==========  =========  =======  =============  ==============  ==============================
full        240 s      as is    8 (as is)      60 s (as is)    as is (≤ 600)
long        60 s       ≤ 5      ≤ 6            ≤ 20 s          ≤ 400 (MAX_ITER ≤ 800)
short       20 s       ≤ 4      ≤ 4            ≤ 8 s           ≤ 250 (MAX_ITER ≤ 500)
quick       0 s        ≤ 3      no new study   no new study    ≤ 150 (MAX_ITER ≤ 300)
==========  =========  =======  =============  ==============  ==============================

The round caps (``N_ESTIMATORS``, ``MAX_ITER``) apply to the slower models only: LightGBM,
XGBoost, CatBoost and HistGradientBoosting (:data:`FAST_MODELS`) keep their rounds in every
tier, since 250 of their rounds fit in under a second; cutting them cost accuracy and saved
nothing (the README's 3-minute job: 0.80575 with every model capped, 0.82069 without capping
these four, seed 0, the same machine).

"No study": in the quick tier a draft that would have tuned with optuna runs the plain K-fold
CV instead (its random draws are the same), and a TRAINING_TRICKS mutation that would add a
study is drawn again: a study's trial is not bounded by ``OPTUNA_TIMEOUT`` (the timeout is
checked between trials), and one CatBoost trial at depth 10 alone takes ~ 20 s on a busy
machine, several times a quick share. A study the model keeps (a mutation of another gene of
a parent that has one) is capped at 3 trials and 3 s.

Sources of the numbers (measured on this project's 2-core machine, spaceship-titanic, 8,693
rows, one thread per program): a program's start (imports, reading and preprocessing the data)
≈ 2 s; one fit of 250 boosting rounds ≈ 0.25 s (LightGBM, XGBoost), 0.7 s
(HistGradientBoosting), 0.8 s (CatBoost), 1.4 s (GradientBoosting), 2.9 s (RandomForest, 200
trees); 5-fold CV + refit of LightGBM 3.3 s, of RandomForest 17.5 s; the optuna variant
(8 trials x 5 folds) 16 s (LightGBM) to 71 s (CatBoost). A quick-tier program (3 folds + refit,
≤ 150 rounds) takes 2–7 s there, a full one up to ≈ 100 s on a busy
machine. The tiers are coarse on purpose: in a run on pace the share stays in one tier (time
remaining and steps remaining fall together), so the programs do not change with every
second of the clock. The full tier leaves every program exactly as the offline model wrote it
before this module existed (same text for the same call): runs with the default 12-hour limit
and a few dozen steps, like the golden-journal tests, are unchanged.

Only the genes the model writes in this call are sized: a draft's genes, a mutation's target
gene (so a mutate still changes one gene only), a from-scratch fix. A merge assembles its
parents' genes as they are, and a debug makes its minimal change (after a timeout the repair
halves the work, :func:`.repair.make_cheaper`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TIME = re.compile(r"Time remaining for the whole run: (?P<left>[^;\n]+); this program may run at most "
                   r"(?P<limit>[^\n]+?)\.?\s*$", re.M)
_STEPS = re.compile(r"Steps remaining in the budget: (?P<steps>\d+)")
_DURATION = re.compile(r"^(?:(?P<h>\d+)h)?\s*(?:(?P<m>\d+)m)?\s*(?:(?P<s>\d+)s)?$")


@dataclass(frozen=True)
class Budget:
    """The budget lines of one prompt: seconds left for the run and for this program (None:
    unlimited or not said) and steps remaining (None: not said)."""

    time_left: float | None = None
    program_limit: float | None = None
    steps_left: int | None = None


@dataclass(frozen=True)
class Effort:
    """Caps on a program's work constants (None: no cap, the program as drafted)."""

    name: str
    min_share: float
    folds: int | None = None
    study: bool = True
    """False: the model writes no new optuna study (plain K-fold CV instead)."""
    trials: int | None = None
    timeout: int | None = None
    estimators: int | None = None
    iterations: int | None = None

    @property
    def full(self) -> bool:
        """True for the tier that changes nothing."""
        return self.study and self.folds is None and self.trials is None and self.timeout is None \
            and self.estimators is None and self.iterations is None

    def caps(self) -> dict[str, int]:
        """Constant name -> largest value this tier allows."""
        out = {"N_FOLDS": self.folds, "OPTUNA_TRIALS": self.trials, "OPTUNA_TIMEOUT": self.timeout,
               "N_ESTIMATORS": self.estimators, "MAX_ITER": self.iterations}
        return {k: v for k, v in out.items() if v is not None}


TIERS: tuple[Effort, ...] = (
    Effort("full", 240.0),
    Effort("long", 60.0, folds=5, trials=6, timeout=20, estimators=400, iterations=800),
    Effort("short", 20.0, folds=4, trials=4, timeout=8, estimators=250, iterations=500),
    Effort("quick", 0.0, folds=3, study=False, trials=3, timeout=3, estimators=150, iterations=300),
)
"""The effort tiers, largest first (see the module docstring for the table and its sources)."""

FULL = TIERS[0]

FAST_MODELS = frozenset({"LightGBM", "XGBoost", "CatBoost", "HistGradientBoosting"})
"""Models (a MODEL gene's ``MODEL_NAME``) whose rounds no tier caps: one fit of 250 rounds takes
0.25 s (LightGBM, XGBoost), 0.7 s (HistGradientBoosting) or 0.8 s (CatBoost) on
spaceship-titanic (the numbers above), so even the quick tier's 3 folds and refit of them fit
in its share; capping them would only cost accuracy. The folds and optuna caps still apply."""

_MODEL_NAME = re.compile(r"^MODEL_NAME = ['\"](?P<name>[^'\"]+)['\"]", re.M)


def model_name(code: str | None) -> str | None:
    """The ``MODEL_NAME`` a program's MODEL gene assigns (``"LightGBM"``), or None."""
    m = _MODEL_NAME.search(code or "")
    return m["name"] if m else None


def caps_for(effort: Effort, model: str | None = None) -> dict[str, int]:
    """The tier's caps (:meth:`Effort.caps`) for a program of ``model``: without the round caps
    (``N_ESTIMATORS``, ``MAX_ITER``) for :data:`FAST_MODELS`."""
    caps = effort.caps()
    if model in FAST_MODELS:
        caps = {k: v for k, v in caps.items() if k not in ("N_ESTIMATORS", "MAX_ITER")}
    return caps

MAX_LEARNING_RATE = 0.2
"""Largest learning rate :func:`size_spec` raises a draft's to when it cuts its boosting rounds."""


def parse_duration(text: str) -> float | None:
    """Seconds of a duration as prompts write it (``1h 05m``, ``2m 57s``, ``42s``); None for
    ``unlimited`` or anything else."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.groupdict().values()):
        return None
    return float(int(m["h"] or 0) * 3600 + int(m["m"] or 0) * 60 + int(m["s"] or 0))


def read_budget(prompt: str | None) -> Budget:
    """The budget the prompt's guidelines state (all None when it states none)."""
    text = prompt or ""
    t = _TIME.search(text)
    s = _STEPS.search(text)
    return Budget(time_left=parse_duration(t["left"]) if t else None,
                  program_limit=parse_duration(t["limit"]) if t else None,
                  steps_left=int(s["steps"]) if s else None)


def share_seconds(budget: Budget) -> float | None:
    """``min(program limit, time remaining / (steps remaining + 1))``; None when the prompt
    gives neither a time nor a program limit."""
    shares = []
    if budget.time_left is not None:
        shares.append(budget.time_left / ((budget.steps_left or 0) + 1))
    if budget.program_limit is not None:
        shares.append(budget.program_limit)
    return min(shares) if shares else None


def tier_for(share: float | None) -> Effort:
    """The tier of a share in seconds (None: :data:`FULL`)."""
    if share is None:
        return FULL
    return next(t for t in TIERS if share >= t.min_share)


def from_prompt(prompt: str | None) -> Effort:
    """The effort tier the prompt's budget lines call for."""
    return tier_for(share_seconds(read_budget(prompt)))


_CONST = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) = (?P<value>\d+)[ \t]*$", re.M)


def cap_text(text: str, effort: Effort, model: str | None = None) -> str:
    """``text`` (a gene or a whole program) with each integer work constant it assigns
    (``N_FOLDS = 5``, ``OPTUNA_TIMEOUT = 60`` ...) lowered to the tier's cap for a program of
    ``model`` (:func:`caps_for`)."""
    caps = caps_for(effort, model)
    if not caps:
        return text

    def sub(m: re.Match) -> str:
        cap = caps.get(m["name"])
        if cap is None or int(m["value"]) <= cap:
            return m.group(0)
        return f"{m['name']} = {cap}"

    return _CONST.sub(sub, text)


def size_spec(info, spec: dict, effort: Effort) -> dict:
    """A draft spec (:func:`.programs.choose_draft_spec`) for dataset ``info`` sized to ``effort``: the training
    constants capped, and, when the tier caps boosting rounds below the estimators' default
    of 250, an OPTIMIZER gene that states them (a stub leaves the default). Cut rounds come
    with a larger learning rate (same learning rate x rounds, at most
    :data:`MAX_LEARNING_RATE`), as one would write a quicker boosting model."""
    if effort.full:
        return spec
    from . import alleles

    from . import models

    spec = dict(spec)
    family = models.all_families(info.task).get(spec.get("family"))
    caps = caps_for(effort, family.name if family else None)
    tricks = dict(spec.get("tricks") or {})
    if not effort.study:
        tricks = {k: v for k, v in tricks.items() if not k.startswith("OPTUNA_")}
    for name in ("OPTUNA_TRIALS", "OPTUNA_TIMEOUT"):
        if name in tricks and name in caps:
            tricks[name] = min(int(tricks[name]), caps[name])
    folds = int(tricks.get("N_FOLDS", alleles.default_tricks(info)["N_FOLDS"]))
    if "N_FOLDS" in caps and folds > caps["N_FOLDS"]:
        tricks["N_FOLDS"] = caps["N_FOLDS"]
    spec["tricks"] = tricks
    opt = spec.get("optimizer")
    if opt is None and (caps.get("N_ESTIMATORS", 250) < 250 or caps.get("MAX_ITER", 1000) < 1000):
        opt = alleles.default_optimizer(info)
    if opt is not None:
        opt = dict(opt)
        rounds = int(opt.get("N_ESTIMATORS", 250))
        for name in ("N_ESTIMATORS", "MAX_ITER"):
            if name in opt and name in caps:
                opt[name] = min(int(opt[name]), caps[name])
        if "LEARNING_RATE" in opt and int(opt.get("N_ESTIMATORS", rounds)) < rounds:
            # fewer rounds, larger steps: the same total shrinkage (learning rate x rounds)
            scaled = float(opt["LEARNING_RATE"]) * rounds / int(opt["N_ESTIMATORS"])
            opt["LEARNING_RATE"] = float(f"{min(MAX_LEARNING_RATE, scaled):.3g}")
        spec["optimizer"] = opt
    return spec
