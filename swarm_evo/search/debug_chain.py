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

from swarm_evo.population.node import LLMUsage
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.sandbox.output import bound_utf8

RECORDED_OUTPUT_BYTES = 16_000
"""Bytes of an execution's output (head + tail) kept in the journal — the node's ``term_out``
and each ``debug_history`` entry — and passed as a debug-attempt subflow's parameter. The
whole output (up to ``sandbox.max_output_bytes``) stays in ``nodes/<id>/stdout.txt`` and
``stderr.txt``; prompts bound it again to the model's context (issue 13)."""


def recorded_output(term_out: str) -> str:
    """``term_out`` bounded to :data:`RECORDED_OUTPUT_BYTES` (head, a marker line, tail)."""
    return bound_utf8(term_out or "", RECORDED_OUTPUT_BYTES)[0]


class Attempt(BaseModel):
    """One version of a node's program and what happened when it ran.

    ``problems`` lists why the run counts as failed (exception, missing/invalid submission,
    no metric line; for problems: the evaluation's error); empty means the execution
    succeeded. ``attempt`` is 0 for the operation's own program and n for debug attempt n.
    ``metric`` is the objective's score of this version (None when it failed) and
    ``evaluation`` the Eval Service summary for problems (None for competitions);
    ``hidden_score`` the host's grade of the submission's hidden rows (runs with a hidden split,
    issue 41; None otherwise); ``hidden_error`` the host's error when it could not grade them
    (issue 53, item 10); ``execution`` where and when it ran (its lane, wait, start and end:
    :class:`swarm_evo.run.lanes.ExecutionRecord`; None when it ran outside the lanes).
    """

    attempt: int = 0
    plan: str = ""
    code: str
    result: ExecutionResult
    problems: list[str] = Field(default_factory=list)
    usage: LLMUsage = Field(default_factory=LLMUsage)
    metric: float | None = None
    evaluation: dict | None = None
    hidden_score: float | None = None
    hidden_error: str | None = None
    execution: dict | None = None

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
            "term_out": recorded_output(self.result.term_out),
            **({"execution": self.execution} if self.execution is not None else {}),
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

StopFn = Callable[[], bool]
"""``should_stop()`` is True when no further attempt may start (the run's time limit)."""


def _never() -> bool:
    return False


def run_debug_chain(
    first: Attempt, max_attempts: int, attempt_fn: AttemptFn, should_stop: StopFn = _never
) -> ChainOutcome:
    """Run the chain from ``first`` (the operation's own execution).

    Returns immediately when ``first`` succeeded (no attempts, not dead). Otherwise calls
    ``attempt_fn(1, first)``, ``attempt_fn(2, attempt_1)``, … until an attempt succeeds,
    ``max_attempts`` ran, or ``should_stop()`` says no attempt may start (issue 13: after the
    deadline no debug calls the model); the outcome is dead when the last attempt still failed.
    """
    start = ChainOutcome(final=first, attempts=0, dead=first.failed, history=[], usage=LLMUsage())
    return _continue(start, max_attempts, attempt_fn, should_stop)


def _continue(outcome: ChainOutcome, max_attempts: int, attempt_fn: AttemptFn, should_stop: StopFn) -> ChainOutcome:
    current, attempts, usage = outcome.final, outcome.attempts, outcome.usage
    history = list(outcome.history)
    if history and current.failed:
        history[-1] = current.history_entry()  # the same attempt, now with the problems it is debugged for
    while current.failed and attempts < max_attempts and not should_stop():
        if not history:
            history.append(current.history_entry())
        attempts += 1
        current = attempt_fn(attempts, current)
        usage = usage.add(current.usage)
        history.append(current.history_entry())
    return ChainOutcome(final=current, attempts=attempts, dead=current.failed, history=history, usage=usage)


def debug_flagged(
    outcome: ChainOutcome, problems: list[str], max_attempts: int, attempt_fn: AttemptFn,
    should_stop: StopFn = _never,
) -> ChainOutcome:
    """Send a program that passed every deterministic check but was judged buggy (by the LLM
    reviewer, ``problems`` = its reasons) through the rest of the same chain (issue 13).

    The final attempt is debugged with ``problems`` as its failure, numbering on from the
    attempts already spent, within ``max_attempts``. When the chain cannot produce a program
    that passes the deterministic checks again, the flagged program is kept (it is still a
    candidate for the hand-in): the outcome is the original one, not dead, with the extra
    attempts in ``history`` and their usage counted.
    """
    flagged = outcome.final.model_copy(update={"problems": list(problems)})
    extended = _continue(outcome.model_copy(update={"final": flagged}), max_attempts, attempt_fn, should_stop)
    if extended.attempts == outcome.attempts or not extended.final.failed:
        return extended if extended.attempts != outcome.attempts else outcome
    return outcome.model_copy(update={"history": extended.history, "usage": extended.usage,
                                      "attempts": extended.attempts})
