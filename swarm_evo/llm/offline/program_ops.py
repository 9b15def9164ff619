"""The offline model's answers for program-optimisation problems (CTX with a ``problem`` key).

Problems (circle packing, TSP, code optimisation, any folder loaded by
``swarm_evo.evaluation.problem``) give the model their initial program, organised in sections
``# [SECTION: NAME]`` (the preamble before the first marker holds imports and fixed
constants), and optional alleles: alternative section texts ``{locus: {name: text}}``, each
starting with ``# allele: <description>``. Section parameters are the UPPER_CASE assignments of
a number (``STEP_SIZE = 0.05``, ``N_ITERS = 200``; names of two or more characters).

Every handler is a pure function of the CTX and the call's ``random.Random(f"{seed}:{call_key}")``:

- ``draft``: the initial program, each locus with alleles swapped to a random allele with
  probability 1/2, then 1-3 parameters perturbed; combinations whose allele part of the
  approach tag appears in ``draft_history`` are avoided (up to 8 tries).
- ``mutate``: only the gene at ``target_locus`` changes: with probability 0.35 (or when it has no
  parameters) a different allele of that locus, else 1-2 of its parameters perturbed (ints
  ±1..3, ×2 or ÷2 keeping positive values ≥ 1 and non-negative ones ≥ 0; floats
  ×(1 ± U(0.05, 0.3)) with one more significant digit than the original, at least 2).
- ``merge``: the primary parent's preamble and genes, each locus of ``gene_plan`` replaced.
- faults: with probability ``fault_rate`` one realistic bug is planted in a changed locus
  (misspelled name → NameError, ``range(len(a) + 1)`` → IndexError, ``x = x[:-1]`` after an
  array assignment → shape error, a divisor parameter set to 0 → ZeroDivisionError).
- ``debug``: with probability ``repair_rate`` a rule read off the traceback repairs the program
  (closest identifier for a NameError, off-by-one ranges for an IndexError, a zero divisor
  restored to the baseline's value, self-slicing lines removed, loops halved on a timeout, the
  failing section restored from the initial program); otherwise an irrelevant edit.
- ``fix``: missing markers, stub required sections, syntax errors and a missing entry function
  are repaired with the initial program's sections.
- ``review``: ``submit_review`` arguments from ``evaluation`` (correct, error, combined_score).
- ``auxiliary_metrics``: an ``auxiliary_metrics.py`` (seed 002 dynamic auxiliary metrics) with
  mean/std/min/max/count of every array and the value of every scalar of the program output.

Code handlers return ``(plan, code)``; :mod:`.respond` formats them as code replies.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import keyword
import math
import random
import re

from ... import genes as G

APPROACH_TAG_MAX = 200
"""Approach tags are clipped to this many characters (swarm_evo.review.APPROACH_TAG_MAX)."""

FAULT_KINDS: tuple[str, ...] = ("misspelled_name", "off_by_one", "shape_error", "zero_divisor")
"""The bugs :func:`plant_fault` can plant; each has a traceback-driven repair in :func:`repair`."""

ALLELE_PREFIX = "# allele:"

_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*\[SECTION:[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\][ \t]*\r?$")
_NUMBER = r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)"
_PARAM = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<name>[A-Z][A-Z0-9_]+)(?P<eq>[ \t]*=[ \t]*)(?P<value>{_NUMBER})"
    r"(?P<tail>[ \t]*(?:#[^\n]*)?)$", re.M)
_SELF_SLICE = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*\1\[[ \t]*(?::[ \t]*-[ \t]*\d+|-?\d+[ \t]*:)[ \t]*\][ \t]*(?:\n|$)",
    re.M)
_RANGE_LEN_PLUS = re.compile(r"\brange\([ \t]*len\([ \t]*([A-Za-z_]\w*)[ \t]*\)[ \t]*\+[ \t]*1[ \t]*\)")
_CHEAP_NAMES = re.compile(r"ITER|STEP|TRIAL|RESTART|EPOCH|ROUND|SAMPLE|ATTEMPT|POP|GENERATION|REPEAT|"
                          r"SWEEP|PASS|MOVE|KICK|^N_|^NUM_|COUNT|LIMIT|BUDGET|TRIES")
_TIME_NAMES = re.compile(r"TIME|SECONDS")
_ARRAY_CALLS = {"array", "asarray", "zeros", "ones", "empty", "full", "linspace", "arange", "clip", "copy",
                "concatenate", "stack", "vstack", "hstack", "column_stack", "sorted", "list", "tolist",
                "reshape", "minimum", "maximum", "where", "roll", "argsort", "cumsum", "reduce", "zeros_like",
                "ones_like", "full_like", "tile", "repeat", "ravel", "flatten", "append"}
"""Calls whose result is taken to be an array or list (sites of the planted shape error)."""
_BUILTINS = set(dir(builtins))
_MODULE_IMPORTS = {
    "np": "import numpy as np", "numpy": "import numpy", "math": "import math",
    "random": "import random", "itertools": "import itertools", "time": "import time",
    "heapq": "import heapq", "collections": "import collections", "functools": "import functools",
    "bisect": "import bisect", "os": "import os", "sys": "import sys", "json": "import json",
    "operator": "import operator", "scipy": "import scipy",
}


# ----------------------------------------------------------------------------- problem helpers


def problem_of(ctx: dict) -> dict:
    """The CTX's problem dict (empty dict when absent)."""
    p = ctx.get("problem")
    return p if isinstance(p, dict) else {}


def initial_program(ctx: dict) -> str:
    """The problem's initial program text ("" when the CTX carries none)."""
    return str(problem_of(ctx).get("initial_program") or "")


def problem_loci(ctx: dict, code: str | None = None) -> list[str]:
    """Section names in program order: problem.loci, else CTX loci, else the initial program's
    markers; markers of ``code`` not in that list are appended in their order."""
    p = problem_of(ctx)
    loci = list(p.get("loci") or ctx.get("loci") or G.parse_genes(initial_program(ctx)))
    for extra in (G.parse_genes(initial_program(ctx)), G.parse_genes(code or "")):
        loci += [k for k in extra if k not in loci]
    return loci


def allele_table(ctx: dict) -> dict[str, dict[str, str]]:
    """``{locus: {allele_name: gene_text}}`` of the problem (only non-empty string texts)."""
    raw = problem_of(ctx).get("alleles") or {}
    out: dict[str, dict[str, str]] = {}
    for locus, opts in raw.items():
        if isinstance(opts, dict):
            kept = {str(n): t for n, t in opts.items() if isinstance(t, str) and t.strip()}
            if kept:
                out[str(locus)] = kept
    return out


def allele_description(text: str) -> str | None:
    """The description of the first ``# allele: <description>`` line of a gene, or None."""
    for line in (text or "").split("\n"):
        s = line.strip()
        if s.lower().startswith(ALLELE_PREFIX):
            return s[len(ALLELE_PREFIX):].strip() or None
    return None


def allele_label(desc: str, limit: int = 60) -> str:
    """A short label of an allele description: up to the first clause break, at most ``limit``
    characters (cut at a word boundary, "..." appended when cut)."""
    short = re.split(r" — | -- | - |; |: |\. |\(", desc.strip(), maxsplit=1)[0].strip().rstrip(".")
    short = short or desc.strip()
    if len(short) <= limit:
        return short
    cut = short[: limit - 3].rsplit(" ", 1)[0] if " " in short[: limit - 3] else short[: limit - 3]
    return cut.rstrip(" ,") + "..."


def gene_text(text: str) -> str:
    """A gene text as stored in a program: ends with one blank line."""
    return text.rstrip("\n") + "\n\n"


def current_allele(locus: str, text: str, table: dict[str, dict[str, str]]) -> str | None:
    """The allele name the gene comes from: same ``# allele:`` line or same normalised text."""
    opts = table.get(locus) or {}
    desc = allele_description(text)
    norm = G.normalise_gene(text)
    for name in sorted(opts):
        if G.normalise_gene(opts[name]) == norm:
            return name
    if desc is not None:
        for name in sorted(opts):
            if allele_description(opts[name]) == desc:
                return name
    return None


# ----------------------------------------------------------------------------- parameters


def find_params(text: str) -> list[re.Match[str]]:
    """The parameter assignments (UPPER_CASE name = number, one per line) of a text."""
    return list(_PARAM.finditer(text or ""))


def _is_float_literal(s: str) -> bool:
    return any(c in s for c in ".eE")


def _sig_digits(s: str) -> int:
    mant = re.split(r"[eE]", s.lstrip("-"))[0]
    digits = mant.replace(".", "").lstrip("0")
    if "." not in mant:
        digits = digits.rstrip("0")
    return max(1, len(digits))


def _format_float(v: float, sig: int) -> str:
    s = f"{v:.{sig}g}"
    if not any(c in s for c in ".eEn"):
        s += ".0"
    return s


def perturb_value(value: str, rng: random.Random) -> str:
    """A new literal for a numeric parameter literal ``value`` (never equal to it).

    Ints: ±1..±3, ×2 or ÷2 (positive values stay ≥ 1, non-negative ones ≥ 0); floats:
    ×(1 ± U(0.05, 0.3)) written with one more significant digit than the original (2..6);
    a zero float becomes U(0.01, 0.1).
    """
    if not _is_float_literal(value):
        v = int(value)
        low = 1 if v > 0 else (0 if v == 0 else None)
        big = abs(v) >= 10
        for _ in range(12):
            op = rng.choices(["add", "mul", "div"], weights=[0.3, 0.35, 0.35] if big else [0.7, 0.15, 0.15])[0]
            if op == "add":
                new = v + rng.choice([-3, -2, -1, 1, 2, 3])
            elif op == "mul":
                new = v * 2 if v != 0 else rng.randint(1, 3)
            else:
                new = int(v / 2)
            if low is not None:
                new = max(low, new)
            if new != v:
                return str(new)
        return str(v + 1)
    v = float(value)
    if v == 0.0:
        return _format_float(rng.uniform(0.01, 0.1), 2)
    sig = max(2, min(6, _sig_digits(value) + 1))
    for _ in range(12):
        factor = 1 + rng.choice([-1, 1]) * rng.uniform(0.05, 0.3)
        new = _format_float(v * factor, sig)
        if float(new) != v and math.isfinite(float(new)):
            return new
    return _format_float(v * 1.1, 6)


def perturb_params(text: str, rng: random.Random, count: int,
                   only: list[int] | None = None) -> tuple[str, list[tuple[str, str, str]]]:
    """Perturb ``count`` distinct parameters of ``text`` (indices ``only`` if given).

    Returns ``(new_text, [(name, old_literal, new_literal), ...])`` in text order.
    """
    matches = find_params(text)
    idx = list(range(len(matches))) if only is None else list(only)
    chosen = sorted(rng.sample(idx, min(count, len(idx)))) if idx else []
    changes = []
    new = text
    for i in reversed(chosen):
        m = matches[i]
        lit = perturb_value(m.group("value"), rng)
        new = new[: m.start("value")] + lit + new[m.end("value"):]
        changes.append((m.group("name"), m.group("value"), lit))
    return new, list(reversed(changes))


def _describe_changes(changes: list[tuple[str, str, str]]) -> str:
    return ", ".join(f"{n} {a} -> {b}" for n, a, b in changes)


def baseline_values(ctx: dict) -> dict[str, str]:
    """Parameter literals of the initial program's sections and of the alleles (first seen, non-zero)."""
    out: dict[str, str] = {}
    texts = list(G.parse_genes(initial_program(ctx)).values())
    for opts in allele_table(ctx).values():
        texts += [opts[n] for n in sorted(opts)]
    for text in texts:
        for m in find_params(text):
            if m.group("name") not in out and float(m.group("value")) != 0.0:
                out[m.group("name")] = m.group("value")
    return out


# ----------------------------------------------------------------------------- approach tags


def approach_tag(code: str, ctx: dict) -> str:
    """One-line approach: the sections' allele labels joined by " + ", then " | " and up to four
    parameters (those differing from the baseline first), e.g.
    ``"hexagonal rings + greedy radii + baseline refine | STEP = 0.06, N_ITERS = 400"``."""
    _, genes = G.split_program(code or "")
    if not genes:
        return "unstructured program (no section markers)"
    parts = []
    for locus in problem_loci(ctx, code):
        if locus not in genes:
            continue
        desc = allele_description(genes[locus])
        parts.append(allele_label(desc) if desc else f"baseline {locus.lower()}")
    base = baseline_values(ctx)
    params = [(m.group("name"), m.group("value")) for locus in problem_loci(ctx, code)
              for m in find_params(genes.get(locus, ""))]
    params.sort(key=lambda p: p[0] in base and float(base[p[0]]) == float(p[1]))
    tag = " + ".join(parts)
    if params:
        tag += " | " + ", ".join(f"{n} = {v}" for n, v in params[:4])
    return tag if len(tag) <= APPROACH_TAG_MAX else tag[: APPROACH_TAG_MAX - 3] + "..."


def tag_signature(tag: str | None) -> str:
    """The allele part of an approach tag (before " | "), used to compare drafts."""
    return (tag or "").split(" | ")[0].strip()


def _choices_text(choices: dict[str, str], table: dict[str, dict[str, str]]) -> str:
    out = []
    for locus, name in choices.items():
        desc = allele_description(table[locus][name])
        out.append(f"{locus} <- allele '{name}'" + (f" ({allele_label(desc, 80)})" if desc else ""))
    return "; ".join(out)


# ----------------------------------------------------------------------------- faults


def _gene_spans(code: str) -> dict[str, tuple[int, int]]:
    """``{locus: (first_line, last_line)}`` (1-based, inclusive) of each gene's text lines."""
    lines = code.split("\n")
    marks: list[tuple[str, int]] = []
    seen: set[str] = set()
    for i, line in enumerate(lines, start=1):
        m = _MARKER_LINE.match(line)
        if m and m.group(1) not in seen:
            seen.add(m.group(1))
            marks.append((m.group(1), i))
    spans = {}
    for j, (name, ln) in enumerate(marks):
        end = marks[j + 1][1] - 1 if j + 1 < len(marks) else len(lines)
        spans[name] = (ln + 1, end)
    return spans


def identifiers(tree: ast.AST) -> set[str]:
    """Every name a program binds or reads: Name ids, def/class names, arguments, import aliases."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return out


def _bound_names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return out


def _replace_at(code: str, spots: list[tuple[int, int, int]], new: str) -> str:
    """Replace (line, byte_col, byte_end_col) spots of ``code`` by ``new``."""
    lines = code.split("\n")
    for line, col, end in sorted(spots, reverse=True):
        raw = lines[line - 1].encode("utf-8")
        lines[line - 1] = (raw[:col] + new.encode("utf-8") + raw[end:]).decode("utf-8")
    return "\n".join(lines)


def _misspell(name: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(name) - 1)
    op = rng.choice(["drop", "swap", "double"])
    if op == "drop":
        return name[:i] + name[i + 1:]
    if op == "swap":
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    return name[:i] + name[i] + name[i:]


def closest_name(bad: str, names: set[str]) -> str | None:
    """The identifier of ``names`` closest to ``bad`` (difflib, cutoff 0.6), or None."""
    cands = sorted(n for n in names if n != bad)
    hit = difflib.get_close_matches(bad, cands, n=1, cutoff=0.6)
    return hit[0] if hit else None


def _plant_misspelling(code: str, span: tuple[int, int], rng: random.Random) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    bound = _bound_names(tree)
    loads: dict[str, list[tuple[int, int, int]]] = {}
    lines = code.split("\n")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
                and span[0] <= node.lineno <= span[1] and node.end_lineno == node.lineno):
            raw = lines[node.lineno - 1].encode("utf-8")
            if raw[node.col_offset:node.end_col_offset].decode("utf-8", "replace") == node.id:
                loads.setdefault(node.id, []).append((node.lineno, node.col_offset, node.end_col_offset))
    cands = sorted(n for n in loads if len(n) >= 3 and n in bound and n not in _BUILTINS)
    rng.shuffle(cands)
    for name in cands:
        for _ in range(10):
            bad = _misspell(name, rng)
            if (bad == name or not bad.isidentifier() or keyword.iskeyword(bad) or bad in _BUILTINS
                    or bad in _MODULE_IMPORTS or re.search(rf"(?<![\w.]){re.escape(bad)}(?!\w)", code)):
                continue
            new = _replace_at(code, loads[name], bad)
            try:
                new_ids = identifiers(ast.parse(new))
            except SyntaxError:
                continue
            if closest_name(bad, new_ids) == name:
                return new, f"misspelled_name: {name} -> {bad}"
    return None


def _indexes(stmt: ast.stmt, seq: str, var: str) -> bool:
    """True when a simple (non-compound) statement reads ``seq[var]``."""
    if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With, ast.Try, ast.FunctionDef, ast.ClassDef)):
        return False
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == seq
               and isinstance(n.slice, ast.Name) and n.slice.id == var for n in ast.walk(stmt))


def _plant_off_by_one(code: str, span: tuple[int, int], rng: random.Random) -> tuple[str, str] | None:
    """``for i in range(len(a)):`` whose body reads ``a[i]`` unconditionally → ``range(len(a) + 1)``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    sites = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)
                and span[0] <= node.lineno <= span[1]):
            continue
        it = node.iter
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and len(it.args) == 1 and not it.keywords and isinstance(it.args[0], ast.Call)
                and isinstance(it.args[0].func, ast.Name) and it.args[0].func.id == "len"
                and len(it.args[0].args) == 1 and isinstance(it.args[0].args[0], ast.Name)
                and it.lineno == it.end_lineno):
            seq = it.args[0].args[0].id
            if any(_indexes(st, seq, node.target.id) for st in node.body):
                sites.append((it, seq))
    if not sites:
        return None
    it, seq = rng.choice(sites)
    new = _replace_at(code, [(it.lineno, it.col_offset, it.end_col_offset)], f"range(len({seq}) + 1)")
    return new, f"off_by_one: range(len({seq})) -> range(len({seq}) + 1)"


def _plant_shape(code: str, span: tuple[int, int], rng: random.Random) -> tuple[str, str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    sites = []
    bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for body in bodies:
        for k, stmt in enumerate(body):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                    and span[0] <= stmt.lineno and stmt.end_lineno <= span[1]):
                continue
            val = stmt.value
            if isinstance(val, ast.Call):
                fn = val.func
                fname = fn.id if isinstance(fn, ast.Name) else (fn.attr if isinstance(fn, ast.Attribute) else "")
                if fname not in _ARRAY_CALLS:
                    continue
            elif not (isinstance(val, ast.ListComp) or (isinstance(val, ast.List) and val.elts)):
                continue
            name = stmt.targets[0].id
            later = body[k + 1:]
            if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                   for s in later for n in ast.walk(s)):
                sites.append((stmt, name))
    if not sites:
        return None
    stmt, name = rng.choice(sites)
    lines = code.split("\n")
    indent = re.match(r"[ \t]*", lines[stmt.lineno - 1]).group(0)
    lines.insert(stmt.end_lineno, f"{indent}{name} = {name}[:-1]")
    return "\n".join(lines), f"shape_error: '{name} = {name}[:-1]' after line {stmt.end_lineno}"


def _plant_zero_divisor(code: str, text: str, rng: random.Random) -> tuple[str, str] | None:
    hits = [m for m in find_params(text) if float(m.group("value")) != 0.0
            and re.search(rf"(?:/|//|%)[ \t]*{m.group('name')}\b", code)]
    if not hits:
        return None
    m = rng.choice(hits)
    zero = "0.0" if _is_float_literal(m.group("value")) else "0"
    return (text[: m.start("value")] + zero + text[m.end("value"):],
            f"zero_divisor: {m.group('name')} {m.group('value')} -> {zero}")


def plant_fault(code: str, locus: str, rng: random.Random,
                kinds: tuple[str, ...] | None = None) -> tuple[str, str]:
    """Plant one realistic bug in the gene at ``locus``; returns ``(code, description)``.

    Kinds (tried in random order, the first applicable wins; ``kinds`` restricts them):
    misspelled_name (every read of one bound name in the gene misspelled so that its closest
    identifier is the original → NameError), off_by_one (``for i in range(len(a))`` whose body
    reads ``a[i]`` unconditionally → ``range(len(a) + 1)`` → IndexError), shape_error (``x = x[:-1]``
    after an array/list assignment whose ``x`` is used later), zero_divisor (a parameter used
    as a divisor set to 0 → ZeroDivisionError). Returns ``(code, "")`` when none applies.
    """
    spans = _gene_spans(code)
    preamble, genes = G.split_program(code)
    if locus not in genes or locus not in spans:
        return code, ""
    order = list(kinds or FAULT_KINDS)
    rng.shuffle(order)
    for kind in order:
        res = None
        if kind == "misspelled_name":
            res = _plant_misspelling(code, spans[locus], rng)
        elif kind == "shape_error":
            res = _plant_shape(code, spans[locus], rng)
        elif kind == "off_by_one":
            res = _plant_off_by_one(code, spans[locus], rng)
        elif kind == "zero_divisor":
            r = _plant_zero_divisor(code, genes[locus], rng)
            res = (G.replace_gene(code, locus, r[0]), r[1]) if r else None
        if res is not None:
            return res
    return code, ""


def _maybe_fault(ctx: dict, rng: random.Random, code: str, loci: list[str]) -> tuple[str, str]:
    if loci and rng.random() < float(ctx.get("fault_rate") or 0.0):
        pool = [lc for lc in loci if not G.is_stub(G.parse_genes(code).get(lc))] or loci
        return plant_fault(code, rng.choice(pool), rng)
    return code, ""


# ----------------------------------------------------------------------------- repair


def error_line(term_out: str) -> str:
    """The last ``SomethingError: ...`` line of an output (else its last non-empty line)."""
    lines = [ln.strip() for ln in (term_out or "").split("\n") if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^\w+(\.\w+)*(Error|Exception|Interrupt)\b", ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def failing_line(code: str, term_out: str) -> int | None:
    """The deepest traceback line that points into the candidate program (program.py or solution.py)."""
    hits = re.findall(r'File "([^"]*)", line (\d+)', term_out or "")
    n_lines = len(code.split("\n"))
    nums = [int(n) for f, n in hits if f.replace("\\", "/").split("/")[-1] in ("program.py", "solution.py")]
    nums = [n for n in nums if 1 <= n <= n_lines]
    return nums[-1] if nums else None


def locus_of_line(code: str, line: int) -> str | None:
    """The section holding 1-based ``line`` (None for the preamble)."""
    for locus, (a, b) in _gene_spans(code).items():
        if a - 1 <= line <= b:
            return locus
    return None


def add_import(preamble: str, line: str) -> str:
    """``preamble`` with the import ``line`` after its last top-level import (else after the
    module docstring, else first)."""
    lines = preamble.split("\n")
    last = max((i for i, ln in enumerate(lines) if re.match(r"(import|from)\s+\w", ln)), default=None)
    if last is None:
        try:
            body = ast.parse(preamble).body
        except SyntaxError:
            body = []
        doc = body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
        last = body[0].end_lineno - 1 if doc else -1
    lines.insert(last + 1, line)
    return "\n".join(lines)


def fix_name(code: str, term_out: str) -> tuple[str, str] | None:
    """NameError: replace the undefined name by the closest identifier of the program, or add
    the import of a well-known module alias (np, math, random, ...)."""
    m = re.search(r"name '(\w+)' is not defined", term_out or "")
    if not m:
        return None
    bad = m.group(1)
    try:
        ids = identifiers(ast.parse(code))
    except SyntaxError:
        ids = set(re.findall(r"[A-Za-z_]\w*", code))
    pattern = re.compile(rf"(?<![\w.]){re.escape(bad)}(?!\w)")
    if bad in _MODULE_IMPORTS:
        preamble, genes = G.split_program(code)
        new_pre = add_import(preamble, _MODULE_IMPORTS[bad])
        return (G.render_program(new_pre, genes) if genes else new_pre), f"added '{_MODULE_IMPORTS[bad]}'"
    good = closest_name(bad, ids - {bad}) or closest_name(bad, _BUILTINS)
    if good is None or not pattern.search(code):
        return None
    return pattern.sub(good, code), f"renamed the undefined name '{bad}' to '{good}'"


def fix_off_by_one(code: str) -> tuple[str, str] | None:
    """IndexError: ``range(len(a) + 1)`` indexes one past the end → ``range(len(a))``."""
    new = _RANGE_LEN_PLUS.sub(lambda m: f"range(len({m.group(1)}))", code)
    return (new, "iterated over range(len(a)) instead of one past the end") if new != code else None


def fix_zero_divisor(code: str, term_out: str, ctx: dict) -> tuple[str, str] | None:
    """ZeroDivisionError: a parameter set to 0 that divides → the baseline's value (else 1)."""
    zeros = {m.group("name") for m in find_params(code) if float(m.group("value")) == 0.0}
    divisors = {n for n in zeros if re.search(rf"(?:/|//|%)[ \t]*{n}\b", code)}
    line = failing_line(code, term_out)
    if line is not None:
        text = code.split("\n")[line - 1]
        on_line = {n for n in divisors if re.search(rf"(?:/|//|%)[ \t]*{n}\b", text)}
        divisors = on_line or divisors
    if not divisors:
        return None
    base = baseline_values(ctx)
    new = code
    done = []
    for name in sorted(divisors):
        def sub(m, name=name):
            if m.group("name") != name or float(m.group("value")) != 0.0:
                return m.group(0)
            lit = base.get(name) or ("1.0" if _is_float_literal(m.group("value")) else "1")
            done.append(f"{name} = {lit}")
            return m.group(0)[: m.start("value") - m.start()] + lit + m.group(0)[m.end("value") - m.start():]
        new = _PARAM.sub(sub, new)
    return (new, "a zero divisor parameter restored (" + ", ".join(done) + ")") if new != code else None


def fix_self_slice(code: str) -> tuple[str, str] | None:
    """Shape errors: remove ``x = x[:-1]`` style lines that drop elements of an array."""
    new = _SELF_SLICE.sub("", code)
    return (new, "removed the line that dropped the last element of an array") if new != code else None


def make_cheaper(code: str) -> tuple[str, str] | None:
    """Timeouts/memory: halve the section parameters that size the work: integers ≥ 4 named like
    a loop count (ITER, STEP, TRIAL, RESTART, KICK, ROUND, ...) and time limits (TIME, SECONDS)."""
    done = []

    def sub(m):
        name, value = m.group("name"), m.group("value")
        if _TIME_NAMES.search(name) and float(value) > 0:
            new = _format_float(float(value) / 2, 6) if _is_float_literal(value) else str(max(1, int(value) // 2))
        elif not _is_float_literal(value) and _CHEAP_NAMES.search(name) and int(value) >= 4:
            new = str(int(value) // 2)
        else:
            return m.group(0)
        if new == value:
            return m.group(0)
        done.append(f"{name} {value} -> {new}")
        return m.group(0)[: m.start("value") - m.start()] + new + m.group(0)[m.end("value") - m.start():]

    preamble, genes = G.split_program(code)
    if not genes:
        return None
    new_genes = {k: _PARAM.sub(sub, v) for k, v in genes.items()}
    if not done:
        return None
    return G.render_program(preamble, new_genes), "halved the work per run (" + ", ".join(done) + ")"


def restore_locus(code: str, locus: str, ctx: dict) -> tuple[str, str] | None:
    """Replace the gene at ``locus`` by the initial program's gene (when it differs)."""
    base = G.parse_genes(initial_program(ctx))
    preamble, genes = G.split_program(code)
    if locus not in base or G.normalise_gene(genes.get(locus, "")) == G.normalise_gene(base[locus]):
        return None
    genes[locus] = base[locus]
    return (G.render_program(preamble, genes, problem_loci(ctx, code)),
            f"restored the initial program's {locus} section")


def repair(code: str, term_out: str, exc_type: str | None, ctx: dict,
           rng: random.Random) -> tuple[str | None, str]:
    """Apply the first rule that matches the failure; returns ``(new code or None, description)``."""
    exc = exc_type or ""
    tail = (term_out or "")[-6000:]
    low = tail.lower()
    if exc in ("TimeoutError", "MemoryError") or "timed out" in low or "timeout" in exc.lower():
        res = make_cheaper(code)
        if res:
            return res
    rules = []
    if exc == "NameError" or "NameError" in tail:
        rules.append(lambda: fix_name(code, tail))
    if exc == "ZeroDivisionError" or "division by zero" in low or "ZeroDivisionError" in tail:
        rules.append(lambda: fix_zero_divisor(code, tail, ctx))
    if exc == "IndexError" or "IndexError" in tail or "out of range" in low or "out of bounds" in low:
        rules.append(lambda: fix_off_by_one(code))
    rules.append(lambda: fix_self_slice(code))
    for rule in rules:
        res = rule()
        if res:
            return res
    line = failing_line(code, tail)
    locus = locus_of_line(code, line) if line else None
    if locus:
        res = restore_locus(code, locus, ctx)
        if res:
            return res[0], res[1] + " (the traceback points into it)"
    base = G.parse_genes(initial_program(ctx))
    _, genes = G.split_program(code)
    changed = [lc for lc in problem_loci(ctx, code) if lc in base and lc in genes
               and G.normalise_gene(genes[lc]) != G.normalise_gene(base[lc])]
    # a section whose own comment admits a known defect is the first suspect
    suspects = [lc for lc in changed if re.search(r"\b(broken|bug|buggy|wrong|incorrect)\b",
                                                  allele_description(genes[lc]) or "", re.I)]
    if suspects or changed:
        res = restore_locus(code, rng.choice(suspects or changed), ctx)
        if res:
            return res[0], res[1] + " (the most likely cause of the failure)"
    return None, "no rule matched"


def irrelevant_edit(code: str, attempt: int, rng: random.Random) -> str:
    """A plausible edit that leaves the bug in place: a comment line in one section."""
    note = rng.choice(["re-checked the loop bounds", "kept the numerics unchanged",
                       "verified the output format"])
    preamble, genes = G.split_program(code)
    if not genes:
        return code.rstrip("\n") + f"\n# debug attempt {attempt}: {note}\n"
    locus = rng.choice(list(genes))
    lines = genes[locus].split("\n")
    i = 0
    while i < len(lines) and lines[i].lstrip().startswith("#"):
        i += 1
    lines.insert(i, f"# debug attempt {attempt}: {note}")
    genes[locus] = "\n".join(lines)
    return G.render_program(preamble, genes)


# ----------------------------------------------------------------------------- handlers


def _render(preamble: str, genes: dict[str, str], ctx: dict) -> str:
    order = problem_loci(ctx)
    order += [k for k in genes if k not in order]
    return G.render_program(preamble, genes, [k for k in order if k in genes])


def draft(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """A new program from the initial one: random alleles (p = 0.5 per locus) and 1-3 perturbed
    parameters, avoiding allele combinations already in ``draft_history``."""
    preamble, base = G.split_program(initial_program(ctx))
    if not base:
        raise ValueError("offline model: CTX problem.initial_program has no '# [SECTION: ...]' markers")
    table = allele_table(ctx)
    loci = [lc for lc in problem_loci(ctx) if lc in base or lc in table]
    used = {tag_signature(r.get("approach_tag")) for r in ctx.get("draft_history") or [] if isinstance(r, dict)}
    chosen = None
    for _ in range(8):
        genes = dict(base)
        choices: dict[str, str] = {}
        for locus in loci:
            opts = table.get(locus) or {}
            if opts and rng.random() < 0.5:
                name = rng.choice(sorted(opts))
                genes[locus] = gene_text(opts[name])
                choices[locus] = name
        params = [(locus, i) for locus in loci for i in range(len(find_params(genes.get(locus, ""))))]
        picked = rng.sample(params, min(len(params), rng.randint(1, 3))) if params else []
        changes: list[tuple[str, str, str, str]] = []
        for locus in loci:
            idx = [i for lc, i in picked if lc == locus]
            if idx:
                genes[locus], ch = perturb_params(genes[locus], rng, len(idx), idx)
                changes += [(locus, *c) for c in ch]
        code = _render(preamble, genes, ctx)
        cand = (code, choices, changes)
        if chosen is None:
            chosen = cand
        if tag_signature(approach_tag(code, ctx)) not in used:
            chosen = cand
            break
    code, choices, changes = chosen
    touched = list(dict.fromkeys(list(choices) + [c[0] for c in changes])) or loci
    code, _fault = _maybe_fault(ctx, rng, code, touched)
    plan = "Draft: start from the problem's initial program"
    plan += "; " + _choices_text(choices, table) if choices else "; keep every section's baseline code"
    plan += "; parameters " + ", ".join(f"{lc}.{n} {a} -> {b}" for lc, n, a, b in changes) if changes else ""
    plan += f". Approach: {tag_signature(approach_tag(code, ctx))}."
    return plan, code


def mutate(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Change only the gene at ``target_locus`` of ``parent_code`` (allele swap or parameters)."""
    code = ctx.get("parent_code") or ""
    locus = ctx.get("target_locus") or (problem_loci(ctx, code) or [""])[0]
    table = allele_table(ctx)
    preamble, genes = G.split_program(code)
    if locus not in genes:
        base = G.parse_genes(initial_program(ctx))
        if locus in base and genes:
            genes[locus] = base[locus]
            new = _render(preamble, genes, ctx)
            return (f"Mutation of {locus}: the parent had no {locus} section; added the initial "
                    f"program's.", new)
        return f"Mutation: the parent has no {locus} section; unchanged.", code
    text = genes[locus]
    cur = current_allele(locus, text, table)
    others = [n for n in sorted(table.get(locus) or {})
              if n != cur and G.normalise_gene(table[locus][n]) != G.normalise_gene(text)]
    params = find_params(text)
    if others and (not params or rng.random() < 0.35):
        name = rng.choice(others)
        new_text = gene_text(table[locus][name])
        desc = allele_description(new_text)
        detail = (f"swapped {locus} from {('allele ' + repr(cur)) if cur else 'its current code'} to allele "
                  f"'{name}'" + (f" ({allele_label(desc, 80)})" if desc else ""))
    elif params:
        new_text, ch = perturb_params(text, rng, rng.randint(1, min(2, len(params))))
        detail = f"tuned {locus} parameters: {_describe_changes(ch)}"
    else:
        new_text = text.rstrip("\n") + f"\n# mutation: {locus.lower()} has no tunable parameters or " \
                                        f"alternatives; revisit it (variant {rng.randint(0, 999)})\n\n"
        detail = (f"{locus} has no numeric parameters and no alternative sections; added a "
                  f"harmless annotation only")
    new_code = G.replace_gene(code, locus, new_text)
    new_code, _fault = _maybe_fault(ctx, rng, new_code, [locus])
    return f"Mutation of one section only: {detail}.", new_code


def merge(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Primary parent as scaffold (preamble and genes), each locus of ``gene_plan`` replaced."""
    preamble, genes = G.split_program(ctx.get("primary_parent_code") or "")
    plan = ctx.get("gene_plan") or {}
    sources = []
    for locus, entry in plan.items():
        text = entry.get("code") if isinstance(entry, dict) else entry
        if not isinstance(text, str):
            continue
        genes[locus] = text if text.endswith("\n") else text + "\n"
        src = entry.get("source_node_id", "?") if isinstance(entry, dict) else "?"
        desc = allele_description(text)
        sources.append(f"{locus} <- {src}" + (f" ({allele_label(desc)})" if desc else ""))
    if not genes:
        preamble, genes = G.split_program(initial_program(ctx))
    code = _render(preamble, genes, ctx)
    code, _fault = _maybe_fault(ctx, rng, code, [lc for lc in plan if lc in genes] or list(genes))
    return ("Merge: the primary parent is the scaffold and each planned section comes from its source: "
            + ("; ".join(sources) or "no planned sections") + f". Approach: {tag_signature(approach_tag(code, ctx))}."), code


def debug(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Repair ``code`` from ``term_out``/``exc_type`` with probability ``repair_rate``."""
    code = ctx.get("code") or ""
    attempt = int(ctx.get("attempt") or 1)
    if rng.random() < float(ctx.get("repair_rate", 0.8)):
        new, desc = repair(code, ctx.get("term_out") or "", ctx.get("exc_type"), ctx, rng)
        if new is not None:
            return f"Debug attempt {attempt}: {desc}.", new
    return (f"Debug attempt {attempt}: the failure does not point at the algorithm; re-checked one "
            f"section and left the logic as it is.", irrelevant_edit(code, attempt, rng))


def fix(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Add missing markers/sections from the initial program, replace stub required sections,
    sections with syntax errors and a lost entry function, so the program compiles."""
    code = ctx.get("code") or ""
    p = problem_of(ctx)
    init = initial_program(ctx)
    base_pre, base = G.split_program(init)
    preamble, genes = G.split_program(code)
    notes = []
    if not genes:
        return ("Fix: the program lost its section structure; restarted from the problem's initial "
                "program with all section markers."), init
    for locus in problem_loci(ctx):
        if locus not in genes and locus in base:
            genes[locus] = base[locus]
            notes.append(f"added the missing {locus} section")
    for locus in p.get("required_loci") or []:
        if locus in genes and locus in base and G.is_stub(genes[locus]):
            genes[locus] = base[locus]
            notes.append(f"replaced the stub {locus} section")
    new = _render(preamble, genes, ctx)
    for _ in range(len(genes) + 2):
        try:
            compile(new, "program.py", "exec")
            break
        except SyntaxError as e:
            locus = locus_of_line(new, e.lineno or 0)
            if locus and locus in base and G.normalise_gene(genes[locus]) != G.normalise_gene(base[locus]):
                genes[locus] = base[locus]
                notes.append(f"rewrote {locus} (syntax error at line {e.lineno})")
            elif locus is None and preamble != base_pre:
                preamble = base_pre
                notes.append(f"restored the preamble (syntax error at line {e.lineno})")
            else:
                return "Fix: could not repair the syntax error; restarted from the initial program.", init
            new = _render(preamble, genes, ctx)
    else:
        return "Fix: could not repair the syntax errors; restarted from the initial program.", init
    entry = p.get("entry")
    if entry and not re.search(rf"^def {re.escape(entry)}\(", new, re.M):
        home = [lc for lc, t in base.items() if re.search(rf"^def {re.escape(entry)}\(", t, re.M)]
        if home:
            genes[home[0]] = base[home[0]]
            notes.append(f"restored the entry function {entry}() with the {home[0]} section")
        elif re.search(rf"^def {re.escape(entry)}\(", base_pre, re.M):
            preamble = base_pre
            notes.append(f"restored the preamble, which defines the entry function {entry}()")
        new = _render(preamble, genes, ctx)
    errors = [str(e) for e in ctx.get("errors") or []]
    plan = "Fix of the pre-validation errors" + (f" ({'; '.join(errors)[:300]})" if errors else "") + ": "
    plan += ("; ".join(notes) if notes else "the program already has every section; kept it") + "."
    return plan, new


def _numbers(d: dict | None) -> dict[str, float]:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[str(k)] = float(v)
    return out


def review(ctx: dict, rng: random.Random) -> dict:
    """``submit_review`` arguments from ``evaluation`` ({correct, error, combined_score,
    public_metrics}) and the code's ``# allele:`` comments and parameters."""
    p = problem_of(ctx)
    code = ctx.get("code") or ""
    ev = ctx.get("evaluation") if isinstance(ctx.get("evaluation"), dict) else {}
    exc = ctx.get("exc_type")
    score_name = str(p.get("score_name") or "combined_score")
    score = ev.get("combined_score")
    finite = isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
    correct = bool(ev.get("correct")) and finite and not exc
    tag = approach_tag(code, ctx)
    public = _numbers(ev.get("public_metrics"))
    table = allele_table(ctx)
    _, genes = G.split_program(code)
    if not correct:
        err = str(ev.get("error") or "") or error_line(ctx.get("term_out") or "")
        kind = exc or (err.split(":")[0] if re.match(r"^\w+(Error|Exception)\b", err) else None)
        summary = (f"The program failed: {err[:300]}" if kind and err.startswith(kind)
                   else f"The program failed with {kind}: {err[:300]}" if kind and err
                   else f"The program's output was rejected: {err[:300]}" if err
                   else "The program produced no valid result.")
        bottleneck = f"runtime error ({kind})" if kind else "invalid program output"
        direction = (f"fix the {kind} with a minimal change, keeping every section marker" if kind
                     else "make the output satisfy the problem's validity constraints")
        insight = "No score is available until the program produces a valid output."
    else:
        raw = public.get(score_name)
        summary = (f"The program ran correctly with combined score {score:.6g}"
                   + (f" ({score_name} = {raw:.6g})" if raw is not None else "")
                   + f", using {tag_signature(tag)}.")
        shown = [f"{k} = {v:.6g}" for k, v in public.items() if k != score_name][:4]
        insight = ("Public metrics: " + ", ".join(shown) + ".") if shown else \
            f"{score_name} is the only signal reported for this program."
        options = []
        for locus in sorted(table):
            cur = current_allele(locus, genes.get(locus, ""), table)
            for name in sorted(table[locus]):
                if name != cur:
                    desc = allele_description(table[locus][name])
                    options.append((locus, f"swap the {locus} section for allele '{name}'"
                                           + (f" ({allele_label(desc, 80)})" if desc else "")))
        for locus in problem_loci(ctx, code):
            for m in find_params(genes.get(locus, "")):
                options.append((locus, f"tune {m.group('name')} in {locus} (now {m.group('value')})"))
        options += [("", str(d)) for d in p.get("directions") or []]
        if options:
            locus, direction = rng.choice(options)
        else:
            locus, direction = "", "try a different algorithm for the main section"
        bottleneck = (f"the {locus} section ({allele_label(allele_description(genes[locus]) or 'baseline code')})"
                      if locus and locus in genes else "the overall algorithm")
    return {
        "is_bug": not correct,
        "has_csv_submission": False,
        "summary": summary,
        "key_change": f"uses {tag}",
        "insight": insight,
        "bottleneck": bottleneck,
        "suggested_direction": direction,
        "approach_tag": tag,
        "metric": float(score) if correct else None,
        "metric_name": score_name,
    }


# ----------------------------------------------------------------------------- auxiliary metrics


def _metric_key(key: str) -> str:
    k = re.sub(r"\W+", "_", str(key)).strip("_") or "output"
    return k if not k[0].isdigit() else "k_" + k


def _kind(desc) -> str | None:
    """"array", "scalar" or None (skipped) for one sample_output description entry."""
    if isinstance(desc, dict) and ("type" in desc or "shape" in desc):
        typ = str(desc.get("type") or "").lower()
        shape = desc.get("shape")
        dtype = str(desc.get("dtype") or "").lower()
        if any(w in dtype for w in ("str", "unicode", "object", "<u", "bytes")) or typ in ("str", "string", "dict", "none", "nonetype"):
            return None
        if isinstance(shape, (list, tuple)) and len(shape) >= 1:
            return "array"
        if typ in ("ndarray", "array", "list", "tuple"):
            return "array" if shape != [] and shape != () else "scalar"
        if typ in ("int", "float", "bool", "number", "scalar", "integer") or any(
                w in typ for w in ("int", "float")) or shape in ([], ()):
            return "scalar"
        return None
    if isinstance(desc, (list, tuple)):
        return "array"
    if isinstance(desc, (int, float)) and not isinstance(desc, bool):
        return "scalar"
    return None


def auxiliary_metrics(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """An ``auxiliary_metrics.py`` for the described program output (``sample_output``).

    For every array key: ``<key>_mean``, ``<key>_std``, ``<key>_min``, ``<key>_max`` over its
    finite values and ``<key>_count`` (length of the first axis); for every numeric scalar:
    ``<key>`` itself. Missing keys and non-numeric values are skipped; the function never raises.
    """
    sample = ctx.get("sample_output")
    if not isinstance(sample, dict):
        sample = {"output": sample} if sample is not None else {}
    arrays, scalars = [], []
    for key in sample:
        kind = _kind(sample[key])
        (arrays if kind == "array" else scalars if kind == "scalar" else []).append(str(key))
    p = problem_of(ctx)
    name = p.get("name") or "the problem"
    defs: dict[str, dict] = {}
    for key in arrays:
        mk = _metric_key(key)
        for stat, what in (("mean", "mean"), ("std", "standard deviation"), ("min", "minimum"),
                           ("max", "maximum")):
            defs[f"{mk}_{stat}"] = {"name": f"{mk}_{stat}", "description": f"{what} of the values of '{key}'",
                                    "interpretation": "neutral", "unit": "", "formula": f"{stat}({key})"}
        defs[f"{mk}_count"] = {"name": f"{mk}_count", "description": f"length of the first axis of '{key}'",
                               "interpretation": "neutral", "unit": "", "formula": f"len({key})"}
    for key in scalars:
        mk = _metric_key(key)
        defs[mk] = {"name": mk, "description": f"the scalar '{key}' reported in the program output",
                    "interpretation": "neutral", "unit": "", "formula": key}
    body = [
        f'"""Auxiliary metrics for {name} (written by the offline model, seed 002 dynamic metrics).',
        "",
        "Summary statistics of every array of the program output (mean, std, min, max, count) and",
        "the value of every numeric scalar. Missing keys and non-numeric values are skipped; the",
        "function never raises.",
        '"""',
        "",
        "import math",
        "",
        "import numpy as np",
        "",
        f"ARRAY_KEYS = {arrays!r}",
        f"SCALAR_KEYS = {scalars!r}",
        f"METRIC_NAMES = {({k: _metric_key(k) for k in arrays + scalars})!r}",
        "",
        "METRIC_DEFINITIONS = " + _pretty_dict(defs),
        "",
        "",
        "def _finite_values(value):",
        "    arr = np.asarray(value, dtype=float)",
        "    flat = arr.ravel()",
        "    return arr, flat[np.isfinite(flat)]",
        "",
        "",
        "def evaluate_auxiliary_metrics(program_output):",
        '    """Metrics {name: float} of one program output (a dict of arrays/scalars or a bare value)."""',
        "    metrics = {}",
        "    data = program_output if isinstance(program_output, dict) else {\"output\": program_output}",
        "    for key in ARRAY_KEYS:",
        "        try:",
        "            if key not in data or data[key] is None:",
        "                continue",
        "            arr, vals = _finite_values(data[key])",
        "            name = METRIC_NAMES[key]",
        "            if arr.ndim >= 1:",
        "                metrics[name + \"_count\"] = float(arr.shape[0])",
        "            if vals.size == 0:",
        "                continue",
        "            metrics[name + \"_mean\"] = float(vals.mean())",
        "            metrics[name + \"_std\"] = float(vals.std())",
        "            metrics[name + \"_min\"] = float(vals.min())",
        "            metrics[name + \"_max\"] = float(vals.max())",
        "        except Exception:",
        "            continue",
        "    for key in SCALAR_KEYS:",
        "        try:",
        "            if key not in data or data[key] is None:",
        "                continue",
        "            arr, vals = _finite_values(data[key])",
        "            if vals.size >= 1:",
        "                metrics[METRIC_NAMES[key]] = float(vals[0])",
        "        except Exception:",
        "            continue",
        "    return {k: v for k, v in metrics.items() if math.isfinite(v)}",
    ]
    code = "\n".join(body) + "\n"
    plan = (f"Auxiliary metrics for {name}: "
            + (f"mean/std/min/max/count of {', '.join(arrays)}" if arrays else "no array outputs")
            + (f"; the values of {', '.join(scalars)}" if scalars else "")
            + ". The file is auxiliary_metrics.py with evaluate_auxiliary_metrics(program_output) and "
              "METRIC_DEFINITIONS; missing keys are skipped.")
    return plan, code


def _pretty_dict(defs: dict[str, dict]) -> str:
    if not defs:
        return "{}"
    lines = ["{"]
    for k, v in defs.items():
        lines.append(f"    {k!r}: {v!r},")
    lines.append("}")
    return "\n".join(lines)


HANDLERS = {"draft": draft, "mutate": mutate, "merge": merge, "debug": debug, "fix": fix,
            "auxiliary_metrics": auxiliary_metrics}
"""Code-reply handlers by purpose: ``handler(ctx, rng) -> (plan, code)``."""
