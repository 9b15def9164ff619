"""The review of a step's last attempt: the forced ``submit_review`` model call, decided by the
rules of :mod:`swarm_evo.search.review` (facts win), and when the reviewer alone calls a program buggy."""

from __future__ import annotations

import logging

from swarm_evo.llm.review_completion import complete_review
from swarm_evo.population.node import LLMUsage
from swarm_evo.prompting.prompts import render
from swarm_evo.prompting.text_bounds import prompt_limits
from swarm_evo.run.model_context import offline_context, prompt_context
from swarm_evo.run.session import RunSession
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.search.review import REVIEW_TOOL, ReviewOutcome, decide_review
from swarm_evo.step.generation import save_prompt

log = logging.getLogger(__name__)


def review_program(session: RunSession, node_id: str, slot: int, final: Attempt) -> tuple[ReviewOutcome, LLMUsage]:
    """Review the final attempt: forced ``submit_review`` call, then the deterministic rules."""
    workdir = session.node_dir(node_id)
    errors, metric = session.objective.review_facts(final, workdir)
    prompt = render(
        "review.j2",
        **{**prompt_context(session), "limits": prompt_limits(session.config.model, session.review_endpoint.name)},
        code=final.code,
        term_out=final.result.term_out,  # bounded by review.j2 (limits.term_out)
        exc_type=final.result.exc_type,
        submission_errors=errors,
        evaluation=final.evaluation,
    )
    save_prompt(session, node_id, "review", prompt)
    ctx = offline_context(session, "review", f"slot{slot}:review")
    ctx.update(
        code=final.code,
        term_out=final.result.term_out,
        exc_type=final.result.exc_type,
        parsed_metric=final.metric,
        submission_errors=errors,
    )
    if final.evaluation is not None:
        ctx["evaluation"] = final.evaluation
    reply = complete_review(session.review_endpoint, prompt, REVIEW_TOOL, ctx)
    outcome = decide_review(final.result, reply.arguments, errors, metric=metric, code=final.code)
    if reply.error:
        log.warning("the review of node %s could not be read (%s): it is decided on the checks alone, "
                    "approach tag %r from the code", node_id[:8], reply.error[:300], outcome.approach_tag)
        outcome.reasons.append(f"review call: {reply.error}")
    return outcome, reply.usage


def flagged_by_reviewer(outcome: ReviewOutcome, final: Attempt) -> bool:
    """True when the node is buggy only because the LLM reviewer says so: the program ran, its
    submission (or evaluation) passed and its metric parsed (issue 13: such a node is debugged
    with the reviewer's reason, and stays a candidate for the hand-in)."""
    return outcome.is_buggy and not final.failed and outcome.metric_value is not None


def reviewer_reasons(outcome: ReviewOutcome) -> list[str]:
    """The reviewer's reasons for calling a program buggy, as debug problems."""
    reasons = [r for r in outcome.reasons if not r.startswith("note:") and not r.startswith("review call:")]
    return [f"the reviewer judged the program buggy although it ran: {r}" for r in reasons] or [
        "the reviewer judged the program buggy although it ran and wrote a valid submission"
    ]
