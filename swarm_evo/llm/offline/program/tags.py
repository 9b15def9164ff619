"""Approach tags: a one-line summary of a program (allele labels, then a few parameters).

The allele part (:func:`tag_signature`) is what drafts compare to avoid repeating an approach.
"""

from __future__ import annotations

from swarm_evo.population import genes as G

from .alleles import allele_description, allele_label
from .params import baseline_values, find_params
from .problem import problem_loci

APPROACH_TAG_MAX = 200
"""Approach tags are clipped to this many characters (swarm_evo.search.approach_tag.APPROACH_TAG_MAX)."""


def approach_tag(code: str, ctx: dict) -> str:
    """One-line approach: the sections' allele labels joined by " + ", then " | " and up to four
    parameters (those differing from the baseline first), e.g.
    ``"hexagonal rings + greedy radii + baseline refine | STEP = 0.06, N_ITERS = 400"``."""
    _, genes = G.split_program(code or "")
    if not genes:
        return "unstructured program (no section markers)"
    parts = []
    for locus in problem_loci(ctx, code):
        if locus not in genes:
            continue
        desc = allele_description(genes[locus])
        parts.append(allele_label(desc) if desc else f"baseline {locus.lower()}")
    base = baseline_values(ctx)
    params = [(m.group("name"), m.group("value")) for locus in problem_loci(ctx, code)
              for m in find_params(genes.get(locus, ""))]
    params.sort(key=lambda p: p[0] in base and float(base[p[0]]) == float(p[1]))
    tag = " + ".join(parts)
    if params:
        tag += " | " + ", ".join(f"{n} = {v}" for n, v in params[:4])
    return tag if len(tag) <= APPROACH_TAG_MAX else tag[: APPROACH_TAG_MAX - 3] + "..."


def tag_signature(tag: str | None) -> str:
    """The allele part of an approach tag (before " | "), used to compare drafts."""
    return (tag or "").split(" | ")[0].strip()
