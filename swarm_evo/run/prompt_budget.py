"""The prompts' fixed text against the model's context window, checked at start (issue 31).

:func:`swarm_evo.prompting.prompts.render` makes every prompt fit ``limits.prompt_chars`` by shrinking its
variable parts (programs, outputs, histories, agent texts) beside the template's fixed text
(instructions, headings, the objective's names, the section markers). That only gives a useful
prompt while the fixed text leaves room, so :func:`check_prompt_window` measures the fixed text
of every template a run renders, for the run's objective, and refuses a window where it would
take more than :data:`FIXED_SHARE` of the prompt budget: a :class:`~swarm_evo.config.ConfigError`
naming ``model.context_window`` (``swarm-evo run`` and ``resume`` exit 2 with it).
"""

from __future__ import annotations

from typing import Any

from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.learning.agent_evolution import agent_operations_view
from swarm_evo.learning.agents import text_kinds
from swarm_evo.learning.evolution_log import EvolutionLog, LogChange
from swarm_evo.operators import registry
from swarm_evo.population.node import Node
from swarm_evo.prompting.prompts import measure
from swarm_evo.prompting.text_bounds import PromptLimits, prompt_limits

FIXED_SHARE = 0.5
"""The largest share of a prompt's budget (``limits.prompt_chars``) its fixed text may take; the
rest is for the programs, outputs and histories the prompt is about."""

DEVICE_ROOM = "x" * 80
"""Stands in for the device line (known only after the sandbox's runtime probe) when the fixed
text is measured."""

CODE_TEMPLATES = ("fix.j2", "auxiliary_metrics.j2")
"""The code model's templates besides the operations' (:func:`swarm_evo.operators.registry.templates`):
the self-fix and, for problems only, the auxiliary metrics."""


def role_templates() -> dict[str, tuple[str, ...]]:
    """The templates each model renders, by its ``model`` key (``review_name`` and
    ``evolution_name`` default to ``name``): the code model renders every operation's template
    (the registry's) and :data:`CODE_TEMPLATES`."""
    return {
        "name": registry.templates() + CODE_TEMPLATES,
        "review_name": ("review.j2",),
        "evolution_name": ("evolve_agent.j2",),
    }


def skeleton_contexts(objective: Any, limits: PromptLimits, max_steps: int = 100) -> dict[str, dict[str, Any]]:
    """``{template: context}`` rendering each template with every optional section shown and
    every variable input one character long: what :func:`~swarm_evo.prompting.prompts.measure` needs to
    measure a template's fixed text for ``objective`` (its prompt view and loci).

    Every operation's template (the registry's) gets one context holding the variables of all
    of them (the agent's texts, the draft history, a parent, a merge's gene plan, a debug
    attempt's program and error): a template shows only the sections it names, so an operation
    whose template reads these variables needs nothing here."""
    view = objective.prompt_view()
    loci = list(objective.loci)
    one = "x"
    node = Node(operation="draft", phase=1, step=1, code=one, term_out=one, analysis=one, metric_value=0.5,
                is_buggy=False, metadata={"evaluation": {"public_metrics": {one: 1.0}, "auxiliary_metrics": {one: 1.0}}})
    change = LogChange(step=1, node_id=node.id, operation="draft", agent_id="agent-1", metric=0.5, tags=["BEST"],
                       summary=one)
    common = dict(limits=limits, objective=view, loci=loci, time_remaining="12h 00m", exec_timeout="1h 00m",
                  steps_remaining=max_steps, device_info=DEVICE_ROOM, packages=one)
    agent_vars = dict(
        agent={"id": "agent-1", "role": one, "strategy": one}, operation="draft",
        experience=[{"quality": 1.0, "metric": 0.5, "step": 1, "agent_id": "agent-1", "plan_summary": one}],
        evolution_log=EvolutionLog(best=change, changes=[change], constraints=[one], unexplored=[one]),
    )
    program = dict(code=one, data_preview=one)
    evaluation = {"correct": False, "combined_score": 0.0, "error": one, "public_metrics": {one: 1.0},
                  "auxiliary_metrics": {one: 1.0}}
    stats = {"steps": 1, "success_rate": 1.0, "mean_quality": 1.0, "score": 1.0}
    texts = {kind: one for kind in text_kinds()}
    plans = [{"operation": "draft", "quality": 1.0, "plan_summary": one, "exc_type": "ValueError"}]
    operation = {**common, **agent_vars, **program,
                 "draft_history": [{"step": 1, "approach": one, "approach_tag": one, "metric": 0.5}],
                 "primary_parent": node, "merge_warnings": [one],
                 "gene_plan": {locus: {"source_node_id": node.id, "code": one, "quality": 1.0} for locus in loci},
                 "parent": node, "target_locus": max(loci, key=len),
                 "attempt": 1, "max_attempts": 2, "term_out": one, "exc_type": "TimeoutError", "problems": [one],
                 "memory_limit": "65536 MB"}
    return {
        **{template: operation for template in registry.templates()},
        "fix.j2": {**common, **program, "errors": [one]},
        "review.j2": {**common, "code": one, "term_out": one, "exc_type": "TimeoutError",
                      "submission_errors": [one], "evaluation": evaluation},
        "evolve_agent.j2": {"limits": limits, "objective": view, "best_plans": plans, "worst_plans": plans,
                            "operations": agent_operations_view(),
                            "agent": {"id": "agent-1", "texts": texts, "stats": stats},
                            "elite": {"id": "agent-2", "texts": texts, "stats": stats}},
        "auxiliary_metrics.j2": {"limits": limits, "objective": view, "timeout": 60,
                                 "sample_output": {one: {"type": "ndarray", "shape": [1], "dtype": "float64",
                                                         "example": [0.0]}}},
    }


def minimum_window(fixed_chars: int, reply_tokens: int | None = None) -> int:
    """The smallest context window (tokens) whose prompt budget (:meth:`PromptLimits.for_context_window`,
    with ``model.max_tokens`` = ``reply_tokens``) gives ``fixed_chars`` at most :data:`FIXED_SHARE`."""
    low, high = 1, 1
    while PromptLimits.for_context_window(high, reply_tokens).prompt_chars * FIXED_SHARE < fixed_chars:
        low, high = high, high * 2
    while low < high:  # the budget grows with the window: bisect
        mid = (low + high) // 2
        if PromptLimits.for_context_window(mid, reply_tokens).prompt_chars * FIXED_SHARE < fixed_chars:
            low = mid + 1
        else:
            high = mid
    return high


def check_prompt_window(config: RunConfig, objective: Any) -> None:
    """Refuse a context window too small for the prompts' fixed text (issue 31).

    For each model of the run (``model.name``, ``review_name``, ``evolution_name``) and each
    template it renders (:func:`role_templates`), the fixed text for ``objective`` is measured
    (:func:`skeleton_contexts`, :func:`~swarm_evo.prompting.prompts.measure`); it may take at most
    :data:`FIXED_SHARE` of the model's ``limits.prompt_chars`` (:func:`~swarm_evo.prompting.text_bounds.prompt_limits`:
    ``model.context_window``, ``model.max_tokens``).

    Raises:
        ConfigError: one line naming ``model.context_window``, the template, its fixed text and
            the minimum window (tokens) it needs.
    """
    model = config.model
    for key, templates in role_templates().items():
        limits = prompt_limits(model, getattr(model, key) or model.name)
        contexts = skeleton_contexts(objective, limits, config.search.max_steps)
        for template in templates:
            if template == "auxiliary_metrics.j2" and objective.kind != "problem":
                continue
            fixed, _ = measure(template, contexts[template])
            if fixed > limits.prompt_chars * FIXED_SHARE:
                need = minimum_window(fixed, model.max_tokens)
                raise ConfigError(
                    f"model.context_window: a {limits.context_window:,}-token window is too small: the fixed "
                    f"text of the {template} prompt for model '{getattr(model, key) or model.name}' "
                    f"(instructions, headings, section markers: {fixed:,} characters) would take more than "
                    f"half of its {limits.prompt_chars:,} prompt characters; use a model with a context "
                    f"window of at least {need:,} tokens and set model.context_window to it"
                )
