"""Repairs read off a failure's traceback (the ``debug`` handler's rules).

The closest identifier (or a missing import) for a NameError, off-by-one ranges for an
IndexError, a zero divisor restored to the baseline's value, self-slicing lines removed, loop
counts and time limits halved on a timeout, the failing section restored from the initial
program; and the irrelevant edit made when no repair is attempted.
"""

from __future__ import annotations

import ast
import random
import re

from swarm_evo.population import genes as G
from swarm_evo.population.source import parse_program

from .alleles import allele_description
from .params import PARAM, baseline_values, find_params, format_float, is_float_literal
from .problem import initial_program, problem_loci
from .source import BUILTINS, MODULE_IMPORTS, closest_name, identifiers, locus_of_line

_SELF_SLICE = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*\1\[[ \t]*(?::[ \t]*-[ \t]*\d+|-?\d+[ \t]*:)[ \t]*\][ \t]*(?:\n|$)",
    re.M)
_RANGE_LEN_PLUS = re.compile(r"\brange\([ \t]*len\([ \t]*([A-Za-z_]\w*)[ \t]*\)[ \t]*\+[ \t]*1[ \t]*\)")
_CHEAP_NAMES = re.compile(r"ITER|STEP|TRIAL|RESTART|EPOCH|ROUND|SAMPLE|ATTEMPT|POP|GENERATION|REPEAT|"
                          r"SWEEP|PASS|MOVE|KICK|^N_|^NUM_|COUNT|LIMIT|BUDGET|TRIES")
_TIME_NAMES = re.compile(r"TIME|SECONDS")


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


def add_import(preamble: str, line: str) -> str:
    """``preamble`` with the import ``line`` after its last top-level import (else after the
    module docstring, else first)."""
    lines = preamble.split("\n")
    last = max((i for i, ln in enumerate(lines) if re.match(r"(import|from)\s+\w", ln)), default=None)
    if last is None:
        try:
            body = parse_program(preamble).body
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
        ids = identifiers(parse_program(code))
    except SyntaxError:
        ids = set(re.findall(r"[A-Za-z_]\w*", code))
    pattern = re.compile(rf"(?<![\w.]){re.escape(bad)}(?!\w)")
    if bad in MODULE_IMPORTS:
        preamble, genes = G.split_program(code)
        new_pre = add_import(preamble, MODULE_IMPORTS[bad])
        return (G.render_program(new_pre, genes) if genes else new_pre), f"added '{MODULE_IMPORTS[bad]}'"
    good = closest_name(bad, ids - {bad}) or closest_name(bad, BUILTINS)
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
            lit = base.get(name) or ("1.0" if is_float_literal(m.group("value")) else "1")
            done.append(f"{name} = {lit}")
            return m.group(0)[: m.start("value") - m.start()] + lit + m.group(0)[m.end("value") - m.start():]
        new = PARAM.sub(sub, new)
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
            new = format_float(float(value) / 2, 6) if is_float_literal(value) else str(max(1, int(value) // 2))
        elif not is_float_literal(value) and _CHEAP_NAMES.search(name) and int(value) >= 4:
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
    new_genes = {k: PARAM.sub(sub, v) for k, v in genes.items()}
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
