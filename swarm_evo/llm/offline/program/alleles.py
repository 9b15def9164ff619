"""The problem's alleles: alternative section texts ``{locus: {name: text}}``.

Each allele text starts with ``# allele: <description>``; here live the allele table of a CTX,
the description and short label of a gene, the allele a gene comes from, and the text of a
set of allele choices (used in draft plans).
"""

from __future__ import annotations

import re

from swarm_evo.population import genes as G

from .problem import problem_of

ALLELE_PREFIX = "# allele:"


def allele_table(ctx: dict) -> dict[str, dict[str, str]]:
    """``{locus: {allele_name: gene_text}}`` of the problem (only non-empty string texts)."""
    raw = problem_of(ctx).get("alleles") or {}
    out: dict[str, dict[str, str]] = {}
    for locus, opts in raw.items():
        if isinstance(opts, dict):
            kept = {str(n): t for n, t in opts.items() if isinstance(t, str) and t.strip()}
            if kept:
                out[str(locus)] = kept
    return out


def allele_description(text: str) -> str | None:
    """The description of the first ``# allele: <description>`` line of a gene, or None."""
    for line in (text or "").split("\n"):
        s = line.strip()
        if s.lower().startswith(ALLELE_PREFIX):
            return s[len(ALLELE_PREFIX):].strip() or None
    return None


def allele_label(desc: str, limit: int = 60) -> str:
    """A short label of an allele description: up to the first clause break, at most ``limit``
    characters (cut at a word boundary, "..." appended when cut)."""
    short = re.split(r" — | -- | - |; |: |\. |\(", desc.strip(), maxsplit=1)[0].strip().rstrip(".")
    short = short or desc.strip()
    if len(short) <= limit:
        return short
    cut = short[: limit - 3].rsplit(" ", 1)[0] if " " in short[: limit - 3] else short[: limit - 3]
    return cut.rstrip(" ,") + "..."


def gene_text(text: str) -> str:
    """A gene text as stored in a program: ends with one blank line."""
    return text.rstrip("\n") + "\n\n"


def current_allele(locus: str, text: str, table: dict[str, dict[str, str]]) -> str | None:
    """The allele name the gene comes from: same ``# allele:`` line or same normalised text."""
    opts = table.get(locus) or {}
    desc = allele_description(text)
    norm = G.normalise_gene(text)
    for name in sorted(opts):
        if G.normalise_gene(opts[name]) == norm:
            return name
    if desc is not None:
        for name in sorted(opts):
            if allele_description(opts[name]) == desc:
                return name
    return None


def choices_text(choices: dict[str, str], table: dict[str, dict[str, str]]) -> str:
    """``"LOCUS <- allele 'name' (label); ..."`` for ``{locus: allele_name}`` choices."""
    out = []
    for locus, name in choices.items():
        desc = allele_description(table[locus][name])
        out.append(f"{locus} <- allele '{name}'" + (f" ({allele_label(desc, 80)})" if desc else ""))
    return "; ".join(out)
