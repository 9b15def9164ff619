"""Generate a step's program: the model call, the static pre-validation with one self-fix, and
the debug fixes of the inner chain (debug.j2, shared with the greedy policy's debug nodes).

Usage (issue 31): a generation's calls are made under a ledger scope of the node
(:func:`swarm_evo.llm.ledger.call_scope`; ``<node id>/generate``, ``<node id>/debug<n>``), and the
usage handed back, or attached to the error raised (``exc.usage``), is the ledger's sum of that
scope: failed calls and the calls of earlier Prefect task attempts included.
"""

from __future__ import annotations

import logging
from typing import Any

import openai
from pydantic import BaseModel, Field

from swarm_evo.population.journal import atomic_write_text
from swarm_evo.llm.client import complete_code
from swarm_evo.llm.errors import CostLimitReached, GenerationError
from swarm_evo.llm.ledger import call_scope, node_scope, scope_usage
from swarm_evo.run.model_context import exec_timeout, memory_limit_text, offline_context, prompt_context
from swarm_evo.population.node import LLMUsage
from swarm_evo.prompting.prompts import render
from swarm_evo.run.session import RunSession
from swarm_evo.step.request import OperationRequest

log = logging.getLogger(__name__)

SELF_FIX_ERRORS: tuple[type[BaseException], ...] = (GenerationError, CostLimitReached, openai.APIError)
"""Errors of the optional self-fix call after which the original program runs (:func:`prevalidate`):
no usable reply, the cost limit, and every litellm error (litellm's exceptions are
``openai.APIError``s: 400, content policy, 401, and transient ones whose retries are spent)."""


class Generated(BaseModel):
    """A program from the model: plan, code, usage and the static pre-validation record."""

    plan: str
    code: str
    usage: LLMUsage
    prevalidation: dict[str, Any] = Field(default_factory=dict)


def save_prompt(session: RunSession, node_id: str, name: str, prompt: str) -> None:
    """Keep a rendered prompt as ``nodes/<id>/prompt-<name>.md``."""
    atomic_write_text(session.node_dir(node_id) / f"prompt-{name}.md", prompt)


def generate_program(session: RunSession, node_id: str, request: OperationRequest) -> Generated:
    """Ask the model for the operation's program, then run the static pre-validation and, on
    failure, one LLM self-fix with the errors injected (seed 003 improvement 3;
    :func:`prevalidate`). ``usage`` counts every call made for it (module docstring).

    Raises (each with ``usage``: the calls so far, failed ones included):
        GenerationError: a reply without a code block.
        DeadlineReached: the run's time limit came first (or its cost limit, before the draft).
        litellm exceptions: see ``transient_errors()`` (the caller retries those).
    """
    scope, ledger = node_scope(node_id, "generate"), session.endpoint.ledger_path
    with call_scope(scope, ledger):
        save_prompt(session, node_id, request.operation, request.prompt)
        reply = complete_code(session.endpoint, request.prompt, request.ctx, loci=session.loci)
        generated = Generated(plan=reply.plan, code=reply.code, usage=reply.usage)
        generated = prevalidate(session, node_id, request.slot, "fix", generated)
    return generated.model_copy(update={"usage": scope_usage(ledger, scope, generated.usage)})


def prevalidate(session: RunSession, node_id: str, slot: int, name: str, generated: Generated) -> Generated:
    """Static pre-validation of a generated program (markers, compiles, writes the submission,
    prints the metric: the objective's ``static_check``) and, when it fails, one LLM self-fix
    with the errors injected (fix.j2, saved as ``prompt-<name>.md``). Drafts, merges, mutates
    and debug fixes all pass through it (issue 13).

    The self-fix is kept only when it passes the check; otherwise (it fails the check too, the
    model gives no program, or the call fails: any :data:`SELF_FIX_ERRORS`, a transient one
    after litellm's retries, or the cost limit) the original program runs and its own errors
    show at run time: a failed self-fix never costs the program it was fixing, and never makes
    Prefect re-run the task and pay for that program again (issue 31). ``prevalidation``
    records ``errors``, ``fixed`` (the fix was kept), and, after a fix attempt,
    ``errors_after`` (None when the fix gave no program) and ``fix_error`` when it failed.

    Raises:
        DeadlineReached: the run's time limit came first (not the cost limit: the program runs).
    """
    code = generated.code
    errors = session.objective.static_check(code)
    record: dict[str, Any] = {"errors": errors, "fixed": False}
    if not errors:
        return generated.model_copy(update={"prevalidation": record})
    fix_prompt = render(
        "fix.j2", **prompt_context(session), code=code, errors=errors, data_preview=session.data_preview
    )
    save_prompt(session, node_id, name, fix_prompt)
    ctx = offline_context(session, "fix", f"slot{slot}:{name}")
    ctx.update(code=code, errors=errors)
    usage = generated.usage
    try:
        fixed = complete_code(session.endpoint, fix_prompt, ctx, loci=session.loci)
    except SELF_FIX_ERRORS as exc:
        if isinstance(exc, GenerationError):
            usage = usage.add(exc.usage or LLMUsage())
        else:
            log.warning("the self-fix of node %s failed (%s: %s); the original program runs",
                        node_id[:8], type(exc).__name__, " ".join(str(exc).split())[:200])
        record.update(errors_after=None, fix_error=f"{type(exc).__name__}: {exc}"[:500])
        return generated.model_copy(update={"usage": usage, "prevalidation": record})
    usage = usage.add(fixed.usage)
    errors_after = session.objective.static_check(fixed.code)
    record.update(fixed=not errors_after, errors_after=errors_after)
    if errors_after:
        return generated.model_copy(update={"usage": usage, "prevalidation": record})
    return Generated(plan=generated.plan, code=fixed.code, usage=usage, prevalidation=record)


def debug_program(
    session: RunSession,
    node_id: str,
    slot: int,
    attempt: int,
    code: str,
    term_out: str,
    exc_type: str | None,
    problems: list[str],
) -> Generated:
    """Debug attempt ``attempt``: debug.j2 with the *previous* attempt's code and output, the
    fix statically pre-validated like a draft (:func:`prevalidate`, self-fix prompt saved as
    ``prompt-fix-debug<attempt>.md``). ``usage`` counts every call made for the attempt.

    Raises: as :func:`generate_program` (errors carry ``usage``)."""
    prompt, ctx = debug_prompt(
        session, slot, f"slot{slot}:debug{attempt}", attempt, session.config.search.debug_max_attempts,
        code, term_out, exc_type, problems,
    )
    scope, ledger = node_scope(node_id, f"debug{attempt}"), session.endpoint.ledger_path
    with call_scope(scope, ledger):
        save_prompt(session, node_id, f"debug{attempt}", prompt)
        reply = complete_code(session.endpoint, prompt, ctx, loci=session.loci)
        generated = Generated(plan=reply.plan, code=reply.code, usage=reply.usage)
        if not same_program(generated.code, code):  # unchanged: nothing to pre-validate, the caller counts it failed
            generated = prevalidate(session, node_id, slot, f"fix-debug{attempt}", generated)
    return generated.model_copy(update={"usage": scope_usage(ledger, scope, generated.usage)})


def same_program(a: str, b: str) -> bool:
    """True when two programs differ at most in trailing whitespace and blank lines (a debug
    "fix" that returns the program unchanged is a failed attempt, not a run; issue 13)."""
    def norm(code: str) -> list[str]:
        return [line.rstrip() for line in code.strip().splitlines() if line.strip()]

    return norm(a) == norm(b)


def debug_prompt(
    session: RunSession,
    slot: int,
    call_key: str,
    attempt: int,
    max_attempts: int,
    code: str,
    term_out: str,
    exc_type: str | None,
    problems: list[str],
) -> tuple[str, dict[str, Any]]:
    """debug.j2's prompt and the offline context for fixing ``code`` (attempt ``attempt`` of
    ``max_attempts``): the inner chain's attempts and greedy debug nodes share it."""
    prompt = render(
        "debug.j2",
        **prompt_context(session),
        attempt=attempt,
        max_attempts=max_attempts,
        code=code,
        term_out=term_out,
        exc_type=exc_type,
        problems=problems,
        memory_limit=memory_limit_text(session),
        data_preview=session.data_preview,
    )
    ctx = offline_context(session, "debug", call_key)
    ctx.update(code=code, term_out=term_out, exc_type=exc_type, attempt=attempt, exec_timeout=exec_timeout(session))
    return prompt, ctx
