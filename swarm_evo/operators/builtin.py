"""The built-in search operations (SPEC §6, §12): draft, merge, mutate, and greedy's debug.

Their order is the order of every table and legend. The texts of ``AgentText`` are the
offline model's (:mod:`swarm_evo.llm.offline.evolve_agent`); the agents' starting texts are
the files ``prompt_templates/agents/<name>.md``.
"""

from __future__ import annotations

from swarm_evo.operators.operator import AgentText, OfflineHandlers, Operator, ReportStyle

_OFFLINE = "swarm_evo.llm.offline.respond:"
_PROGRAM = "swarm_evo.llm.offline.program.operations:"

DRAFT = Operator(
    name="draft",
    phase=1,
    template="draft.j2",
    summary="a whole new program, written from the task alone (Phase 1)",
    agent=AgentText(
        summary="Strategy for drafting a new solution.",
        fallback="Write a complete solution from scratch: load the data, build sensible features, "
                 "fit a well-suited model with cross-validation and write the submission file.",
        reliability="Start from a dependable baseline before adding features.",
        quality="Pick a model family that suits the data rather than the first that comes to mind.",
    ),
    offline=OfflineHandlers(competition=_OFFLINE + "draft", problem=_PROGRAM + "draft"),
    report=ReportStyle(colour="#1e88e5", marker="o", shape="circle", symbol="●", always_listed=True,
                       reference="none"),
)

MERGE = Operator(
    name="merge",
    phase=2,
    template="merge.j2",
    summary="the primary parent with each locus taken from the gene plan's node (Phase 2)",
    agent=AgentText(
        summary="Strategy for merging sections of good solutions.",
        fallback="Combine the strongest sections of the parent solutions into one coherent program, "
                 "keeping the interfaces between sections consistent.",
        reliability="Make sure the combined sections agree on column names and variable names.",
        quality="Take each section from the parent where it is strongest.",
    ),
    offline=OfflineHandlers(competition=_OFFLINE + "merge", problem=_PROGRAM + "merge"),
    report=ReportStyle(colour="#8e24aa", marker="D", shape="diamond", symbol="◆", always_listed=True,
                       reference="gene_sources"),
)

MUTATE = Operator(
    name="mutate",
    phase=2,
    template="mutate.j2",
    summary="one change inside one section of a tournament-selected parent (Phase 2)",
    agent=AgentText(
        summary="Strategy for changing one section of a solution.",
        fallback="Change one section of the parent solution in a focused way that is likely to "
                 "improve the validation metric, leaving the rest intact.",
        reliability="Change one section at a time and keep its interface intact.",
        quality="Make the change bold enough to move the metric, not a cosmetic tweak.",
    ),
    offline=OfflineHandlers(competition=_OFFLINE + "mutate", problem=_PROGRAM + "mutate"),
    report=ReportStyle(colour="#00897b", marker="s", shape="square", symbol="■", always_listed=True,
                       reference="parent"),
)

DEBUG = Operator(
    name="debug",
    phase=2,
    template="debug.j2",
    summary="a node repairing a buggy leaf (the greedy policy only; debug attempts are not nodes)",
    agent=None,
    offline=OfflineHandlers(competition=_OFFLINE + "debug", problem=_PROGRAM + "debug"),
    report=ReportStyle(colour="#f4511e", marker="^", shape="triangle", symbol="▲", always_listed=False,
                       reference="parent"),
)

BUILTIN: tuple[Operator, ...] = (DRAFT, MERGE, MUTATE, DEBUG)
"""The built-in operations, in display order."""
