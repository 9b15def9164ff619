"""Evolution Log: the run's memory shown in the draft, merge and mutate prompts (SPEC §9).

Seed 000 K / seed 001 ("# Evolution Log": changelog, constraints, unexplored directions),
built from the journal alone — no LLM call, deterministic for a journal:

* **current best** — :meth:`swarm_evo.population.journal.Journal.best_node` (valid pool, direction-aware);
* **recent changes** — the last ``max_changes`` (10) nodes by step, oldest first, each with its
  metric and ``BEST`` / ``BUGGY`` / ``DEAD`` tags;
* **constraints** — up to ``max_constraints`` (10) lessons from buggy nodes, grouped by error,
  most frequent first (:func:`failure_constraints`);
* **unexplored directions** — up to ``max_directions`` (5) entries of :data:`DIRECTIONS` whose
  keywords occur in no node's code (:func:`unexplored_directions`).

The partial ``prompt_templates/skills/evolution_log.j2`` renders an :class:`EvolutionLog`
passed as ``evolution_log`` (nothing when it is missing, None or empty).
"""

from __future__ import annotations

import functools
import math
import re
from typing import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from swarm_evo.population.hidden_display import shown_hidden
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node

SUMMARY_CHARS = 160
"""Maximum length of :attr:`LogChange.summary` (characters, an ellipsis included)."""

CONSTRAINT_CHARS = 200
"""Maximum length of a constraint's error text (characters, before the count suffix)."""

TAG_ORDER: tuple[str, ...] = ("BEST", "BUGGY", "DEAD")
"""The tags a change can carry, in the order they are listed."""

DIRECTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("TF-IDF text features (word or character n-grams, TfidfVectorizer)",
     ("TfidfVectorizer", "TfidfTransformer")),
    ("character n-gram features (analyzer='char_wb') combined with word n-grams",
     ("char_wb", "analyzer='char'", 'analyzer="char"')),
    ("gradient boosting (HistGradientBoosting, LightGBM, XGBoost, CatBoost)",
     ("HistGradientBoosting", "GradientBoosting", "lightgbm", "LGBM", "xgboost", "XGB",
      "catboost", "CatBoost")),
    ("random forest / extra trees", ("RandomForest", "ExtraTrees")),
    ("regularised linear model (LogisticRegression, Ridge, Lasso, ElasticNet, SGD)",
     ("LogisticRegression", "Ridge", "Lasso", "ElasticNet", "SGDClassifier", "SGDRegressor")),
    ("stacking / voting ensemble of different model families",
     ("Stacking", "Voting")),
    ("hyper-parameter search (GridSearchCV, RandomizedSearchCV, optuna)",
     ("GridSearchCV", "RandomizedSearchCV", "HalvingGridSearchCV", "HalvingRandomSearchCV",
      "BayesSearchCV", "optuna")),
    ("target encoding of categorical features (TargetEncoder)", ("TargetEncoder",)),
    ("class-imbalance handling (class_weight, scale_pos_weight, resampling)",
     ("class_weight", "scale_pos_weight", "is_unbalance", "imblearn", "SMOTE")),
    ("transform a skewed target or skewed features (log1p, PowerTransformer, QuantileTransformer)",
     ("log1p", "PowerTransformer", "QuantileTransformer", "TransformedTargetRegressor")),
    ("feature selection (SelectKBest, RFE, SelectFromModel)",
     ("SelectKBest", "SelectPercentile", "RFE", "SelectFromModel", "VarianceThreshold")),
    ("polynomial / interaction features (PolynomialFeatures)",
     ("PolynomialFeatures", "SplineTransformer")),
    ("k-nearest neighbours", ("KNeighbors",)),
    ("support vector machine (SVC, SVR, LinearSVC)",
     ("SVC", "SVR", "LinearSVC", "LinearSVR", "NuSVC", "NuSVR")),
    ("neural network (MLP, PyTorch, Keras)",
     ("MLPClassifier", "MLPRegressor", "torch", "keras", "tensorflow")),
    ("naive Bayes", ("GaussianNB", "MultinomialNB", "BernoulliNB", "ComplementNB",
                     "CategoricalNB", "naive_bayes")),
    ("dimensionality reduction (PCA, TruncatedSVD)", ("PCA", "TruncatedSVD")),
    ("better missing-value handling (IterativeImputer, KNNImputer, missing indicators)",
     ("IterativeImputer", "KNNImputer", "MissingIndicator", "add_indicator")),
]
"""Catalogue of search directions: ``(direction text, keywords)`` in priority order.

A direction counts as explored once any keyword occurs in any node's code (comments removed)
as an identifier prefix: the character before the keyword is not a letter, digit or ``_``,
so ``"GradientBoosting"`` matches ``GradientBoostingClassifier`` but not
``HistGradientBoostingClassifier`` (which has its own keyword), and ``"SVC"`` does not match
``LinearSVC``. Matching is case-sensitive. Directions in :data:`TEXT_ONLY_DIRECTIONS` are
offered only for competitions with text data.
"""

TEXT_ONLY_DIRECTIONS: frozenset[str] = frozenset(text for text, _ in DIRECTIONS[:2])
"""Directions listed only when ``build_evolution_log(..., text_data=True)``."""

# Exceptions whose quoted values name something in the program (a column, attribute, module,
# file): keep them — "KeyError: 'Cabin_deck'" is the lesson. Elsewhere a quoted value is data
# ("could not convert string to float: 'Europa'") and is blanked for grouping.
_IDENTIFIER_ERRORS = frozenset(
    {"KeyError", "AttributeError", "NameError", "ImportError", "ModuleNotFoundError",
     "UnboundLocalError", "FileNotFoundError", "IndexError"}
)
_SKIPPED_REASON_PREFIXES = ("note:", "review call:")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_COMMENT = re.compile(r"#[^\n]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_LIST_MARK = re.compile(r"^(?:[-*+>]|\d+[.)])\s+")
_LABEL = re.compile(r"^(?:plan|summary|approach|idea)\s*:\s*", re.I)


class LogChange(BaseModel):
    """One journal node as the Evolution Log shows it.

    Fields:
        step: the node's journal step (1-based; None only for a node not yet appended).
        node_id: the node's id (32 hex characters).
        operation: ``"draft"``, ``"merge"`` or ``"mutate"`` (``"debug"`` under the greedy policy).
        agent_id: the agent whose texts wrote the prompt, or None.
        metric: the validation metric in the competition's own units and direction; None for a
            buggy node (as in the draft history) or a node without a finite metric.
        hidden: the host's grade of the run's hidden split (issue 41), the fitness the search
            selects on, rounded to what the split can tell apart (issue 53, item 8:
            :func:`swarm_evo.population.hidden_display.shown_hidden`; the journal keeps the
            exact score); None without one (or for a buggy node).
        tags: a subset of ``["BEST", "BUGGY", "DEAD", "VALIDATION LEAKS"]`` in that order;
            ``BEST`` marks the journal's current best node, ``VALIDATION LEAKS`` a node whose
            printed metric overstates its hidden score
            (:func:`swarm_evo.population.ranking.printed_misleads`).
        summary: the review's approach tag, else the plan's first sentence, else ``""``;
            at most :data:`SUMMARY_CHARS` characters.
    """

    model_config = ConfigDict(extra="forbid")

    step: int | None
    node_id: str
    operation: str
    agent_id: str | None = None
    metric: float | None = None
    hidden: float | None = None
    tags: list[str] = Field(default_factory=list)
    summary: str = ""


class EvolutionLog(BaseModel):
    """The run's memory for the prompts (SPEC §9); render with ``skills/evolution_log.j2``.

    Fields:
        best: the journal's best valid node (:meth:`Journal.best_node`), or None.
        lower_is_better: the metric direction of the best node (False when there is none).
        changes: the last ``max_changes`` nodes by step, oldest first.
        constraints: lessons from failures, most frequent first (ties: most recent first),
            e.g. ``"Avoid KeyError: 'Cabin_deck' (3 nodes, last at step 14)"``.
        unexplored: directions of :data:`DIRECTIONS` no node has tried, in catalogue order.
    """

    model_config = ConfigDict(extra="forbid")

    best: LogChange | None = None
    lower_is_better: bool = False
    changes: list[LogChange] = Field(default_factory=list)
    constraints: list[str] = Field(default_factory=list)
    unexplored: list[str] = Field(default_factory=list)

    def is_empty(self) -> bool:
        """True when there is nothing to show (the partial then renders nothing)."""
        return self.best is None and not self.changes and not self.constraints and not self.unexplored


# --------------------------------------------------------------------------- helpers
def _clip(text: str, limit: int) -> str:
    """``text`` with whitespace runs collapsed, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def first_sentence(plan: str) -> str:
    """The first sentence of a plan, ``""`` when it has no text.

    Markdown headings (``## Plan``) are skipped; of the first other non-empty line, list
    marks (``-``, ``1.``), emphasis and a ``Plan:`` label are removed and the text up to the
    first ``.``/``!``/``?`` followed by whitespace and a capital letter is returned.
    """
    for line in plan.splitlines():
        if line.lstrip().startswith("#"):
            continue
        line = _LIST_MARK.sub("", line.strip()).replace("**", "").replace("__", "")
        line = _LABEL.sub("", line.strip()).strip()
        if line:
            return _SENTENCE_END.split(line, maxsplit=1)[0].strip()
    return ""


def node_summary(node: Node, limit: int = SUMMARY_CHARS) -> str:
    """The approach tag (unless missing or ``"unknown"``), else the plan's first sentence."""
    tag = (node.approach_tag or "").strip()
    text = tag if tag and tag.lower() != "unknown" else first_sentence(node.plan or "")
    return _clip(text, limit)


def log_change(node: Node, best_id: str | None = None) -> LogChange:
    """A node as a :class:`LogChange`; ``best_id`` is the current best node's id (for ``BEST``)."""

    metric = node.metric_value
    if node.is_buggy or metric is None or not math.isfinite(metric):
        metric = None
    tags = []
    if best_id is not None and node.id == best_id:
        tags.append("BEST")
    if node.is_buggy:
        tags.append("BUGGY")
    if node.dead:
        tags.append("DEAD")
    if not node.is_buggy and ranking.printed_misleads(node):
        tags.append("VALIDATION LEAKS")
    return LogChange(
        step=node.step,
        node_id=node.id,
        operation=node.operation,
        agent_id=node.agent_id,
        metric=metric,
        hidden=None if node.is_buggy else shown_hidden(node),
        tags=tags,
        summary=node_summary(node),
    )


def _error_message(exc_type: str, exc_info: str | None) -> str:
    """``exc_info`` without a leading ``"<exc_type>: "`` (dotted module prefixes included)."""
    info = " ".join((exc_info or "").split())
    head, sep, rest = info.partition(": ")
    if sep and head.split(".")[-1] == exc_type:
        return rest.strip()
    return info


def normalise_error(text: str, keep_quoted: bool = True) -> str:
    """Grouping key of an error text: numbers → ``<n>``, hex addresses → ``<addr>``, quoted
    values → ``'…'`` unless ``keep_quoted``, whitespace collapsed, cut to 200 characters."""
    text = _HEX.sub("<addr>", " ".join(text.split()))
    if not keep_quoted:
        text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("<n>", text)
    return text[:CONSTRAINT_CHARS]


def _failure_lessons(node: Node) -> list[tuple[str, str]]:
    """``[(group key, display text)]`` of one buggy node (one entry per distinct lesson).

    With ``exc_type``: the exception and its message. Without: the review's reasons
    (``metadata["review"]["reasons"]``, remarks starting with ``note:`` / ``review call:``
    skipped), else the execution problems (``metadata["problems"]``).
    """
    if node.exc_type:
        message = _error_message(node.exc_type, node.exc_info)
        keep = node.exc_type in _IDENTIFIER_ERRORS
        key = f"{node.exc_type}\x00{normalise_error(message, keep_quoted=keep)}"
        shown = f"{node.exc_type}: {message}" if message else node.exc_type
        return [(key, _clip(shown, CONSTRAINT_CHARS))]
    review = node.metadata.get("review")
    reasons = review.get("reasons") if isinstance(review, dict) else None
    texts = [
        r for r in (reasons or []) if isinstance(r, str) and r.strip()
        and not r.strip().lower().startswith(_SKIPPED_REASON_PREFIXES)
    ]
    if not texts:
        problems = node.metadata.get("problems")
        texts = [p for p in (problems or []) if isinstance(p, str) and p.strip()]
    lessons: dict[str, str] = {}
    for text in texts:
        lessons.setdefault(f"\x00{normalise_error(text, keep_quoted=False)}", _clip(text, CONSTRAINT_CHARS))
    return list(lessons.items())


def failure_constraints(nodes: Iterable[Node], max_constraints: int = 10) -> list[str]:
    """Lessons from the buggy nodes, most frequent first, ties → most recent (highest step) first.

    Nodes are grouped by ``(exc_type, normalised message)`` (:func:`normalise_error`: numbers
    and, except for identifier errors such as ``KeyError``, quoted values do not split a
    group); a group shows its most recent member's text:
    ``"Avoid KeyError: 'Cabin_deck' (3 nodes, last at step 14)"``. A node without
    ``exc_type`` contributes one lesson per review reason / problem
    (``"Avoid: no line ... (1 node, last at step 9)"``). Buggy nodes with nothing to say are
    skipped. Generation failures (``GenerationError``) are lessons too.
    """
    groups: dict[str, dict] = {}
    for node in nodes:
        if not node.is_buggy:
            continue
        step = node.step or 0
        for key, shown in _failure_lessons(node):
            group = groups.setdefault(key, {"count": 0, "last": -1, "shown": shown, "is_exc": key[0] != "\x00"})
            group["count"] += 1
            if step >= group["last"]:
                group["last"], group["shown"] = step, shown
    ordered = sorted(groups.values(), key=lambda g: (-g["count"], -g["last"]))
    out = []
    for g in ordered[:max_constraints]:
        noun = "node" if g["count"] == 1 else "nodes"
        prefix = "Avoid " if g["is_exc"] else "Avoid: "
        out.append(f"{prefix}{g['shown']} ({g['count']} {noun}, last at step {g['last']})")
    return out


@functools.lru_cache(maxsize=256)
def _direction_pattern(keywords: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for a direction's keywords: any of them, not preceded by a word character."""
    if not keywords:
        return None
    return re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(re.escape(k) for k in keywords) + ")")


@functools.lru_cache(maxsize=4096)
def _without_comments(code: str) -> str:
    """``code`` without ``#`` comments (cached: every step scans the programs of every node)."""
    return _COMMENT.sub("", code)


Catalogue = Sequence[tuple[str, Sequence[str]]]
"""``(direction text, keywords)`` pairs; a direction without keywords is never marked explored."""


def explored_directions(codes: Iterable[str], text_data: bool = False, catalogue: Catalogue | None = None) -> list[str]:
    """Directions of ``catalogue`` (default :data:`DIRECTIONS`) some code uses (catalogue
    order); comments are ignored."""
    # One text, one search per direction: a keyword cannot span the newline between programs.
    stripped = "\n".join(_without_comments(code or "") for code in codes)
    found = []
    for text, keywords in (DIRECTIONS if catalogue is None else catalogue):
        if text in TEXT_ONLY_DIRECTIONS and not text_data:
            continue
        pattern = _direction_pattern(tuple(keywords))
        if pattern is not None and pattern.search(stripped):
            found.append(text)
    return found


def unexplored_directions(codes: Sequence[str], max_directions: int = 5, text_data: bool = False,
                          catalogue: Catalogue | None = None) -> list[str]:
    """The first ``max_directions`` directions of ``catalogue`` (default :data:`DIRECTIONS`,
    the ML catalogue; a problem passes its own) that none of ``codes`` uses.

    Text-only directions (:data:`TEXT_ONLY_DIRECTIONS`) are skipped unless ``text_data``.
    """
    explored = set(explored_directions(codes, text_data, catalogue))
    out = [
        text for text, _ in (DIRECTIONS if catalogue is None else catalogue)
        if text not in explored and (text_data or text not in TEXT_ONLY_DIRECTIONS)
    ]
    return out[:max_directions]


# --------------------------------------------------------------------------- the log
def build_evolution_log(
    journal: Journal,
    max_changes: int = 10,
    max_constraints: int = 10,
    max_directions: int = 5,
    text_data: bool = False,
    catalogue: Catalogue | None = None,
) -> EvolutionLog:
    """The Evolution Log of ``journal`` (SPEC §9).

    Args:
        journal: the run's journal (read only; a snapshot of its nodes is used).
        max_changes: how many of the most recent nodes (by step) to list, oldest first.
        max_constraints: the most lessons from failures to list (:func:`failure_constraints`).
        max_directions: the most unexplored directions to list (:func:`unexplored_directions`).
        text_data: the competition has text inputs: offer the text-only directions.
        catalogue: the directions to offer (default: the ML catalogue :data:`DIRECTIONS`; a
            problem run passes the problem's own).

    Returns:
        An :class:`EvolutionLog`; for a journal without nodes it is empty (no directions are
        suggested before anything has been tried, so the first draft is not steered).

    Raises:
        ValueError: a ``max_*`` limit is negative.
    """
    for name, value in (("max_changes", max_changes), ("max_constraints", max_constraints),
                        ("max_directions", max_directions)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    nodes = sorted(journal.nodes, key=lambda n: n.step or 0)
    if not nodes:
        return EvolutionLog()
    best = journal.best_node()
    best_id = best.id if best is not None else None
    recent = nodes[-max_changes:] if max_changes else []
    return EvolutionLog(
        best=log_change(best, best_id) if best is not None else None,
        lower_is_better=best.lower_is_better if best is not None else False,
        changes=[log_change(n, best_id) for n in recent],
        constraints=failure_constraints(nodes, max_constraints),
        unexplored=unexplored_directions([n.code for n in nodes], max_directions, text_data, catalogue),
    )
