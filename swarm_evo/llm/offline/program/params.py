"""Section parameters: UPPER_CASE assignments of a number (``STEP_SIZE = 0.05``, ``N_ITERS = 200``).

Finding them (names of two or more characters, one per line), perturbing their literals
(ints ±1..3, ×2 or ÷2; floats ×(1 ± U(0.05, 0.3)) with one more significant digit), and the
baseline values of the initial program and the alleles.
"""

from __future__ import annotations

import math
import random
import re

from swarm_evo.population import genes as G

from .alleles import allele_table
from .problem import initial_program

_NUMBER = r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)"
PARAM = re.compile(
    rf"^(?P<indent>[ \t]*)(?P<name>[A-Z][A-Z0-9_]+)(?P<eq>[ \t]*=[ \t]*)(?P<value>{_NUMBER})"
    r"(?P<tail>[ \t]*(?:#[^\n]*)?)$", re.M)


def find_params(text: str) -> list[re.Match[str]]:
    """The parameter assignments (UPPER_CASE name = number, one per line) of a text."""
    return list(PARAM.finditer(text or ""))


def is_float_literal(s: str) -> bool:
    """True for a float literal (has ".", "e" or "E"), False for an int literal."""
    return any(c in s for c in ".eE")


def _sig_digits(s: str) -> int:
    mant = re.split(r"[eE]", s.lstrip("-"))[0]
    digits = mant.replace(".", "").lstrip("0")
    if "." not in mant:
        digits = digits.rstrip("0")
    return max(1, len(digits))


def format_float(v: float, sig: int) -> str:
    """``v`` with ``sig`` significant digits, always written as a float literal."""
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
    if not is_float_literal(value):
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
        return format_float(rng.uniform(0.01, 0.1), 2)
    sig = max(2, min(6, _sig_digits(value) + 1))
    for _ in range(12):
        factor = 1 + rng.choice([-1, 1]) * rng.uniform(0.05, 0.3)
        new = format_float(v * factor, sig)
        if float(new) != v and math.isfinite(float(new)):
            return new
    return format_float(v * 1.1, 6)


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


def describe_changes(changes: list[tuple[str, str, str]]) -> str:
    """``"NAME old -> new, ..."`` for :func:`perturb_params` changes."""
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
