"""The chained debug (SPEC §6 "Debug chain"; seed 000 decision D and §8; seed 001 §2.4).

When an execution fails, up to ``max_attempts`` debug attempts run in a chain: attempt n gets
attempt n−1's code and its *new* error output, never the original ones. If the last attempt
still fails the node is dead. Debug attempts are not journal nodes and do not count against the
budget (decision J); the node keeps the last attempt's code and output and the whole chain in
``metadata.debug_history``.

The chain is orchestration-agnostic: ``attempt_fn`` runs one attempt (in the Prefect flows, a
``debug_attempt`` subflow run whose parameters carry the previous code and error).
"""

from __future__ import annotations

from typing import Callable

from pydantic import BaseModel, Field

from swarm_evo.node import LLMUsage
from swarm_evo.sandbox import ExecutionResult


class Attempt(BaseModel):
    """One version of a node's program and what happened when it ran.

    ``problems`` lists why the run counts as failed (exception, missing/invalid submission,
    no metric line; for problems: the evaluation's error); empty means the execution
    succeeded. ``attempt`` is 0 for the operation's own program and n for debug attempt n.
    ``metric`` is the objective's score of this version (None when it failed) and
    ``evaluation`` the Eval Service summary for problems (None for competitions).
    """

    attempt: int = 0
    plan: str = ""
    code: str
    result: ExecutionResult
    problems: list[str] = Field(default_factory=list)
    usage: LLMUsage = Field(default_factory=LLMUsage)
    metric: float | None = None
    evaluation: dict | None = None

    @property
    def failed(self) -> bool:
        """True when the execution failed in any way the chain debugs."""
        return bool(self.problems)

    def history_entry(self) -> dict:
        """The ``metadata.debug_history`` record of this attempt (code, exc_type, term_out, exec_time)."""
        return {
            "attempt": self.attempt,
            "code": self.code,
            "exc_type": self.result.exc_type,
            "exec_time": self.result.exec_time,
            "problems": list(self.problems),
            "term_out": self.result.term_out,
        }


class ChainOutcome(BaseModel):
    """Result of a debug chain: the last attempt, how many debug attempts ran, and deadness."""

    final: Attempt
    attempts: int
    dead: bool
    history: list[dict]
    usage: LLMUsage


AttemptFn = Callable[[int, Attempt], Attempt]
"""``attempt_fn(n, previous)`` runs debug attempt ``n`` (1-based) on ``previous`` (attempt n−1)."""


def run_debug_chain(first: Attempt, max_attempts: int, attempt_fn: AttemptFn) -> ChainOutcome:
    """Run the chain from ``first`` (the operation's own execution).

    Returns immediately when ``first`` succeeded (no attempts, not dead). Otherwise calls
    ``attempt_fn(1, first)``, ``attempt_fn(2, attempt_1)``, … until an attempt succeeds or
    ``max_attempts`` ran; the outcome is dead when the last attempt still failed.
    """
    current = first
    history: list[dict] = []
    usage = LLMUsage()
    attempts = 0
    while current.failed and attempts < max_attempts:
        history.append(current.history_entry())
        attempts += 1
        current = attempt_fn(attempts, current)
        usage = usage.add(current.usage)
    if attempts:
        history.append(current.history_entry())
    return ChainOutcome(
        final=current, attempts=attempts, dead=current.failed, history=history, usage=usage
    )
