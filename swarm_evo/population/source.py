"""Parsing a program's source (a node's ``solution.py``) into an AST, one parse at a time.

CPython 3.11's ``ast.parse`` keeps its recursion-depth count per interpreter, not per thread: two
threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(gh-106905; seen here when two parallel executions parsed their programs). A run's steps run in
threads, so every parse of a program in the core goes through :func:`parse_program`.
"""

from __future__ import annotations

import ast
import threading

_lock = threading.Lock()


def parse_program(code: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(code, filename)`` under a process-wide lock.

    Raises:
        SyntaxError: the code does not parse (as ``ast.parse``).
        ValueError: the code holds a null byte (as ``ast.parse``).
    """
    with _lock:
        return ast.parse(code, filename=filename)
