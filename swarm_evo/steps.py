"""The pieces of one search step, free of Prefect (SPEC §6).

A step is: prepare the operation (draft, merge or mutate: selection + prompt; under the greedy
search policy also improve or debug, :func:`prepare_greedy`) → generate the
program (LLM, static pre-validation, one self-fix) → execute → debug chain → review → append
one node. The Prefect flows in ``flows/`` call these functions as tasks and subflows; tests
call them directly.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any, Literal

from pydantic import BaseModel, Field

from swarm_evo.debug_chain import Attempt, ChainOutcome, recorded_output
from swarm_evo.evolution_log import build_evolution_log
from swarm_evo.experience import record_for
from swarm_evo.genes import parse_genes, split_program
from swarm_evo.journal import atomic_write_text
from swarm_evo.llm.client import GenerationError, complete_code, complete_review
from swarm_evo.merge_compat import check_merge_compatibility
from swarm_evo.node import LLMUsage, Node, Operation
from swarm_evo.policies import GREEDY_MAX_DEBUG_DEPTH, greedy_action
from swarm_evo.prompts import render
from swarm_evo.quality import node_quality
from swarm_evo.review import REVIEW_TOOL, ReviewOutcome, decide_review
from swarm_evo.run_report import build_run_report
from swarm_evo.run_report import write_run_report as save_run_report
from swarm_evo.selection import (
    choose_phase2_operation,
    draft_history,
    genome_keys,
    primary_parent,
    select_gene_plan,
    select_mutation_target,
    tournament_select,
)
from swarm_evo.session import RunSession
from swarm_evo.text_bounds import prompt_limits

log = logging.getLogger(__name__)

RUN_REPORT_FILE = "run_report.json"


# --------------------------------------------------------------------------- context
def offline_context(session: RunSession, purpose: str, call_key: str) -> dict[str, Any]:
    """The structured context the offline model receives (docs/CONTRACTS.md): purpose, seed,
    call key, fault and repair rates, the loci, the objective's ``competition`` or
    ``problem`` entry, and ``packages``: what the sandbox's interpreter has installed (name ->
    version, from the runtime probe), so the offline model only imports what is there."""
    return {
        "purpose": purpose,
        "seed": session.config.seed,
        "call_key": call_key,
        "fault_rate": session.config.model.fault_rate,
        "repair_rate": session.config.model.repair_rate,
        **session.objective.offline_view(),
        "loci": list(session.loci),
        "packages": dict(session.runtime.packages),
    }


def format_seconds(seconds: float | None) -> str:
    """Human duration, e.g. ``1h 05m`` or ``42s``; ``unlimited`` for None."""
    if seconds is None:
        return "unlimited"
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def exec_timeout(session: RunSession) -> float:
    """This execution's timeout: the configured one, capped by the run's remaining time."""
    return max(1.0, session.budget.exec_timeout(session.config.sandbox.exec_timeout))


def prompt_context(session: RunSession) -> dict[str, Any]:
    """Variables every template may use: objective (the competition or problem), loci,
    guidelines (time, steps, device), and ``limits``: the run's prompt budget
    (:func:`swarm_evo.text_bounds.prompt_limits`, from the model's context window), with which
    the templates bound every text they show (issue 13)."""
    return {
        "limits": prompt_limits(session.config.model),
        "objective": session.objective.prompt_view(),
        "loci": list(session.loci),
        "time_remaining": format_seconds(session.budget.time_left()),
        "exec_timeout": format_seconds(exec_timeout(session)),
        "steps_remaining": session.budget.remaining,
        "device_info": session.device,
        "packages": session.packages,
    }


def step_rng(session: RunSession, slot: int, purpose: str) -> random.Random:
    """A random generator that depends only on the run's seed, the slot and the purpose."""
    return random.Random(f"{session.config.seed}:{slot}:{purpose}")


def operation_context(session: RunSession, slot: int, operation: str) -> tuple[str, dict[str, Any]]:
    """Pick the step's agent (dispatcher) and gather what every operation prompt shows (SPEC §9).

    Returns ``(agent_id, variables)`` with ``agent`` (its role and this operation's strategy),
    ``operation``, ``experience`` (top-k records of this operation) and ``evolution_log``.
    """
    agent_id = session.dispatcher.choose(operation, step_rng(session, slot, "agent"))
    agent = session.agents.get(agent_id)
    return agent_id, {
        "agent": {"id": agent_id, "role": agent.texts["role"], "strategy": agent.strategy(operation)},
        "operation": operation,
        "experience": session.experience.examples(
            operation, session.config.agents.experience_top_k, journal=session.journal
        ),
        "evolution_log": build_evolution_log(session.journal, catalogue=session.objective.directions(),
                                             text_data=session.objective.has_text_data()),
    }


# --------------------------------------------------------------------------- operations
class OperationRequest(BaseModel):
    """A prepared operation: the prompt for the model and what the node will record."""

    operation: Operation
    phase: Literal[1, 2]
    slot: int
    parent_id: str | None = None
    template: str
    prompt: str
    ctx: dict[str, Any]
    agent_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def prepare_draft(session: RunSession, slot: int) -> OperationRequest:
    """Phase 1 draft: draft.j2 with the draft history (seed 000 §5 'diversity')."""
    history = draft_history(session.journal)
    agent_id, agent_vars = operation_context(session, slot, "draft")
    prompt = render(
        "draft.j2",
        **prompt_context(session),
        **agent_vars,
        draft_history=draft_history(session.journal, include_failed=True),
        data_preview=session.data_preview,
    )
    ctx = offline_context(session, "draft", f"slot{slot}:draft")
    ctx["draft_history"] = history
    return OperationRequest(
        operation="draft", phase=1, slot=slot, template="draft.j2", prompt=prompt, ctx=ctx, agent_id=agent_id
    )


def prepare_phase2(session: RunSession, slot: int) -> OperationRequest:
    """Phase 2: merge (pheromone gene plan, primary parent) or mutate (tournament, non-stub gene).

    The operation is a merge with probability ``merge_probability``; a merge needs ≥ 2 valid
    nodes and a gene plan, otherwise the step mutates (SPEC §6). Raises ValueError when the
    valid pool is empty (the caller must not start Phase 2 steps then).
    """
    journal = session.journal
    search = session.config.search
    rng = step_rng(session, slot, "select")
    operation = choose_phase2_operation(journal, rng, search.merge_probability)
    if operation == "merge":
        with session.lock:
            plan = select_gene_plan(
                journal, len(journal) + 1, previous_plans=session.merged_plan_keys(), loci=session.loci
            )
            if plan is not None and plan.novelty_exhausted and plan.key() in genome_keys(journal, session.loci):
                plan = None  # every swap still rebuilds an existing node exactly (issue 16): mutate instead
            if plan is not None:
                session.plans_in_flight.add(plan.key())
        if plan is not None:
            return _prepare_merge(session, slot, plan)
    pool = journal.valid_pool()
    if not pool:
        raise ValueError("Phase 2 needs at least one valid node")
    parent = tournament_select(pool, search.tournament_k, rng)
    return _prepare_mutate(session, slot, parent, rng)


def prepare_improve(session: RunSession, slot: int, parent: Node) -> OperationRequest:
    """Greedy policy's improve (AIDE ``Agent._improve``, SPEC §12): a Phase 2 mutate of
    ``parent`` (the best valid node) — mutate.j2 with a target section chosen at random among
    its non-stub genes, as for a Phase 2 mutate, so both policies share one change prompt.
    ``metadata.policy_action`` is ``improve``."""
    request = _prepare_mutate(session, slot, parent, step_rng(session, slot, "improve"))
    request.metadata["policy_action"] = "improve"
    return request


def _prepare_mutate(session: RunSession, slot: int, parent: Node, rng: random.Random) -> OperationRequest:
    """mutate.j2 on ``parent``: one change in a random non-stub section (SPEC §6 H, M)."""
    target = select_mutation_target(
        parent, rng, loci=session.loci, stub_threshold=session.config.search.stub_threshold
    )
    agent_id, agent_vars = operation_context(session, slot, "mutate")
    prompt = render(
        "mutate.j2", **prompt_context(session), **agent_vars, parent=parent, target_locus=target
    )
    ctx = offline_context(session, "mutate", f"slot{slot}:mutate")
    ctx.update(parent_code=parent.code, target_locus=target)
    return OperationRequest(
        operation="mutate",
        phase=2,
        slot=slot,
        parent_id=parent.id,
        template="mutate.j2",
        prompt=prompt,
        ctx=ctx,
        agent_id=agent_id,
        metadata={"target_locus": target},
    )


def prepare_debug_node(session: RunSession, slot: int, parent: Node, depth: int = 1) -> OperationRequest:
    """Greedy policy's debug (AIDE ``Agent._debug``, SPEC §12): a Phase 2 ``debug`` node whose
    program is debug.j2's minimal fix of the buggy leaf ``parent`` — its code, output, error
    type and problems — shown as debug attempt ``depth`` of ``max_debug_depth``. No agent
    writes it (debug.j2 has no role or strategy, as in the inner chain), so the dispatcher and
    the experience pool do not learn from it. ``metadata``: ``policy_action`` ``debug`` and
    ``debug_depth``."""
    problems = list(parent.metadata.get("problems") or [])
    if not problems and parent.exc_type is None:  # buggy by the review, not by the run
        reasons = (parent.metadata.get("review") or {}).get("reasons") or []
        problems = [str(r) for r in reasons] or ["the review judged this program buggy"]
    prompt, ctx = _debug_call(
        session, slot, f"slot{slot}:debugnode", depth, GREEDY_MAX_DEBUG_DEPTH,
        parent.code, parent.term_out, parent.exc_type, problems,
    )
    return OperationRequest(
        operation="debug",
        phase=2,
        slot=slot,
        parent_id=parent.id,
        template="debug.j2",
        prompt=prompt,
        ctx=ctx,
        metadata={"policy_action": "debug", "debug_depth": depth},
    )


def prepare_greedy(session: RunSession, slot: int) -> OperationRequest:
    """One step of the greedy search policy (AIDE ``search_policy``, :func:`swarm_evo.policies.greedy_action`):
    draft, improve the best valid node, or debug a buggy leaf. The decision and the claim on
    a debugged leaf are taken under the session's lock, so parallel steps never debug the
    same leaf; the claim ends when the node is appended (:func:`release_request`).
    ``metadata.policy_action`` names the decision."""
    rng = step_rng(session, slot, "policy")
    with session.lock:
        in_flight = session.debugs_in_flight
        action = greedy_action(session.journal, rng, exclude=in_flight)
        if action.kind == "debug":
            in_flight.add(action.parent_id)
    try:
        if action.kind == "draft":
            request = prepare_draft(session, slot)
            request.metadata["policy_action"] = "draft"
            return request
        parent = session.journal.get(action.parent_id)
        if action.kind == "improve":
            return prepare_improve(session, slot, parent)
        return prepare_debug_node(session, slot, parent, action.debug_depth)
    except BaseException:
        if action.kind == "debug":
            with session.lock:
                session.debugs_in_flight.discard(action.parent_id)
        raise


def _prepare_merge(session: RunSession, slot: int, plan) -> OperationRequest:
    parent = primary_parent(plan, session.journal)
    genes = {
        locus: {"source_node_id": cand.source_node_id, "code": cand.code, "quality": cand.quality}
        for locus, cand in plan.genes.items()
    }
    sources = {locus: cand.source_node_id for locus, cand in plan.genes.items()}
    warnings = check_merge_compatibility(
        {locus: cand.code for locus, cand in plan.genes.items()},
        sources=sources,
        stub_threshold=session.config.search.stub_threshold,
        preambles={locus: split_program(session.journal.get(src).code)[0] for locus, src in sources.items()},
        primary_id=parent.id,
        scaffold=parse_genes(parent.code),
        required=session.objective.required_loci,
    )
    agent_id, agent_vars = operation_context(session, slot, "merge")
    prompt = render(
        "merge.j2",
        **prompt_context(session),
        **agent_vars,
        primary_parent=parent,
        gene_plan=genes,
        merge_warnings=warnings,
        data_preview=session.data_preview,
    )
    ctx = offline_context(session, "merge", f"slot{slot}:merge")
    ctx.update(primary_parent_code=parent.code, gene_plan=plan.to_context())
    return OperationRequest(
        operation="merge",
        phase=2,
        slot=slot,
        parent_id=parent.id,
        template="merge.j2",
        prompt=prompt,
        ctx=ctx,
        agent_id=agent_id,
        metadata={"gene_sources": plan.sources(), "gene_plan": plan.metadata(), "merge_warnings": warnings},
    )


def release_request(session: RunSession, request: OperationRequest) -> None:
    """Forget a merge's in-flight plan, or a greedy debug's claim on its leaf, once its node
    is in the journal (or abandoned)."""
    key = (request.metadata.get("gene_plan") or {}).get("key")
    if key:
        with session.lock:
            session.plans_in_flight.discard(tuple(key))
    if request.operation == "debug" and request.parent_id:
        with session.lock:
            session.debugs_in_flight.discard(request.parent_id)


# --------------------------------------------------------------------------- generation
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
    :func:`prevalidate`).

    Raises:
        GenerationError: a reply without a code block.
        DeadlineReached: the run's time limit came first.
        litellm exceptions: see ``TRANSIENT_ERRORS`` (the caller retries those).
    """
    save_prompt(session, node_id, request.operation, request.prompt)
    reply = complete_code(session.endpoint, request.prompt, request.ctx, loci=session.loci)
    return prevalidate(session, node_id, request.slot, "fix", Generated(plan=reply.plan, code=reply.code, usage=reply.usage))


def prevalidate(session: RunSession, node_id: str, slot: int, name: str, generated: Generated) -> Generated:
    """Static pre-validation of a generated program (markers, compiles, writes the submission,
    prints the metric: the objective's ``static_check``) and, when it fails, one LLM self-fix
    with the errors injected (fix.j2, saved as ``prompt-<name>.md``). Drafts, merges, mutates
    and debug fixes all pass through it (issue 13).

    The self-fix is kept only when it passes the check; otherwise (it fails the check too, or
    the model gives no program) the original program runs and its own errors show at run
    time. ``prevalidation`` records ``errors``, ``fixed`` (the fix was kept), and, after a
    fix attempt, ``errors_after`` and ``fix_kept``.

    Raises:
        DeadlineReached, litellm exceptions: as :func:`generate_program`.
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
    except GenerationError as exc:
        usage = usage.add(exc.usage or LLMUsage())
        record.update(errors_after=None, fix_error=str(exc)[:500])
        return generated.model_copy(update={"usage": usage, "prevalidation": record})
    usage = usage.add(fixed.usage)
    errors_after = session.objective.static_check(fixed.code)
    record.update(fixed=not errors_after, errors_after=errors_after)
    if errors_after:
        return generated.model_copy(update={"usage": usage, "prevalidation": record})
    return Generated(plan=generated.plan, code=fixed.code, usage=usage, prevalidation=record)


def memory_limit_text(session: RunSession) -> str | None:
    """The memory limit programs run under, for debug prompts: the configured limit, else the
    sandbox's cgroup limit from the runtime probe (Docker's default), else None."""
    limit = session.config.sandbox.memory_limit_mb or session.runtime.memory_limit_mb
    return f"{limit} MB" if limit else None


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
    ``prompt-fix-debug<attempt>.md``)."""
    prompt, ctx = _debug_call(
        session, slot, f"slot{slot}:debug{attempt}", attempt, session.config.search.debug_max_attempts,
        code, term_out, exc_type, problems,
    )
    save_prompt(session, node_id, f"debug{attempt}", prompt)
    reply = complete_code(session.endpoint, prompt, ctx, loci=session.loci)
    generated = Generated(plan=reply.plan, code=reply.code, usage=reply.usage)
    if same_program(generated.code, code):  # nothing to pre-validate: the caller counts it as failed
        return generated
    return prevalidate(session, node_id, slot, f"fix-debug{attempt}", generated)


def same_program(a: str, b: str) -> bool:
    """True when two programs differ at most in trailing whitespace and blank lines (a debug
    "fix" that returns the program unchanged is a failed attempt, not a run; issue 13)."""
    def norm(code: str) -> list[str]:
        return [line.rstrip() for line in code.strip().splitlines() if line.strip()]

    return norm(a) == norm(b)


def _debug_call(
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


# --------------------------------------------------------------------------- execution
def execute_program(session: RunSession, node_id: str, code: str, attempt: int = 0, plan: str = "",
                    usage: LLMUsage | None = None) -> Attempt:
    """Run and judge ``code`` in ``nodes/<node_id>/`` through the objective (competitions: one
    execution and the submission check; problems: an Eval Service evaluation)."""
    workdir = session.node_dir(node_id)
    assessment = session.objective.assess(session.sandbox, code, workdir, exec_timeout(session))
    return Attempt(
        attempt=attempt,
        plan=plan,
        code=code,
        result=assessment.result,
        problems=assessment.problems,
        usage=usage or LLMUsage(),
        metric=assessment.metric,
        evaluation=assessment.evaluation,
    )


# --------------------------------------------------------------------------- review
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


# --------------------------------------------------------------------------- nodes
def assemble_node(
    session: RunSession,
    node_id: str,
    request: OperationRequest,
    generated: Generated,
    chain: ChainOutcome,
    review: ReviewOutcome,
    review_usage: LLMUsage,
    epoch: int,
    wall_seconds: float,
) -> Node:
    """Build the journal node of a finished step (one node per step, SPEC §6)."""
    final = chain.final
    usage = generated.usage.add(chain.usage).add(review_usage)
    runs = chain.history or [final.history_entry()]
    exec_seconds = sum(h.get("exec_time") or 0.0 for h in runs)
    is_buggy = review.is_buggy or chain.dead
    metadata = dict(request.metadata)
    metadata.update(
        # it ran, wrote a valid submission (or passed the evaluator) and printed a finite metric:
        # a candidate for the hand-in even if the reviewer flagged it (Journal.submission_candidate)
        facts_passed=not chain.dead and not final.problems and review.metric_value is not None,
        prevalidation=generated.prevalidation,
        debug_history=chain.history,
        review={**review.details, "reasons": review.reasons, "metric_disagreement": review.metric_disagreement},
        problems=final.problems,
        **({"evaluation": final.evaluation} if final.evaluation is not None else {}),
        timings={
            "wall": round(wall_seconds, 3),
            "llm": round(usage.seconds, 3),
            "exec": round(exec_seconds, 3),
            "orchestration": round(max(0.0, wall_seconds - usage.seconds - exec_seconds), 3),
        },
    )
    return Node(
        id=node_id,
        parent_id=request.parent_id,
        operation=request.operation,
        phase=request.phase,
        epoch=epoch,
        plan=final.plan or generated.plan,
        code=final.code,
        genes=parse_genes(final.code),
        exc_type=final.result.exc_type,
        exc_info=final.result.exc_info,
        term_out=recorded_output(final.result.term_out),
        exec_time=final.result.exec_time,
        metric_value=review.metric_value,
        lower_is_better=session.objective.is_lower_better,
        is_buggy=is_buggy,
        dead=chain.dead,
        debug_attempts=chain.attempts,
        approach_tag=review.approach_tag,
        analysis=review.analysis,
        agent_id=request.agent_id,
        llm_usage=usage,
        metadata=metadata,
    )


def failed_generation_node(
    session: RunSession, node_id: str, request: OperationRequest, error: BaseException, epoch: int, wall_seconds: float
) -> Node:
    """A dead node for a step whose generation failed for good (counted in the budget).

    ``exc_type`` is always ``"GenerationError"`` (issue 7: whatever the last error was, a bad
    reply or a model error such as ``RateLimitError`` after its retries); ``exc_info`` is
    ``"<error class>: <error text>"`` (at most 2,000 characters);
    ``metadata.generation_error`` = ``{"type": <error class>, "transient": bool}`` where
    transient means one of ``TRANSIENT_ERRORS``; ``llm_usage`` is what the failed calls cost
    when the error carries it (GenerationError.usage), else zero.
    """
    from swarm_evo.llm.client import TRANSIENT_ERRORS

    return Node(
        id=node_id,
        parent_id=request.parent_id,
        operation=request.operation,
        phase=request.phase,
        epoch=epoch,
        exc_type="GenerationError",
        exc_info=f"{type(error).__name__}: {error}"[:2000],
        lower_is_better=session.objective.is_lower_better,
        is_buggy=True,
        dead=True,
        agent_id=request.agent_id,
        llm_usage=getattr(error, "usage", None) or LLMUsage(),
        metadata={
            **request.metadata,
            "generation_error": {"type": type(error).__name__, "transient": isinstance(error, TRANSIENT_ERRORS)},
            "timings": {"wall": round(wall_seconds, 3)},
        },
    )


def append_node(session: RunSession, node: Node, request: OperationRequest) -> Node:
    """Append the step's node to the journal (atomic save), commit its budget slot, and let
    the learning loops see it (SPEC §9): its quality (``metadata.quality``: percentile rank of
    its fitness among valid nodes, 0 when buggy) updates the dispatcher's EMA of its
    (agent, operation) and becomes an experience record."""
    with session.lock:
        node.metadata["quality"] = node_quality(session.journal, node)
        # The run's age at this node, so a resumed run's time limit continues (Budget.for_journal).
        session.journal.info["elapsed_seconds"] = round(session.budget.elapsed(), 3)
        session.journal.append(node)
    session.budget.commit(request.slot)
    release_request(session, request)
    if node.agent_id:
        session.dispatcher.update(node.agent_id, node.operation, node.metadata["quality"], node.id)
        session.experience.add(record_for(node, node.metadata["quality"]))
    publish_best(session)
    check_limits(session)
    return node


def publish_best(session: RunSession) -> Node | None:
    """Hand in the current best work now (issue 13: a run killed from outside keeps it): when
    :meth:`Journal.submission_candidate` changed since the last call, its program and
    submission (problems: metrics) are copied to the run directory. Returns the candidate."""
    with session.lock:
        node, _ = session.journal.submission_candidate()
        if node is not None and node.id != session.published_best_id:
            session.objective.publish_best(session.run_dir, node)
            session.published_best_id = node.id
    return node


def check_limits(session: RunSession) -> str | None:
    """Stop the run (no new step starts; :meth:`RunSession.stop`) when a limit beyond budget and
    time is reached, and return the stop reason (None while the run may go on):

    - ``model.max_cost_usd``: the ledger's cost (every call, failed and preflight ones too)
      reached it — a clean stop, the run ends normally;
    - ``model.max_consecutive_failures``: that many nodes in a row (the latest ones) are
      generation failures (the model failed for good or never gave a program) — a failing
      stop: the run ends with exit 1 and can be resumed once the model works again.
    """
    model = session.config.model
    if model.max_cost_usd is not None:
        cost = session.ledger.totals().cost_usd
        if cost is not None and cost >= model.max_cost_usd:
            session.stop(f"model.max_cost_usd reached: the run's model calls cost ${cost:.4f} "
                         f"(limit ${model.max_cost_usd:.4f})")
    recent = session.journal.nodes[-model.max_consecutive_failures:]
    if len(recent) == model.max_consecutive_failures and all(
        n.exc_type == "GenerationError" and "generation_error" in n.metadata for n in recent
    ):
        last = (recent[-1].exc_info or "").splitlines()[0][:300] if recent[-1].exc_info else "unknown error"
        session.stop(
            f"the model failed {len(recent)} times in a row ({session.endpoint.name} at {session.endpoint.where}; "
            f"last error: {last}): fix the model or its endpoint, then continue with "
            f"`swarm-evo resume {session.run_dir}`",
            failure=True,
        )
    return session.stop_reason


# --------------------------------------------------------------------------- the end
def finalize_run(session: RunSession) -> tuple[Node | None, BaseModel]:
    """The objective's end of the run for the best valid node: competitions copy its program
    and submission and grade it (``grade_report.json``); problems write its program,
    ``best_metrics.json`` and ``problem_report.json``. Returns ``(best node, report)``."""
    report = session.objective.finalize(session.run_dir, session.journal)
    return session.journal.best_node(), report


def write_run_report(session: RunSession) -> dict:
    """Build ``RUN_DIR/run_report.json`` and return it: :func:`swarm_evo.run_report.build_run_report`
    (operations, agents, evolutions, Phase 2 start) plus ``hand_in`` (``{node_id, step, reason}``),
    ``llm`` (calls, failed_calls, prompt_tokens, completion_tokens, cost_usd, seconds, by_operation,
    by_role: :mod:`swarm_evo.llm.ledger`) and ``stop_reason`` (None unless the run stopped early)."""
    from swarm_evo.agent_evolution import load_evolutions

    evolutions = [record.summary() for record in load_evolutions(session.run_dir)]
    report = build_run_report(session.journal, evolutions, session.agents.ids)
    chosen, why = session.journal.submission_candidate()
    report["hand_in"] = {"node_id": chosen.id if chosen else None, "step": chosen.step if chosen else None,
                         "reason": why}
    report["llm"] = session.ledger.summary().report()  # every model call, failed and preflight ones too
    report["stop_reason"] = session.stop_reason
    save_run_report(session.run_dir / RUN_REPORT_FILE, report)
    return report


# --------------------------------------------------------------------------- problems
AUXILIARY_RECORD = "auxiliary_metrics.json"


def evaluate_initial_program(session: RunSession) -> dict[str, Any]:
    """Problems: evaluate the problem's initial program once, before any step (the baseline
    of the final report): ``RUN_DIR/initial/`` and ``RUN_DIR/initial_metrics.json``. A run
    directory that already has it (a continued run) keeps it. Returns its metrics.json."""
    from swarm_evo.objective.problem import INITIAL_METRICS

    path = session.run_dir / INITIAL_METRICS
    if not path.exists():
        session.objective.evaluate_initial(session.sandbox, session.run_dir, exec_timeout(session))
    return json.loads(path.read_text(encoding="utf-8"))


def write_auxiliary_metrics(session: RunSession) -> dict[str, Any]:
    """Problems: the evaluation agent writes ``RUN_DIR/auxiliary_metrics.py`` (seed 002).

    The model gets the problem and the structure of the initial program's output
    (:func:`swarm_evo.evaluation.auxiliary_writer.describe_output`); its file is tried on that
    output in the sandbox. Every later evaluation runs it with its own timeout; a broken file
    is reported there and never fails an evaluation. The record (plan, trial metrics or
    error) goes to ``RUN_DIR/auxiliary_metrics.json``; an existing file is kept.

    A model that fails for good with anything but a transient error (GenerationError: no
    code after the re-ask; e.g. litellm.BadRequestError) gives a record with ``written``
    false and the error; the run goes on without dynamic auxiliary metrics.

    Raises:
        litellm exceptions: transient model errors (``TRANSIENT_ERRORS``; the Prefect task
            retries them, the caller goes on without the file when they persist).
    """
    from swarm_evo.evaluation import load_program_output, run_auxiliary
    from swarm_evo.evaluation.auxiliary_writer import describe_output
    from swarm_evo.llm.client import TRANSIENT_ERRORS
    from swarm_evo.objective.problem import AUXILIARY_TIMEOUT, INITIAL_DIR, RESULTS_DIR

    objective = session.objective
    record_path = session.run_dir / AUXILIARY_RECORD
    if objective.auxiliary_path.exists() and record_path.exists():
        return json.loads(record_path.read_text(encoding="utf-8"))
    initial_results = session.run_dir / INITIAL_DIR / RESULTS_DIR
    sample = describe_output(load_program_output(initial_results))
    prompt = render("auxiliary_metrics.j2", objective=objective.prompt_view(), sample_output=sample,
                    timeout=AUXILIARY_TIMEOUT)
    atomic_write_text(session.run_dir / "prompt-auxiliary_metrics.md", prompt)
    ctx = offline_context(session, "auxiliary_metrics", "auxiliary_metrics")
    ctx["sample_output"] = sample
    record: dict[str, Any] = {"file": str(objective.auxiliary_path), "sample_output": sample}
    try:
        reply = complete_code(session.endpoint, prompt, ctx)
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:  # GenerationError, or a model error that a retry would not cure
        record.update(written=False, error=f"{type(exc).__name__}: {exc}"[:2000])
    else:
        atomic_write_text(objective.auxiliary_path, reply.code)
        metrics, _, error = run_auxiliary(session.sandbox, objective.auxiliary_path, initial_results,
                                          source="auxiliary_dynamic", timeout=AUXILIARY_TIMEOUT)
        record.update(written=True, plan=reply.plan, usage=reply.usage.model_dump(),
                      trial={"metrics": metrics, "error": error})
    atomic_write_text(record_path, json.dumps(record, indent=2, default=str))
    return record
