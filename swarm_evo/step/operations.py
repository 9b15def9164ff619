"""Select a step's operation and render its prompt (SPEC §6): a Phase 1 draft, a Phase 2 merge
(pheromone gene plan, primary parent) or mutate (tournament, non-stub gene), and under the greedy
search policy (SPEC §12) improve or debug. Each returns an
:class:`~swarm_evo.step.request.OperationRequest`."""

from __future__ import annotations

import random
from typing import Any

from swarm_evo.learning.evolution_log import build_evolution_log
from swarm_evo.operators import registry
from swarm_evo.population.genes import parse_genes, split_program
from swarm_evo.population.node import Node
from swarm_evo.prompting.prompts import render
from swarm_evo.run.model_context import offline_context, prompt_context
from swarm_evo.run.session import RunSession
from swarm_evo.search.merge_compat import check_merge_compatibility
from swarm_evo.search.policies import GREEDY_MAX_DEBUG_DEPTH, greedy_action
from swarm_evo.search.selection import (
    choose_phase2_operation,
    draft_history,
    genome_keys,
    primary_parent,
    select_gene_plan,
    select_mutation_target,
    tournament_select,
)
from swarm_evo.step.generation import debug_prompt
from swarm_evo.step.request import OperationRequest


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
        "agent": {"id": agent_id, "role": agent.texts["role"], "strategy": agent.strategy(operation),
                  "generation": agent.generation},
        "operation": operation,
        "experience": session.experience.examples(
            operation, session.config.agents.experience_top_k, journal=session.journal
        ),
        "evolution_log": build_evolution_log(session.journal, catalogue=session.objective.directions(),
                                             text_data=session.objective.has_text_data()),
    }


def agent_request(
    session: RunSession,
    slot: int,
    operation: str,
    prompt_vars: dict[str, Any],
    ctx_vars: dict[str, Any] | None = None,
    parent_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> OperationRequest:
    """A step of an operation agents write (:mod:`swarm_evo.operators`): its agent (the
    dispatcher, :func:`operation_context`), its template (the registry's) rendered with every
    prompt's variables, the agent's and ``prompt_vars``, and the offline CTX
    (:func:`~swarm_evo.run.model_context.offline_context`, call key ``slot<slot>:<operation>``)
    with ``ctx_vars``; the request's phase is the operation's. ``metadata.agent_generation``
    records which of the agent's texts wrote the prompt (its generation when the step started:
    an agent evolution may rewrite them while the step runs, issue 52).

    Raises:
        KeyError: ``operation`` is not registered.
    """
    op = registry.get(operation)
    agent_id, agent_vars = operation_context(session, slot, operation)
    prompt = render(op.template, **prompt_context(session), **agent_vars, **prompt_vars)
    ctx = offline_context(session, operation, f"slot{slot}:{operation}")
    ctx.update(ctx_vars or {})
    return OperationRequest(operation=operation, phase=op.phase, slot=slot, parent_id=parent_id, template=op.template,
                            prompt=prompt, ctx=ctx, agent_id=agent_id,
                            metadata={**(metadata or {}), "agent_generation": agent_vars["agent"]["generation"]})


def prepare_draft(session: RunSession, slot: int) -> OperationRequest:
    """Phase 1 draft: draft.j2 with the draft history (seed 000 §5 'diversity')."""
    return agent_request(
        session, slot, "draft",
        prompt_vars={"draft_history": draft_history(session.journal, include_failed=True),
                     "data_preview": session.data_preview},
        ctx_vars={"draft_history": draft_history(session.journal)},
    )


def phase2_shares(search: Any) -> dict[str, float]:
    """``{operation: probability}`` of the Phase 2 choice: every Phase 2 operation of the registry
    that has a ``search.<name>_probability`` key (``merge_probability``), in the registry's order;
    the rest of the draw mutates (:func:`swarm_evo.search.selection.choose_phase2_operation`)."""
    return {op.name: getattr(search, f"{op.name}_probability") for op in registry.operators()
            if op.phase == 2 and hasattr(search, f"{op.name}_probability")}


def prepare_phase2(session: RunSession, slot: int) -> OperationRequest:
    """Phase 2: merge (pheromone gene plan, primary parent) or mutate (tournament, non-stub gene).

    The operation is a merge with probability ``merge_probability`` (:func:`phase2_shares`); a
    merge needs ≥ 2 valid nodes and a gene plan, otherwise the step mutates (SPEC §6). Raises
    ValueError when the valid pool is empty (the caller must not start Phase 2 steps then). A new
    Phase 2 operation adds its ``search.<name>_probability`` key and its branch here.
    """
    journal = session.journal
    search = session.config.search
    rng = step_rng(session, slot, "select")
    operation = choose_phase2_operation(journal, rng, phase2_shares(search))
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
    return agent_request(
        session, slot, "mutate",
        prompt_vars={"parent": parent, "target_locus": target},
        ctx_vars={"parent_code": parent.code, "target_locus": target},
        parent_id=parent.id,
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
    prompt, ctx = debug_prompt(
        session, slot, f"slot{slot}:debugnode", depth, GREEDY_MAX_DEBUG_DEPTH,
        parent.code, parent.term_out, parent.exc_type, problems,
    )
    op = registry.get("debug")
    return OperationRequest(
        operation=op.name,
        phase=op.phase,
        slot=slot,
        parent_id=parent.id,
        template=op.template,
        prompt=prompt,
        ctx=ctx,
        metadata={"policy_action": "debug", "debug_depth": depth},
    )


def prepare_greedy(session: RunSession, slot: int) -> OperationRequest:
    """One step of the greedy search policy (AIDE ``search_policy``, :func:`swarm_evo.search.policies.greedy_action`):
    draft, improve the best valid node, or debug a buggy leaf. The decision and the claim on
    a debugged leaf are taken under the session's lock, so parallel steps never debug the
    same leaf; the claim ends when the node is appended (:func:`~swarm_evo.step.request.release_request`).
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
    return agent_request(
        session, slot, "merge",
        prompt_vars={"primary_parent": parent, "gene_plan": genes, "merge_warnings": warnings,
                     "data_preview": session.data_preview},
        ctx_vars={"primary_parent_code": parent.code, "gene_plan": plan.to_context()},
        parent_id=parent.id,
        metadata={"gene_sources": plan.sources(), "gene_plan": plan.metadata(), "merge_warnings": warnings},
    )
