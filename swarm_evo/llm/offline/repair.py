"""Rule-based debugging and static fixes, driven by the traceback like a careful engineer.

``debug`` repairs with probability ``repair_rate`` per attempt: KeyError of a misspelled
column → fuzzy match against the public files' columns; NameError → add the import; a length
or shape mismatch → remove the self-slicing line; TimeoutError/MemoryError → make the program
cheaper; a gradient-boosting library's own error (:data:`LIBRARY_RULES`: string columns given
to LightGBM/XGBoost/CatBoost, string class labels given to XGBoost, early stopping without an
eval_set, CatBoost's conflicting logging parameters) → the matching fix of
:func:`fix_library`. Otherwise it returns a plausible edit that leaves the bug in place.
"""

from __future__ import annotations

import difflib
import random
import re

from swarm_evo.population import genes as G

from .dataset import public_columns
from .preamble import known_imports

_SELF_SLICE = re.compile(
    r"^[ \t]*(\w+)[ \t]*=[ \t]*\1(?:\.iloc|\.loc|\.values)?\[[ \t]*(?::[ \t]*-[ \t]*\d+|-?\d+[ \t]*:|:[ \t]*len\([^)]*\)[ \t]*-[ \t]*\d+)[ \t]*\][^\n]*\n?",
    re.M)
_SHAPE_WORDS = ("inconsistent numbers of samples", "length of values", "same length", "shape",
                "mismatch", "does not match length", "dimension")


def _last_error_line(term_out: str) -> str:
    lines = [ln for ln in (term_out or "").strip().split("\n") if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", ln.strip()):
            return ln.strip()
    return lines[-1].strip() if lines else ""


def fix_columns(code: str, term_out: str, columns: list[str]) -> str | None:
    """Replace misspelled column literals named in a KeyError with the closest real column."""
    err = _last_error_line(term_out)
    tokens = re.findall(r"'([^']+)'", err) + re.findall(r'"([^"]+)"', err)
    changed = code
    for tok in tokens:
        if tok in columns:
            continue
        match = difflib.get_close_matches(tok, columns, n=1, cutoff=0.6)
        if match and (f'"{tok}"' in changed or f"'{tok}'" in changed):
            changed = changed.replace(f'"{tok}"', f'"{match[0]}"').replace(f"'{tok}'", f"'{match[0]}'")
    return changed if changed != code else None


def fix_name(code: str, term_out: str) -> str | None:
    """Add the import that binds the undefined name of a NameError to the preamble."""
    m = re.search(r"name '(\w+)' is not defined", term_out or "")
    if not m:
        return None
    line = known_imports().get(m.group(1))
    if not line:
        return None
    preamble, genes = G.split_program(code)
    lines = preamble.split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.startswith(("import ", "from "))), default=-1)
    lines.insert(last + 1, line)
    return G.render_program("\n".join(lines), genes)


def fix_shape(code: str) -> str | None:
    """Remove self-slicing lines (``y = y[:-1]``) that break row alignment."""
    new = _SELF_SLICE.sub("", code)
    return new if new != code else None


def make_cheaper(code: str) -> str | None:
    """Halve estimators, iterations, TF-IDF size and optuna trials/seconds, use 3 folds: for
    timeouts and OOM. The floors (50 estimators, 30 optuna seconds, ...) never raise a value
    that is already below them (a program sized small by :mod:`.effort` stays small)."""
    rules = {
        "N_ESTIMATORS": lambda v: min(int(v), max(50, int(v) // 2)),
        "MAX_ITER": lambda v: min(int(v), max(100, int(v) // 2)),
        "TFIDF_MAX_FEATURES": lambda v: min(int(v), max(2000, int(v) // 2)),
        "SVD_COMPONENTS": lambda v: min(int(v), max(16, int(v) // 2)),
        "N_FOLDS": lambda v: min(int(v), 3),
        "OPTUNA_TRIALS": lambda v: min(int(v), max(3, int(v) // 2)),
        "OPTUNA_TIMEOUT": lambda v: min(int(v), max(30, int(v) // 2)),
    }
    new = code
    for name, fn in rules.items():
        def sub(m, fn=fn):
            try:
                return f"{m.group(1)}{fn(float(m.group(2)))}"
            except ValueError:
                return m.group(0)
        new = re.sub(rf"^({name} = )([0-9.]+)", sub, new, flags=re.M)
    if "N_ESTIMATORS" not in new and new == code:
        preamble, genes = G.split_program(new)
        if "OPTIMIZER" in genes:
            genes["OPTIMIZER"] = genes["OPTIMIZER"].rstrip("\n") + "\nN_ESTIMATORS = 100\nMAX_ITER = 300\n\n"
            new = G.render_program(preamble, genes)
    return new if new != code else None


LIBRARY_RULES: tuple[tuple[str, str], ...] = (
    (r"pandas dtypes must be int, float or bool|DataFrame\.dtypes for data must be int, float, bool or category"
     r"|CatBoostError: .*Cannot convert .* to float", "preprocess"),
    (r"Invalid classes inferred from unique values of `y`", "encode_labels"),
    (r"validation dataset for early stopping|For early stopping, at least one dataset", "early_stopping"),
    (r"Only one of parameters \['verbose', 'logging_level'", "logging"),
)
"""(regular expression of the library's error, fix of :func:`fix_library`): LightGBM, XGBoost and
CatBoost given string columns; XGBoost given class names; LightGBM/XGBoost early stopping with
no eval_set; CatBoost's verbose together with logging_level."""


def _fix_library_once(code: str, fix: str) -> tuple[str, str] | None:
    if fix == "preprocess":
        new = re.sub(r"^([ \t]*)return estimator\b[^\n]*$",
                     r"\1return make_pipeline(build_preprocessor(PREPROCESS_KIND), estimator)", code, flags=re.M)
        return (new, "the estimator gets the DATA gene's preprocessing again (string columns encoded)") \
            if new != code else None
    if fix == "encode_labels":
        has_fit = re.search(r"^label_encoder\.fit\(", code, re.M) is not None
        line = "y = label_encoder.transform(target_raw)" if has_fit else "y = label_encoder.fit_transform(target_raw)"
        new = re.sub(r"^y = (?!label_encoder\.)[^\n]*$", line, code, count=1, flags=re.M)
        if new != code and "label_encoder = LabelEncoder()" not in new:
            new = new.replace(line, "label_encoder = LabelEncoder()\n" + line, 1)
        return (new, "the class labels are encoded as 0..K-1 with the LabelEncoder") if new != code else None
    if fix == "early_stopping":
        new = re.sub(r"\bearly_stopping_rounds?=[^,()\n]+,[ \t]*", "", code)
        return (new, "removed early_stopping_rounds (there is no eval_set to stop on)") if new != code else None
    if fix == "logging":
        new = re.sub(r"\blogging_level=[^,()\n]+,[ \t]*", "", code)
        new = re.sub(r"\bverbose=True\b", "verbose=0", new)
        return (new, "one logging parameter only: verbose=0, logging_level removed") if new != code else None
    return None


def fix_library(code: str, term_out: str) -> tuple[str, str] | None:
    """The fix for a gradient-boosting library's error in ``term_out`` (see :data:`LIBRARY_RULES`),
    as (new code, description), or None when no rule matches or its edit finds nothing to change."""
    tail = (term_out or "")[-4000:]
    for pattern, fix in LIBRARY_RULES:
        if re.search(pattern, tail):
            res = _fix_library_once(code, fix)
            if res:
                return res
    return None


def failing_locus(code: str, term_out: str) -> str | None:
    """The locus holding the deepest ``solution.py`` line of the traceback."""
    nums = [int(n) for n in re.findall(r'File "[^"]*solution\.py", line (\d+)', term_out or "")]
    if not nums:
        return None
    target = nums[-1]
    current = None
    for i, line in enumerate(code.split("\n"), start=1):
        m = re.match(r"^[ \t]*#[ \t]*\[SECTION:[ \t]*(\w+)[ \t]*\]", line)
        if m:
            current = m.group(1)
        if i == target:
            return current
    return None


def irrelevant_edit(code: str, attempt: int, rng: random.Random) -> str:
    """A plausible edit that does not touch the bug (the chain can end dead)."""
    preamble, genes = G.split_program(code)
    note = rng.choice([
        "added a progress message before training",
        "double-checked the fold setup",
        "kept the data loading unchanged",
    ])
    locus = "TRAINING_TRICKS" if "TRAINING_TRICKS" in genes else (list(genes) or [None])[-1]
    if locus is None:
        return code + f"\n# debug attempt {attempt}: {note}\n"
    text = genes[locus]
    genes[locus] = f"# debug attempt {attempt}: {note}\n" + text
    return G.render_program(preamble, genes)


def repair(code: str, term_out: str, exc_type: str | None, public_dir: str,
           regenerate_gene=None) -> tuple[str | None, str]:
    """Try every rule that matches the failure; returns (new code or None, description)."""
    exc = exc_type or ""
    tail = (term_out or "")[-4000:]
    low = tail.lower()
    if exc in ("TimeoutError", "MemoryError") or "timed out" in low or "timeout" in exc.lower():
        new = make_cheaper(code)
        if new:
            return new, "made the program cheaper (fewer estimators/iterations/features/folds)"
    res = fix_library(code, tail)
    if res:
        return res
    if exc == "KeyError" or "KeyError" in tail or "not in index" in tail or "not found in axis" in tail:
        new = fix_columns(code, tail, public_columns(public_dir))
        if new:
            return new, "replaced a misspelled column name with the matching column of ./input"
    if exc == "NameError" or "NameError" in tail:
        new = fix_name(code, tail)
        if new:
            return new, "added the missing import to the preamble"
    if exc in ("ValueError", "IndexError") or any(w in low for w in _SHAPE_WORDS):
        new = fix_shape(code)
        if new:
            return new, "removed the slicing line that misaligned rows"
    new = fix_shape(code)
    if new:
        return new, "removed a slicing line that misaligned rows"
    if regenerate_gene is not None:
        locus = failing_locus(code, term_out)
        if locus in G.LOCI:
            preamble, genes = G.split_program(code)
            genes[locus] = regenerate_gene(locus)
            return G.render_program(preamble, genes), f"rewrote the failing {locus} gene with a known-good version"
    return None, "no rule matched"
