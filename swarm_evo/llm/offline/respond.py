"""The offline model's answer to one call, from the structured context (CTX) alone.

Purposes: every search operation (:mod:`swarm_evo.operators`: draft, merge, mutate, debug;
the registry names each one's handler) and fix (code replies: plan + one fenced python block),
review (a ``submit_review`` tool call) and evolve_agent (a ``submit_agent_texts`` tool call:
the rewritten role and operation texts, SPEC §9). All randomness comes from
``random.Random(f"{seed}:{call_key}")``, so the same CTX gives the same reply.

A CTX with a ``problem`` key (program-optimisation problems: circle packing, TSP, code
optimisation) is answered by :mod:`.program` (the operations' ``problem`` handlers, fix,
auxiliary_metrics code replies; review tool call); evolve_agent stays generic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from swarm_evo.operators import registry
from swarm_evo.operators.operator import OfflineHandlers
from swarm_evo.population import genes as G

from . import (
    alleles,
    data_gene,
    effort,
    evolve_agent,
    faults,
    models,
    programs,
    repair,
    review,
)
from .dataset import DatasetInfo, infer_dataset
from .program import review as program_review
from .program.operations import PURPOSES as PROGRAM_PURPOSES


@dataclass
class Reply:
    """A reply: text content, or a tool call (name + arguments dict, or ``tool_arguments_text``:
    the arguments' raw text, used as is, e.g. invalid JSON from :mod:`.failures`)."""

    content: str | None = None
    tool_name: str | None = None
    tool_arguments: dict | None = None
    tool_arguments_text: str | None = None


def rng_for(ctx: dict) -> random.Random:
    """The call's random generator: ``random.Random(f"{seed}:{call_key}")``."""
    return random.Random(f"{ctx.get('seed', 0)}:{ctx.get('call_key', '')}")


def _title(ctx: dict) -> str:
    comp = ctx.get("competition") or {}
    return f"Solution for {comp.get('id', 'the competition')}"


def code_reply(plan: str, code: str) -> str:
    """Format a code reply: plan paragraph, then one fenced python block."""
    return f"{plan}\n\n```python\n{code.rstrip()}\n```\n"


def _default_gene(info: DatasetInfo, locus: str) -> str:
    spec = {"family": models.suitable(info.task, info.is_text)[0].key,
            "feature_set": data_gene.feature_sets(info)[-1], "loss": None, "optimizer": None,
            "regularization": alleles.default_regularization(info), "init": None, "tricks": {}}
    return programs.render_genes(info, spec)[locus]


def _maybe_fault(ctx: dict, rng: random.Random, code: str, loci: list[str]) -> tuple[str, str]:
    if rng.random() < float(ctx.get("fault_rate") or 0.0) and loci:
        locus = rng.choice(loci)
        return faults.plant(code, locus, rng, ctx["competition"]["public_dir"])
    return code, ""


def draft(ctx: dict, info: DatasetInfo, rng: random.Random, work: effort.Effort = effort.FULL) -> str:
    """A whole new program, preferring a model family absent from the draft history, its work
    sized to ``work`` (:mod:`.effort`)."""
    spec = programs.choose_draft_spec(info, rng, ctx.get("draft_history"), ctx.get("packages"))
    spec = effort.size_spec(info, spec, work)
    code = programs.render_program_from_spec(info, spec, _title(ctx))
    code, fault = _maybe_fault(ctx, rng, code, ["DATA", "MODEL", "TRAINING_TRICKS"])
    return code_reply(programs.draft_plan(info, code), code)


MUTATE_TRIES = 5
"""Draws a mutation may take until its change survives the effort caps (:mod:`.effort`)."""


def mutate(ctx: dict, info: DatasetInfo, rng: random.Random, work: effort.Effort = effort.FULL) -> str:
    """Change only the gene at ``target_locus`` of ``parent_code``; the new gene's work
    constants are capped to ``work`` (a change the caps undo, or an optuna study added in a
    tier without one, is drawn again, up to :data:`MUTATE_TRIES` times)."""
    code = ctx["parent_code"]
    locus = ctx.get("target_locus") or "MODEL"
    preamble, genes = G.split_program(code)
    if locus not in genes:
        return code_reply(f"Mutation: the parent has no {locus} gene; unchanged.", code)
    for _ in range(MUTATE_TRIES):
        new_text, desc = programs.mutate_gene(info, locus, genes[locus], rng, code, ctx.get("packages"))
        if work.full:
            break
        capped = effort.cap_text(new_text, work, effort.model_name(new_text if locus == "MODEL" else genes.get("MODEL")))
        if capped != new_text:
            desc += f" (capped to the {work.name} effort tier)"
        new_text = capped
        if capped != genes[locus] and (work.study or "OPTUNA_TRIALS" not in capped
                                       or "OPTUNA_TRIALS" in genes[locus]):
            break
    new_code = G.replace_gene(code, locus, new_text)
    new_code, fault = _maybe_fault(ctx, rng, new_code, [locus])
    return code_reply(programs.plan_text(new_code, "Mutation of one gene only; the resulting approach is {tag}.",
                                        f"Changed {locus}: {desc}."), new_code)


def merge(ctx: dict, info: DatasetInfo, rng: random.Random, work: effort.Effort = effort.FULL) -> str:
    """Primary parent as scaffold, each locus replaced by the gene plan's code (genes as they
    are: ``work`` is not applied, the parents were sized when they were written)."""
    preamble, genes = G.split_program(ctx["primary_parent_code"])
    plan = ctx.get("gene_plan") or {}
    sources = []
    for locus, entry in plan.items():
        text = entry.get("code") if isinstance(entry, dict) else entry
        if text is None:
            continue
        if not text.endswith("\n"):
            text += "\n"
        genes[locus] = text
        sources.append(f"{locus}<-{entry.get('source_node_id', '?') if isinstance(entry, dict) else '?'}")
    order = list(G.LOCI) + [k for k in genes if k not in G.LOCI]
    code = G.render_program(preamble, genes, order)
    code, fault = _maybe_fault(ctx, rng, code, [lc for lc in G.LOCI if lc in genes])
    return code_reply(programs.plan_text(
        code, "Merge: the primary parent is the scaffold and each locus takes the planned gene; the result is {tag}.",
        "Genes: " + ", ".join(sources) + "."), code)


def debug(ctx: dict, info: DatasetInfo | None, rng: random.Random, work: effort.Effort = effort.FULL) -> str:
    """Repair ``code`` from its traceback with probability ``repair_rate`` (``info`` may be None:
    a repair that needs a default gene then edits instead; ``work`` is not applied)."""
    code = ctx["code"]
    attempt = int(ctx.get("attempt") or 1)
    if rng.random() < float(ctx.get("repair_rate", 0.8)):
        regen = (lambda locus: _default_gene(info, locus)) if info is not None else None
        new, desc = repair.repair(code, ctx.get("term_out") or "", ctx.get("exc_type"),
                                  ctx["competition"]["public_dir"], regen)
        if new is not None:
            return code_reply(f"Debug attempt {attempt}: {desc}.", new)
    new = repair.irrelevant_edit(code, attempt, rng)
    return code_reply(f"Debug attempt {attempt}: the error looks unrelated to the model; "
                      f"adjusted the training section.", new)


FIX_PLAN = "Fix of the static pre-validation errors ({tag})."


def fix(ctx: dict, info: DatasetInfo, rng: random.Random, work: effort.Effort = effort.FULL) -> str:
    """Correct a program that failed static pre-validation (markers, metric line, submission)."""
    code = ctx.get("code") or ""
    try:
        compile(code, "solution.py", "exec")
        ok = True
    except SyntaxError:
        ok = False
    if ok:
        preamble, genes = G.split_program(code)
        for locus in G.LOCI:
            if locus not in genes:
                genes[locus] = _default_gene(info, locus) if locus in ("DATA", "MODEL", "TRAINING_TRICKS") \
                    else alleles.STUBS.get(locus, "# not used\n\n")
        tt = genes.get("TRAINING_TRICKS", "")
        if "submission.csv" not in code or "Validation metric" not in tt:
            genes["TRAINING_TRICKS"] = _default_gene(info, "TRAINING_TRICKS")
        order = list(G.LOCI) + [k for k in genes if k not in G.LOCI]
        new = G.render_program(preamble, genes, order)
        if "SUBMISSION_PATH" in new and "SUBMISSION_PATH =" not in preamble:
            new = G.render_program(programs.render_preamble(info, _title(ctx)), genes, order)
        try:
            compile(new, "solution.py", "exec")
            return code_reply(programs.plan_text(new, FIX_PLAN, "Added the missing pieces."), new)
        except SyntaxError:
            pass
    spec = effort.size_spec(info, programs.choose_draft_spec(info, rng, None, ctx.get("packages")), work)
    new = programs.render_program_from_spec(info, spec, _title(ctx))
    return code_reply(programs.plan_text(new, FIX_PLAN, "Rewrote the program from scratch."), new)


PURPOSES = {"fix": fix}
"""Code-reply handlers of the purposes that are no search operation (the operations' handlers
are the registry's, :func:`handler_for`)."""

NEEDS_NO_DATA = {debug}
"""Handlers that answer without ``competition.public_dir`` (``info`` None)."""


def handler_for(purpose: str | None, problem: bool):
    """The code-reply handler of ``purpose``: the registered operation's (``OfflineHandlers.problem``
    for a problem CTX, else ``competition``), else :data:`PURPOSES` / :data:`.program.operations.PURPOSES`;
    None for an unknown purpose."""
    operator = registry.find(purpose or "")
    if operator is not None:
        return OfflineHandlers.resolve(operator.offline.problem if problem else operator.offline.competition)
    return (PROGRAM_PURPOSES if problem else PURPOSES).get(purpose)


def respond_problem(ctx: dict, rng: random.Random) -> Reply:
    """Answer a program-optimisation call (CTX with a ``problem`` key), see :mod:`.program`."""
    purpose = ctx.get("purpose")
    if purpose == "review":
        return Reply(tool_name="submit_review", tool_arguments=program_review.review(ctx, rng))
    handler = handler_for(purpose, problem=True)
    if handler is None:
        raise ValueError(f"offline model: unknown purpose {purpose!r} for a problem CTX")
    plan, code = handler(ctx, rng)
    return Reply(content=code_reply(plan, code))


def respond(ctx: dict, prompt: str | None = None) -> Reply:
    """Answer one offline-model call described by ``ctx``; ``prompt`` is the rendered prompt
    text the call sends (a real model's only input), from which draft, mutate and fix replies
    read the time and steps left and size their program's work (:mod:`.effort`). Without it
    the programs are full size."""
    purpose = ctx.get("purpose")
    rng = rng_for(ctx)
    if purpose == "evolve_agent":
        return Reply(tool_name="submit_agent_texts", tool_arguments=evolve_agent.evolve_agent(ctx, rng))
    if "problem" in ctx:
        return respond_problem(ctx, rng)
    if purpose == "review":
        return Reply(tool_name="submit_review", tool_arguments=review.review(ctx, rng))
    comp = ctx.get("competition") or {}
    info = infer_dataset(comp, ctx.get("packages")) if comp.get("public_dir") else None
    handler = handler_for(purpose, problem=False)
    if info is None and handler not in NEEDS_NO_DATA:
        raise ValueError("offline model: CTX competition.public_dir is required")
    if handler is None:
        raise ValueError(f"offline model: unknown purpose {purpose!r}")
    return Reply(content=handler(ctx, info, rng, effort.from_prompt(prompt)))
