"""Merge compatibility check: warnings for a merge's gene plan (seed 003, SPEC §6/§9).

Seed 003 (``gene_compatibility.py``) detected each gene's framework from its imports and
turned empty genes and framework conflicts into warnings injected into the merge prompt; the
merge still runs and the LLM resolves them. This module does the same for the 7 loci:

* an empty or stub gene (:func:`swarm_evo.population.genes.is_stub`: fewer than ``stub_threshold``
  code characters once comments and whitespace are removed) *where it matters*: at a locus
  that must hold real code (``required``: DATA and MODEL for competitions), or when the gene
  comes from another node while the scaffold (the primary parent) has code there — the merge
  would drop working code. A "Not applicable" stub taken from the scaffold itself, or a stub
  where the scaffold has a stub too, is the documented convention and gives no warning
  (issue 13: merge prompts warned "empty: write it" about the scaffold's own stubs);
* more than one deep-learning framework (torch / tensorflow / jax) across the genes;
* a LOSS, OPTIMIZER or INITIALIZATION gene written for a deep-learning framework while the
  MODEL gene uses only non-deep-learning libraries (sklearn, lightgbm, xgboost, catboost);
* different gradient-boosting libraries in MODEL and in TRAINING_TRICKS / REGULARIZATION
  (e.g. MODEL trains LightGBM while REGULARIZATION passes XGBoost parameters).

Frameworks come from imports (:func:`gene_frameworks`), parsed with :mod:`ast` and with a
regular-expression fallback for genes that are not valid Python on their own. A gene that
only *uses* names imported elsewhere (``lgb.train`` after the preamble's
``import lightgbm as lgb``) is attributed through the ``preamble`` / ``preambles`` arguments.
Gradient-boosting libraries are also recognised by class names (``LGBMClassifier``,
``XGBRegressor``, ``CatBoostClassifier``) and parameter names only one library uses
(``num_leaves``, ``tree_method``, ``l2_leaf_reg``; :data:`BOOSTING_PARAMS`).
"""

from __future__ import annotations

import ast
import re
import textwrap
from typing import Iterable

from swarm_evo.population.genes import DEFAULT_STUB_THRESHOLD, LOCI, REQUIRED_NON_STUB, is_stub
from swarm_evo.population.source import parse_program

FRAMEWORKS: dict[str, str] = {
    "sklearn": "sklearn",
    "imblearn": "sklearn",
    "lightgbm": "lightgbm",
    "xgboost": "xgboost",
    "catboost": "catboost",
    "torch": "torch",
    "torchvision": "torch",
    "torchaudio": "torch",
    "torchtext": "torch",
    "timm": "torch",
    "pytorch_lightning": "torch",
    "tensorflow": "tensorflow",
    "keras": "tensorflow",
    "tf_keras": "tensorflow",
    "jax": "jax",
    "jaxlib": "jax",
    "flax": "jax",
    "optax": "jax",
}
"""Import root (the first dotted part of a module name) → framework name."""

DL_FRAMEWORKS: frozenset[str] = frozenset({"torch", "tensorflow", "jax"})
"""Deep-learning frameworks: a program should use at most one."""

BOOSTING_FRAMEWORKS: frozenset[str] = frozenset({"lightgbm", "xgboost", "catboost"})
"""Gradient-boosting libraries, whose parameter names differ."""

NON_DL_FRAMEWORKS: frozenset[str] = frozenset({"sklearn"}) | BOOSTING_FRAMEWORKS
"""Frameworks with no use for a deep-learning loss, optimizer or initialisation."""

DL_GENE_LOCI: tuple[str, ...] = ("LOSS", "OPTIMIZER", "INITIALIZATION")
"""Loci whose deep-learning code only fits a deep-learning MODEL."""

BOOSTING_GENE_LOCI: tuple[str, ...] = ("REGULARIZATION", "TRAINING_TRICKS")
"""Loci checked for another gradient-boosting library than MODEL's."""

BOOSTING_CLASS_PREFIXES: dict[str, str] = {"LGBM": "lightgbm", "XGB": "xgboost", "CatBoost": "catboost"}
"""Class-name prefixes (``LGBMClassifier``, ``XGBRegressor``, ``CatBoostClassifier``) → library."""

BOOSTING_PARAMS: dict[str, tuple[str, ...]] = {
    "lightgbm": ("num_leaves", "feature_fraction", "bagging_fraction", "bagging_freq",
                 "lambda_l1", "lambda_l2", "min_gain_to_split", "min_sum_hessian_in_leaf"),
    "xgboost": ("tree_method", "min_split_loss", "colsample_bynode", "base_score"),
    "catboost": ("l2_leaf_reg", "border_count", "random_strength", "bagging_temperature",
                 "one_hot_max_size", "leaf_estimation_iterations", "od_type", "cat_features"),
}
"""Parameter names that point to one gradient-boosting library, found as ``name=`` keywords or
quoted dict keys. A heuristic: names shared through aliases (LightGBM's ``eta``, CatBoost's
``min_child_samples``, ``eval_metric`` in every library's ``fit``) are left out."""

_IMPORT_LINE = re.compile(r"^[ \t]*import[ \t]+(.+)$", re.M)
_FROM_LINE = re.compile(r"^[ \t]*from[ \t]+([A-Za-z_][\w.]*)[ \t]+import[ \t]+\(?([^)\n]*)", re.M)
_COMMENT = re.compile(r"#[^\n]*")


# --------------------------------------------------------------------------- imports
def _imports_ast(tree: ast.AST) -> dict[str, str]:
    """``{bound name: module root}`` for every absolute import in ``tree``."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                bound[alias.asname or root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            root = node.module.split(".")[0]
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = root
            bound.setdefault(f"*{root}", root)  # the module itself, even for a star import
    return bound


def _imports_regex(code: str) -> dict[str, str]:
    """The regular-expression fallback of :func:`_imports_ast` (one statement per line)."""
    code = _COMMENT.sub("", code)
    bound: dict[str, str] = {}
    for m in _IMPORT_LINE.finditer(code):
        for part in m.group(1).split(","):
            words = part.split()
            if not words or not re.fullmatch(r"[A-Za-z_][\w.]*", words[0]):
                continue
            root = words[0].split(".")[0]
            name = words[2] if len(words) >= 3 and words[1] == "as" else root
            bound[name] = root
    for m in _FROM_LINE.finditer(code):
        if m.group(1).startswith("."):
            continue
        root = m.group(1).split(".")[0]
        bound.setdefault(f"*{root}", root)
        for part in m.group(2).split(","):
            words = part.split()
            if words and words[0] != "*" and re.fullmatch(r"[A-Za-z_]\w*", words[0]):
                bound[words[2] if len(words) >= 3 and words[1] == "as" else words[0]] = root
    return bound


def _parse(code: str) -> ast.AST | None:
    for text in (code, textwrap.dedent(code)):
        try:
            return parse_program(text)
        except (SyntaxError, ValueError):
            continue
    return None


def _imports(code: str) -> dict[str, str]:
    tree = _parse(code)
    return _imports_ast(tree) if tree is not None else _imports_regex(code)


def _used_names(code: str) -> set[str]:
    """Names ``code`` loads (``lgb`` in ``lgb.train(...)``); regex identifiers when unparsable."""
    tree = _parse(code)
    if tree is None:
        return set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)", _COMMENT.sub("", code)))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def gene_frameworks(code: str, preamble: str = "") -> set[str]:
    """The frameworks (values of :data:`FRAMEWORKS`) a gene uses, from imports.

    A framework counts when the gene imports it (``import torch.nn as nn``,
    ``from sklearn.ensemble import RandomForestClassifier``), or when the gene uses a name
    that an import in ``preamble`` binds to it (``lgb`` after ``import lightgbm as lgb``,
    ``RandomForestClassifier`` after ``from sklearn.ensemble import RandomForestClassifier``).
    Names used without any import in sight do not count. Relative imports are ignored.

    Args:
        code: the gene's text (it need not be valid Python on its own: the imports are then
            read line by line with regular expressions).
        preamble: code whose imports the gene may rely on (e.g. its source node's preamble).

    Returns:
        A set such as ``{"sklearn", "lightgbm"}``; empty when no known framework is used.
    """
    found = {FRAMEWORKS[root] for root in _imports(code).values() if root in FRAMEWORKS}
    if preamble:
        used = _used_names(code)
        for name, root in _imports(preamble).items():
            if root in FRAMEWORKS and name in used:
                found.add(FRAMEWORKS[root])
    return found


def boosting_libraries(code: str, preamble: str = "") -> set[str]:
    """Gradient-boosting libraries a gene uses: imports (:func:`gene_frameworks`), class names
    (:data:`BOOSTING_CLASS_PREFIXES`) and library-specific parameter names
    (:data:`BOOSTING_PARAMS`). Comments are ignored."""
    found = gene_frameworks(code, preamble) & BOOSTING_FRAMEWORKS
    text = _COMMENT.sub("", code)
    for prefix, lib in BOOSTING_CLASS_PREFIXES.items():
        if re.search(r"(?<![\w])" + prefix + r"[A-Z]\w*", text):
            found.add(lib)
    for lib, params in BOOSTING_PARAMS.items():
        if any(re.search(rf"(?<![\w]){p}\s*=(?!=)|['\"]{p}['\"]", text) for p in params):
            found.add(lib)
    return found


# --------------------------------------------------------------------------- the check
def _ordered_loci(genes: dict[str, str]) -> list[str]:
    """The plan's loci: :data:`LOCI` order first, then any other locus in the dict's order."""
    return [l for l in LOCI if l in genes] + [l for l in genes if l not in LOCI]


def _origin(locus: str, sources: dict[str, str]) -> str:
    src = sources.get(locus)
    return f"{locus} (from node {src[:8]})" if src else locus


def _names(libs: Iterable[str]) -> str:
    return ", ".join(sorted(libs))


def check_merge_compatibility(
    genes: dict[str, str],
    sources: dict[str, str] | None = None,
    stub_threshold: int = DEFAULT_STUB_THRESHOLD,
    preambles: dict[str, str] | None = None,
    *,
    primary_id: str | None = None,
    scaffold: dict[str, str] | None = None,
    required: Iterable[str] = REQUIRED_NON_STUB,
) -> list[str]:
    """Warnings for a merge's gene plan; ``[]`` when the genes fit together.

    Args:
        genes: ``{locus: gene code}`` as it will be merged (genes from different parents).
        sources: ``{locus: source node id}``; messages name the node (first 8 characters).
        stub_threshold: see :func:`swarm_evo.population.genes.is_stub`.
        preambles: ``{locus: preamble of the gene's source node}``, so genes that use names
            imported only in their program's preamble are attributed (:func:`gene_frameworks`).
        primary_id: the primary parent's node id (the scaffold); a stub gene from it is fine.
        scaffold: ``{locus: gene code}`` of the primary parent; a stub gene from another node
            warns only where the scaffold's gene is not a stub. None: the scaffold is unknown,
            and a stub gene at a locus outside ``required`` gives no warning.
        required: loci that must hold real code (:data:`swarm_evo.population.genes.REQUIRED_NON_STUB`;
            a problem's ``required_loci``); a stub there always warns.

    Returns:
        One plain-English string per problem, in this order: stub genes that matter (loci order,
        :data:`swarm_evo.population.genes.LOCI` first), the deep-learning framework conflict, deep-learning
        LOSS/OPTIMIZER/INITIALIZATION genes next to a non-deep-learning MODEL (loci order),
        gradient-boosting library mismatches (loci order). Deterministic for its inputs.
    """
    sources = dict(sources or {})
    preambles = dict(preambles or {})
    loci = _ordered_loci(genes)
    warnings: list[str] = []

    required = set(required)
    scaffold = dict(scaffold) if scaffold is not None else None
    for locus in loci:
        if not is_stub(genes[locus], stub_threshold):
            continue
        from_scaffold = primary_id is not None and sources.get(locus) == primary_id
        scaffold_has_code = (
            scaffold is not None and not from_scaffold and not is_stub(scaffold.get(locus), stub_threshold)
        )
        if locus in required:
            warnings.append(
                f"gene {_origin(locus, sources)} is empty but {locus} must hold real code: write it"
                + (" or keep the primary parent's" if scaffold_has_code or scaffold is None else "")
            )
        elif scaffold_has_code:
            warnings.append(
                f"gene {_origin(locus, sources)} is only a stub while the primary parent's {locus} has "
                f"code: keep the primary parent's {locus} unless dropping it is intended"
            )

    frameworks = {l: gene_frameworks(genes[l] or "", preambles.get(l, "")) for l in loci}

    dl_users: dict[str, list[str]] = {}
    for locus in loci:
        for fw in sorted(frameworks[locus] & DL_FRAMEWORKS):
            dl_users.setdefault(fw, []).append(locus)
    if len(dl_users) > 1:
        parts = "; ".join(
            f"{fw} in {', '.join(_origin(l, sources) for l in users)}"
            for fw, users in sorted(dl_users.items(), key=lambda kv: loci.index(kv[1][0]))
        )
        model_dl = sorted(frameworks.get("MODEL", set()) & DL_FRAMEWORKS)
        target = f"the MODEL gene's {model_dl[0]}" if len(model_dl) == 1 else "one of them"
        warnings.append(
            f"framework conflict: the genes use more than one deep-learning framework ({parts}); "
            f"use {target} throughout and rewrite the other genes for it"
        )

    model_code = genes.get("MODEL") or ""
    model_pre = preambles.get("MODEL", "")
    model_fws = frameworks.get("MODEL", set()) | boosting_libraries(model_code, model_pre)
    if model_fws and model_fws <= NON_DL_FRAMEWORKS:
        for locus in loci:
            if locus not in DL_GENE_LOCI:
                continue
            used = frameworks[locus] & DL_FRAMEWORKS
            if used:
                warnings.append(
                    f"framework conflict: gene {_origin(locus, sources)} uses {_names(used)} "
                    f"but the MODEL gene uses only {_names(model_fws)}: rewrite {locus} for "
                    f"{_names(model_fws)} (or leave it a stub) — a {_names(used)} "
                    f"{locus.lower()} cannot train this model"
                )

    model_boost = boosting_libraries(model_code, model_pre)
    if model_boost:
        for locus in loci:
            if locus not in BOOSTING_GENE_LOCI:
                continue
            other = boosting_libraries(genes[locus] or "", preambles.get(locus, "")) - model_boost
            if other:
                warnings.append(
                    f"library mismatch: gene {_origin(locus, sources)} is written for "
                    f"{_names(other)} but the MODEL gene uses {_names(model_boost)}: translate "
                    f"its parameters and calls to {_names(model_boost)}'s names"
                )
    return warnings
