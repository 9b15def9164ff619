"""Builders shared by the tests: realistic 7-section programs and journal nodes."""

from __future__ import annotations

from swarm_evo.population import genes as G
from swarm_evo.population.node import Node


def program(**overrides: str) -> str:
    """A program with every locus (non-stub code), sections replaced by ``overrides``."""
    body = {locus: f"value_{locus.lower()} = compute_{locus.lower()}(alpha=1)\n" for locus in G.LOCI}
    body.update(overrides)
    return "import numpy as np\n" + "".join(f"# [SECTION: {locus}]\n{body[locus]}" for locus in G.LOCI)


def make_node(metric=0.5, lower_is_better=False, is_buggy=False, dead=False, code=None, **kw) -> Node:
    """A journal node (draft, phase 1 unless given) with genes parsed from its code."""
    code = program() if code is None else code
    return Node(
        operation=kw.pop("operation", "draft"),
        phase=kw.pop("phase", 1),
        code=code,
        genes=G.parse_genes(code),
        metric_value=metric,
        lower_is_better=lower_is_better,
        is_buggy=is_buggy,
        dead=dead,
        **kw,
    )
