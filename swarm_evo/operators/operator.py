"""One search operation's record (issue 43): what every part of the code needs to know of it.

The fields are plain data (strings, numbers, tuples), so the registry sits below every unit
that reads it; the offline model's handlers are named by ``"module:function"`` and resolved
by the offline model itself (:func:`OfflineHandlers.resolve`), or given as callables.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from typing import Callable, Literal

Shape = Literal["circle", "square", "diamond", "triangle"]
Reference = Literal["none", "parent", "gene_sources"]


@dataclass(frozen=True)
class AgentText:
    """The operation's strategy text of every agent (SPEC §9): ``prompt_templates/agents/<name>.md``
    (problems: ``agents/program/<name>.md``) is the starting text; ``summary`` describes it in
    the ``submit_agent_texts`` tool of agent evolution; ``fallback``, ``reliability`` and
    ``quality`` are the offline model's words for it (a text when neither agent has one, and
    the hint of a "reliability first" and a "push for quality" lesson)."""

    summary: str
    fallback: str
    reliability: str
    quality: str


@dataclass(frozen=True)
class OfflineHandlers:
    """The offline model's answer to a call of this purpose, as ``"module:function"`` or a callable.

    ``competition``: ``handler(ctx, info, rng, work) -> reply text`` (``info``: the
    :class:`~swarm_evo.llm.offline.dataset.DatasetInfo`, None without ``competition.public_dir``;
    ``work``: the effort tier read from the prompt). ``problem``: ``handler(ctx, rng) -> (plan,
    code)`` for a CTX with a ``problem`` key (:mod:`swarm_evo.llm.offline.program`).
    """

    competition: str | Callable
    problem: str | Callable

    @staticmethod
    def resolve(handler: str | Callable) -> Callable:
        """The callable ``handler`` names (``pkgutil.resolve_name``), or ``handler`` itself.

        Raises:
            ImportError, AttributeError: the module or function does not exist.
        """
        return pkgutil.resolve_name(handler) if isinstance(handler, str) else handler


@dataclass(frozen=True)
class ReportStyle:
    """How reports and pictures show the operation's nodes.

    ``colour`` (hex) and ``marker`` (matplotlib) in the best-fitness chart; ``shape`` and
    ``symbol`` (the legend's character) in the evolution tree; ``always_listed``: the run
    report's tables list it even when no node has it (else only when some node has it);
    ``reference``: the node a child must beat to count as an improvement
    (:func:`swarm_evo.reporting.operation_stats.reference_parent`): ``none`` (never compared),
    ``parent`` (``parent_id``) or ``gene_sources`` (the best valid node it took genes from)."""

    colour: str
    marker: str
    shape: Shape
    symbol: str
    always_listed: bool
    reference: Reference


@dataclass(frozen=True)
class Operator:
    """A search operation.

    Attributes:
        name: ``node.operation`` of the nodes it makes, the offline CTX's ``purpose`` and the
            agent text's key (a lowercase identifier).
        phase: the phase its nodes belong to (1 or 2).
        template: its prompt template, a file under ``prompt_templates/``.
        agent: its agent text; None when no agent writes it (the dispatcher and the experience
            pool do not learn from it: greedy's debug).
        offline: the offline model's handlers.
        report: its report style.
        summary: one line for people (docs, ``--help``).
    """

    name: str
    phase: int
    template: str
    agent: AgentText | None
    offline: OfflineHandlers
    report: ReportStyle
    summary: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"operation name {self.name!r}: use a lowercase identifier")
        if self.phase not in (1, 2):
            raise ValueError(f"operation {self.name}: phase must be 1 or 2 (got {self.phase})")
