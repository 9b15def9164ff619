"""Planted faults: one realistic bug in a changed section, with probability ``fault_rate``.

Misspelled name → NameError, ``range(len(a) + 1)`` → IndexError, ``x = x[:-1]`` after an array
assignment → shape error, a divisor parameter set to 0 → ZeroDivisionError. Each kind has a
traceback-driven repair in :mod:`.repairs`.
"""

from __future__ import annotations

import ast
import keyword
import random
import re

from swarm_evo.population import genes as G
from swarm_evo.population.source import parse_program

from .params import find_params, is_float_literal
from .source import BUILTINS, MODULE_IMPORTS, closest_name, gene_spans, identifiers

FAULT_KINDS: tuple[str, ...] = ("misspelled_name", "off_by_one", "shape_error", "zero_divisor")
"""The bugs :func:`plant_fault` can plant; each has a traceback-driven repair in :func:`.repairs.repair`."""
_ARRAY_CALLS = {"array", "asarray", "zeros", "ones", "empty", "full", "linspace", "arange", "clip", "copy",
                "concatenate", "stack", "vstack", "hstack", "column_stack", "sorted", "list", "tolist",
                "reshape", "minimum", "maximum", "where", "roll", "argsort", "cumsum", "reduce", "zeros_like",
                "ones_like", "full_like", "tile", "repeat", "ravel", "flatten", "append"}
"""Calls whose result is taken to be an array or list (sites of the planted shape error)."""


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


def _plant_misspelling(code: str, span: tuple[int, int], rng: random.Random) -> tuple[str, str] | None:
    try:
        tree = parse_program(code)
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
    cands = sorted(n for n in loads if len(n) >= 3 and n in bound and n not in BUILTINS)
    rng.shuffle(cands)
    for name in cands:
        for _ in range(10):
            bad = _misspell(name, rng)
            if (bad == name or not bad.isidentifier() or keyword.iskeyword(bad) or bad in BUILTINS
                    or bad in MODULE_IMPORTS or re.search(rf"(?<![\w.]){re.escape(bad)}(?!\w)", code)):
                continue
            new = _replace_at(code, loads[name], bad)
            try:
                new_ids = identifiers(parse_program(new))
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
        tree = parse_program(code)
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
        tree = parse_program(code)
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
    zero = "0.0" if is_float_literal(m.group("value")) else "0"
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
    spans = gene_spans(code)
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


def maybe_fault(ctx: dict, rng: random.Random, code: str, loci: list[str]) -> tuple[str, str]:
    """With probability ``fault_rate``, :func:`plant_fault` in one of ``loci`` (non-stub ones first)."""
    if loci and rng.random() < float(ctx.get("fault_rate") or 0.0):
        pool = [lc for lc in loci if not G.is_stub(G.parse_genes(code).get(lc))] or loci
        return plant_fault(code, rng.choice(pool), rng)
    return code, ""
