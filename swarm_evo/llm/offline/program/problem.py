"""The problem carried by a program-optimisation CTX: its dict, initial program, section order.

:func:`render` writes a preamble and genes back as a program, sections in the problem's order
(sections unknown to the problem appended in their own order).
"""

from __future__ import annotations

from swarm_evo.population import genes as G


def problem_of(ctx: dict) -> dict:
    """The CTX's problem dict (empty dict when absent)."""
    p = ctx.get("problem")
    return p if isinstance(p, dict) else {}


def initial_program(ctx: dict) -> str:
    """The problem's initial program text ("" when the CTX carries none)."""
    return str(problem_of(ctx).get("initial_program") or "")


def problem_loci(ctx: dict, code: str | None = None) -> list[str]:
    """Section names in program order: problem.loci, else CTX loci, else the initial program's
    markers; markers of ``code`` not in that list are appended in their order."""
    p = problem_of(ctx)
    loci = list(p.get("loci") or ctx.get("loci") or G.parse_genes(initial_program(ctx)))
    for extra in (G.parse_genes(initial_program(ctx)), G.parse_genes(code or "")):
        loci += [k for k in extra if k not in loci]
    return loci


def render(preamble: str, genes: dict[str, str], ctx: dict) -> str:
    """The program of ``preamble`` and ``genes``, sections in :func:`problem_loci` order (others appended)."""
    order = problem_loci(ctx)
    order += [k for k in genes if k not in order]
    return G.render_program(preamble, genes, [k for k in order if k in genes])
