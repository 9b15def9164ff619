"""Reading program source, shared by :mod:`.faults` and :mod:`.repairs`.

The line spans of the ``# [SECTION: NAME]`` sections and the section holding a line, the
identifiers a program uses and the closest one to a misspelled name, and the names both sides
respect: Python builtins and well-known module aliases with their import lines.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re

_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*\[SECTION:[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\][ \t]*\r?$")
BUILTINS = set(dir(builtins))
MODULE_IMPORTS = {
    "np": "import numpy as np", "numpy": "import numpy", "math": "import math",
    "random": "import random", "itertools": "import itertools", "time": "import time",
    "heapq": "import heapq", "collections": "import collections", "functools": "import functools",
    "bisect": "import bisect", "os": "import os", "sys": "import sys", "json": "import json",
    "operator": "import operator", "scipy": "import scipy",
}


def gene_spans(code: str) -> dict[str, tuple[int, int]]:
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


def locus_of_line(code: str, line: int) -> str | None:
    """The section holding 1-based ``line`` (None for the preamble)."""
    for locus, (a, b) in gene_spans(code).items():
        if a - 1 <= line <= b:
            return locus
    return None


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


def closest_name(bad: str, names: set[str]) -> str | None:
    """The identifier of ``names`` closest to ``bad`` (difflib, cutoff 0.6), or None."""
    cands = sorted(n for n in names if n != bad)
    hit = difflib.get_close_matches(bad, cands, n=1, cutoff=0.6)
    return hit[0] if hit else None
