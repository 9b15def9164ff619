"""The code-reply handlers: draft, mutate, merge, debug (the registry's ``OfflineHandlers.problem``), fix
and auxiliary_metrics (:data:`PURPOSES`).

Each is ``handler(ctx, rng) -> (plan, code)``; :mod:`..respond` formats the result as a code reply.
"""

from __future__ import annotations

import random
import re

from swarm_evo.population import genes as G

from .alleles import (
    allele_description,
    allele_label,
    allele_table,
    choices_text,
    current_allele,
    gene_text,
)
from .aux_metrics import auxiliary_metrics
from .faults import maybe_fault
from .params import describe_changes, find_params, perturb_params
from .problem import initial_program, problem_loci, problem_of, render
from .repairs import irrelevant_edit, repair
from .source import locus_of_line
from .tags import approach_tag, tag_signature


def draft(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """A new program from the initial one: random alleles (p = 0.5 per locus) and 1-3 perturbed
    parameters, avoiding allele combinations already in ``draft_history``."""
    preamble, base = G.split_program(initial_program(ctx))
    if not base:
        raise ValueError("offline model: CTX problem.initial_program has no '# [SECTION: ...]' markers")
    table = allele_table(ctx)
    loci = [lc for lc in problem_loci(ctx) if lc in base or lc in table]
    used = {tag_signature(r.get("approach_tag")) for r in ctx.get("draft_history") or [] if isinstance(r, dict)}
    chosen = None
    for _ in range(8):
        genes = dict(base)
        choices: dict[str, str] = {}
        for locus in loci:
            opts = table.get(locus) or {}
            if opts and rng.random() < 0.5:
                name = rng.choice(sorted(opts))
                genes[locus] = gene_text(opts[name])
                choices[locus] = name
        params = [(locus, i) for locus in loci for i in range(len(find_params(genes.get(locus, ""))))]
        picked = rng.sample(params, min(len(params), rng.randint(1, 3))) if params else []
        changes: list[tuple[str, str, str, str]] = []
        for locus in loci:
            idx = [i for lc, i in picked if lc == locus]
            if idx:
                genes[locus], ch = perturb_params(genes[locus], rng, len(idx), idx)
                changes += [(locus, *c) for c in ch]
        code = render(preamble, genes, ctx)
        cand = (code, choices, changes)
        if chosen is None:
            chosen = cand
        if tag_signature(approach_tag(code, ctx)) not in used:
            chosen = cand
            break
    code, choices, changes = chosen
    touched = list(dict.fromkeys(list(choices) + [c[0] for c in changes])) or loci
    code, _fault = maybe_fault(ctx, rng, code, touched)
    plan = "Draft: start from the problem's initial program"
    plan += "; " + choices_text(choices, table) if choices else "; keep every section's baseline code"
    plan += "; parameters " + ", ".join(f"{lc}.{n} {a} -> {b}" for lc, n, a, b in changes) if changes else ""
    plan += f". Approach: {tag_signature(approach_tag(code, ctx))}."
    return plan, code


def mutate(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Change only the gene at ``target_locus`` of ``parent_code`` (allele swap or parameters)."""
    code = ctx.get("parent_code") or ""
    locus = ctx.get("target_locus") or (problem_loci(ctx, code) or [""])[0]
    table = allele_table(ctx)
    preamble, genes = G.split_program(code)
    if locus not in genes:
        base = G.parse_genes(initial_program(ctx))
        if locus in base and genes:
            genes[locus] = base[locus]
            new = render(preamble, genes, ctx)
            return (f"Mutation of {locus}: the parent had no {locus} section; added the initial "
                    f"program's.", new)
        return f"Mutation: the parent has no {locus} section; unchanged.", code
    text = genes[locus]
    cur = current_allele(locus, text, table)
    others = [n for n in sorted(table.get(locus) or {})
              if n != cur and G.normalise_gene(table[locus][n]) != G.normalise_gene(text)]
    params = find_params(text)
    if others and (not params or rng.random() < 0.35):
        name = rng.choice(others)
        new_text = gene_text(table[locus][name])
        desc = allele_description(new_text)
        detail = (f"swapped {locus} from {('allele ' + repr(cur)) if cur else 'its current code'} to allele "
                  f"'{name}'" + (f" ({allele_label(desc, 80)})" if desc else ""))
    elif params:
        new_text, ch = perturb_params(text, rng, rng.randint(1, min(2, len(params))))
        detail = f"tuned {locus} parameters: {describe_changes(ch)}"
    else:
        new_text = text.rstrip("\n") + f"\n# mutation: {locus.lower()} has no tunable parameters or " \
                                        f"alternatives; revisit it (variant {rng.randint(0, 999)})\n\n"
        detail = (f"{locus} has no numeric parameters and no alternative sections; added a "
                  f"harmless annotation only")
    new_code = G.replace_gene(code, locus, new_text)
    new_code, _fault = maybe_fault(ctx, rng, new_code, [locus])
    return f"Mutation of one section only: {detail}.", new_code


def merge(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Primary parent as scaffold (preamble and genes), each locus of ``gene_plan`` replaced."""
    preamble, genes = G.split_program(ctx.get("primary_parent_code") or "")
    plan = ctx.get("gene_plan") or {}
    sources = []
    for locus, entry in plan.items():
        text = entry.get("code") if isinstance(entry, dict) else entry
        if not isinstance(text, str):
            continue
        genes[locus] = text if text.endswith("\n") else text + "\n"
        src = entry.get("source_node_id", "?") if isinstance(entry, dict) else "?"
        desc = allele_description(text)
        sources.append(f"{locus} <- {src}" + (f" ({allele_label(desc)})" if desc else ""))
    if not genes:
        preamble, genes = G.split_program(initial_program(ctx))
    code = render(preamble, genes, ctx)
    code, _fault = maybe_fault(ctx, rng, code, [lc for lc in plan if lc in genes] or list(genes))
    return ("Merge: the primary parent is the scaffold and each planned section comes from its source: "
            + ("; ".join(sources) or "no planned sections") + f". Approach: {tag_signature(approach_tag(code, ctx))}."), code


def debug(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Repair ``code`` from ``term_out``/``exc_type`` with probability ``repair_rate``."""
    code = ctx.get("code") or ""
    attempt = int(ctx.get("attempt") or 1)
    if rng.random() < float(ctx.get("repair_rate", 0.8)):
        new, desc = repair(code, ctx.get("term_out") or "", ctx.get("exc_type"), ctx, rng)
        if new is not None:
            return f"Debug attempt {attempt}: {desc}.", new
    return (f"Debug attempt {attempt}: the failure does not point at the algorithm; re-checked one "
            f"section and left the logic as it is.", irrelevant_edit(code, attempt, rng))


def fix(ctx: dict, rng: random.Random) -> tuple[str, str]:
    """Add missing markers/sections from the initial program, replace stub required sections,
    sections with syntax errors and a lost entry function, so the program compiles."""
    code = ctx.get("code") or ""
    p = problem_of(ctx)
    init = initial_program(ctx)
    base_pre, base = G.split_program(init)
    preamble, genes = G.split_program(code)
    notes = []
    if not genes:
        return ("Fix: the program lost its section structure; restarted from the problem's initial "
                "program with all section markers."), init
    for locus in problem_loci(ctx):
        if locus not in genes and locus in base:
            genes[locus] = base[locus]
            notes.append(f"added the missing {locus} section")
    for locus in p.get("required_loci") or []:
        if locus in genes and locus in base and G.is_stub(genes[locus]):
            genes[locus] = base[locus]
            notes.append(f"replaced the stub {locus} section")
    new = render(preamble, genes, ctx)
    for _ in range(len(genes) + 2):
        try:
            compile(new, "program.py", "exec")
            break
        except SyntaxError as e:
            locus = locus_of_line(new, e.lineno or 0)
            if locus and locus in base and G.normalise_gene(genes[locus]) != G.normalise_gene(base[locus]):
                genes[locus] = base[locus]
                notes.append(f"rewrote {locus} (syntax error at line {e.lineno})")
            elif locus is None and preamble != base_pre:
                preamble = base_pre
                notes.append(f"restored the preamble (syntax error at line {e.lineno})")
            else:
                return "Fix: could not repair the syntax error; restarted from the initial program.", init
            new = render(preamble, genes, ctx)
    else:
        return "Fix: could not repair the syntax errors; restarted from the initial program.", init
    entry = p.get("entry")
    if entry and not re.search(rf"^def {re.escape(entry)}\(", new, re.M):
        home = [lc for lc, t in base.items() if re.search(rf"^def {re.escape(entry)}\(", t, re.M)]
        if home:
            genes[home[0]] = base[home[0]]
            notes.append(f"restored the entry function {entry}() with the {home[0]} section")
        elif re.search(rf"^def {re.escape(entry)}\(", base_pre, re.M):
            preamble = base_pre
            notes.append(f"restored the preamble, which defines the entry function {entry}()")
        new = render(preamble, genes, ctx)
    errors = [str(e) for e in ctx.get("errors") or []]
    plan = "Fix of the pre-validation errors" + (f" ({'; '.join(errors)[:300]})" if errors else "") + ": "
    plan += ("; ".join(notes) if notes else "the program already has every section; kept it") + "."
    return plan, new


PURPOSES = {"fix": fix, "auxiliary_metrics": auxiliary_metrics}
"""Code-reply handlers, ``handler(ctx, rng) -> (plan, code)``, of the purposes that are no search
operation; the operations' (draft, mutate, merge, debug here) are named by the registry
(:mod:`swarm_evo.operators`, ``OfflineHandlers.problem``)."""
