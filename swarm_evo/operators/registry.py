"""The registry of search operations (issue 43): every list of operations reads it.

Starts with :data:`~swarm_evo.operators.builtin.BUILTIN`; :func:`register` adds one at run
time (a plug-in, a test), :func:`registered` for the length of a ``with`` block. Readers ask
at call time, so an operation registered later is seen by everything created after it.
Thread-safe.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from swarm_evo.operators.builtin import BUILTIN
from swarm_evo.operators.operator import Operator, ReportStyle

_LOCK = threading.Lock()
_OPERATORS: dict[str, Operator] = {op.name: op for op in BUILTIN}


def operators() -> tuple[Operator, ...]:
    """Every registered operation, built-ins first, in display order."""
    with _LOCK:
        return tuple(_OPERATORS.values())


UNREGISTERED_STYLE = ReportStyle(colour="#757575", marker="x", shape="square", symbol="?", always_listed=False,
                                  reference="parent")
"""How reports show the nodes of an operation this process has not registered (issue 53, item 9:
a journal written by a process that had registered a plug-in operation): grey, compared with
their parent."""


def report_style(name: str) -> ReportStyle:
    """The report style of the operation called ``name``; :data:`UNREGISTERED_STYLE` when no such
    operation is registered here (reports never fail on a journal's operation)."""
    with _LOCK:
        op = _OPERATORS.get(name)
    return op.report if op is not None else UNREGISTERED_STYLE


def names() -> tuple[str, ...]:
    """The names of :func:`operators`."""
    return tuple(op.name for op in operators())


def get(name: str) -> Operator:
    """The operation called ``name``.

    Raises:
        KeyError: no such operation (the message lists the known ones).
    """
    with _LOCK:
        try:
            return _OPERATORS[name]
        except KeyError:
            raise KeyError(f"unknown operation {name!r}; known operations: {', '.join(_OPERATORS)}") from None


def find(name: str) -> Operator | None:
    """The operation called ``name``, or None (e.g. an offline-model purpose that is no operation)."""
    with _LOCK:
        return _OPERATORS.get(name)


def agent_operations() -> tuple[str, ...]:
    """The operations agents write (an :class:`~.operator.AgentText`): the dispatcher's
    operations and the agents' strategy texts, in display order."""
    return tuple(op.name for op in operators() if op.agent is not None)


def listed_operations() -> tuple[str, ...]:
    """The operations every report table lists, used or not (``report.always_listed``)."""
    return tuple(op.name for op in operators() if op.report.always_listed)


def templates() -> tuple[str, ...]:
    """The prompt templates of the operations, in display order, each once."""
    return tuple(dict.fromkeys(op.template for op in operators()))


def register(operator: Operator) -> Operator:
    """Add ``operator`` after the registered ones; return it.

    Raises:
        ValueError: an operation of that name is registered already.
    """
    with _LOCK:
        if operator.name in _OPERATORS:
            raise ValueError(f"operation {operator.name!r} is registered already")
        _OPERATORS[operator.name] = operator
    return operator


def unregister(name: str) -> None:
    """Remove the operation ``name`` (no error when it is not registered).

    Raises:
        ValueError: ``name`` is a built-in operation.
    """
    if name in {op.name for op in BUILTIN}:
        raise ValueError(f"operation {name!r} is built in and stays registered")
    with _LOCK:
        _OPERATORS.pop(name, None)


@contextmanager
def registered(operator: Operator) -> Iterator[Operator]:
    """``with registered(op):`` — ``op`` is registered inside the block and removed after it."""
    register(operator)
    try:
        yield operator
    finally:
        unregister(operator.name)
