"""Node: one candidate program of a run and its outcome (SPEC §5, seed 000 §9).

A node is created by one *operation* (:mod:`swarm_evo.operators`: Phase 1 drafts, Phase 2
merges and mutates; under the ``greedy`` search policy, SPEC §12, also AIDE's debug node, a new
program fixing a buggy leaf), executed in the sandbox, possibly repaired by a chain of debug attempts, reviewed, and
appended to the journal.
The journal assigns ``step`` at append time; nothing else may set it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from swarm_evo.operators import registry


READ_ANY_OPERATION = {"any_operation": True}
"""Validation context under which a node of an operation this process has not registered is read as
it is (:meth:`swarm_evo.population.journal.Journal.load`: a journal written by a process that had
registered a plug-in operation stays readable, issue 53 item 9; reports show such nodes in
:data:`swarm_evo.operators.registry.UNREGISTERED_STYLE`)."""


def _known(name: str, info: ValidationInfo) -> str:
    """``name`` when an operation of that name is registered (or the context is
    :data:`READ_ANY_OPERATION`), else a ValueError naming the known ones."""
    if info.context and info.context.get("any_operation"):
        return name
    try:
        registry.get(name)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    return name


Operation = Annotated[str, AfterValidator(_known)]
"""The name of a registered operation (:mod:`swarm_evo.operators.registry`): draft, merge, mutate
(SPEC §6), greedy's ``debug`` (a node repairing a buggy leaf). Inner debug attempts (the chain)
are never nodes."""


def utc_now() -> str:
    """Current UTC time as an ISO-8601 string (seconds precision)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_node_id() -> str:
    """A fresh node id: 32 lowercase hex characters (uuid4)."""
    return uuid.uuid4().hex


class LLMUsage(BaseModel):
    """Token counts, cost (USD, None when the model has no price) and wall time (s) of LLM calls."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    calls: int = 0
    seconds: float = 0.0

    def add(self, other: "LLMUsage") -> "LLMUsage":
        """Return the sum of two usages. The cost is unknown (None) when either side made calls
        without a known cost (issue 31: an unpriced call never counts as free), None also when
        neither side has a cost, else the sum."""
        def unknown(usage: LLMUsage) -> bool:
            return usage.cost is None and usage.calls > 0

        cost = None
        if not (unknown(self) or unknown(other)) and (self.cost is not None or other.cost is not None):
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return LLMUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=cost,
            calls=self.calls + other.calls,
            seconds=self.seconds + other.seconds,
        )


class Node(BaseModel):
    """One candidate program and its outcome.

    Field names follow the seeds (SPEC §5). ``metric_value`` is the validation metric parsed
    from the program's stdout, in the competition's own direction (``lower_is_better``);
    ``printed_fitness`` turns it into a maximised number. ``agent_id`` names the agent whose role and
    strategy texts wrote the prompt (SPEC §9; None for nodes of runs before agents and for
    greedy ``debug`` nodes, whose debug.j2 prompt has no agent). ``metadata`` holds ``gene_sources``
    ({locus: node_id}, merges), ``gene_plan`` (merges), ``target_locus`` (mutates), ``policy_action`` and
    ``debug_depth`` (greedy policy, :mod:`swarm_evo.search.policies`),
    ``debug_history`` ([{attempt, code, exc_type, term_out}]), ``timings`` and review details.
    ``hidden_score`` (issue 41) is the host's grade of the rows of the run's hidden split that
    the program predicted as test rows, in the metric's own units and direction (None when the
    run has no hidden split or the node's submission was not valid): when set, the search ranks
    the node by it (:mod:`swarm_evo.population.ranking`); ``metric_value`` stays the program's
    own signal.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_node_id)
    step: int | None = None
    parent_id: str | None = None
    operation: Operation
    phase: Literal[1, 2]
    epoch: int = 0
    plan: str = ""
    code: str = ""
    genes: dict[str, str] = Field(default_factory=dict)
    exc_type: str | None = None
    exc_info: str | None = None
    term_out: str = ""
    exec_time: float | None = None
    metric_value: float | None = None
    hidden_score: float | None = None
    lower_is_better: bool = False
    is_buggy: bool = True
    dead: bool = False
    debug_attempts: int = 0
    approach_tag: str | None = None
    analysis: str | None = None
    agent_id: str | None = None
    llm_usage: LLMUsage = Field(default_factory=LLMUsage)
    created_at: str = Field(default_factory=utc_now)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def printed_fitness(self) -> float | None:
        """Direction-aware printed fitness: the metric the program printed, negated when lower is
        better; None if no metric. Not what the search ranks by: that is the selection fitness,
        :func:`swarm_evo.population.ranking.fitness` (the hidden score where there is one)."""
        if self.metric_value is None:
            return None
        return -self.metric_value if self.lower_is_better else self.metric_value

    @property
    def hidden_fitness(self) -> float | None:
        """Direction-aware hidden score (negated when lower is better); None without one."""
        if self.hidden_score is None:
            return None
        return -self.hidden_score if self.lower_is_better else self.hidden_score

    @property
    def gene_sources(self) -> dict[str, str]:
        """{locus: source node id} for merge nodes, else an empty dict."""
        return dict(self.metadata.get("gene_sources") or {})
