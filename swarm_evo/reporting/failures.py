"""Failures for people (issue 54, item 2): the bounded text a failed execution or a dead node
shows where a person looks first — the message of its failure state in the Prefect UI, a
WARNING log line, the node's page.

No Prefect here: ``tasks/execute.py``, ``flows/debug_attempt.py`` and ``flows/_step.py`` turn
these texts into Failed states and log lines.
"""

from __future__ import annotations

from swarm_evo.population.node import Node

MESSAGE_CHARS = 1500
"""Longest failure text a state message or a log line carries (the output's *tail*: the end of a
traceback is where its error is)."""


def tail(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    """The last ``limit`` characters of ``text`` (a leading ``…`` when cut), stripped."""
    text = (text or "").strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def error_line(exc_type: str | None, exc_info: str | None) -> str:
    """``KeyError: 'Age'``: the exception type and its one-line reason, the type once when the
    reason already starts with it; ``failed`` with neither."""
    info = (exc_info or "").strip()
    if exc_type and not info.startswith(exc_type):
        return exc_type + (f": {info}" if info else "")
    return info or exc_type or "failed"


def attempt_failure(attempt: int, exc_type: str | None, problems: list[str], term_out: str | None,
                    limit: int = MESSAGE_CHARS) -> str:
    """One execution's failure: ``attempt 1 failed: KeyError; <problems>`` then the tail of its
    output (traceback last), at most ``limit`` characters in all."""
    head = f"attempt {attempt} failed: {exc_type or 'no exception'}"
    if problems:
        head += "; " + "; ".join(p.strip() for p in problems)
    head = head[: limit // 2]
    out = tail(term_out, max(0, limit - len(head) - 1))
    return f"{head}\n{out}" if out else head


def node_failure(node: Node, limit: int = MESSAGE_CHARS) -> str:
    """A dead node's failure: ``dead after 2 debug attempts: KeyError: <exc_info>`` then the tail
    of its last execution's output, at most ``limit`` characters in all."""
    head = f"dead after {node.debug_attempts} debug attempt{'' if node.debug_attempts == 1 else 's'}: " \
           + error_line(node.exc_type, node.exc_info)
    head = head[: limit // 2]
    out = tail(node.term_out, max(0, limit - len(head) - 1))
    return f"{head}\n{out}" if out else head
