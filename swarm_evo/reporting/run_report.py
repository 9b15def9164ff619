"""Run report: per-operation outcome and improvement rates, the best node's lineage, steps per
agent and Phase 2 start (SPEC §6, §9, §12; issue 17 item 2).

A view of the journal (SPEC §5: artifacts are views, the journal is the store), computed
without Prefect so the flows, the CLI and tests share it. Every rate below is a share in
[0, 1] of a stated denominator and is None when that denominator is 0; every mean is None
when it averages nothing. Nothing here rounds except :func:`run_report_rows` and
:func:`agent_rows` (4 digits, for display).

Terms: a *node* is one journal node (one step; debug attempts are not nodes, SPEC §6 J);
the nodes of an operation are those with ``node.operation == operation``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from swarm_evo.operators import registry
from swarm_evo.population import ranking
from swarm_evo.population.journal import Journal, atomic_write_text
from swarm_evo.population.node import Node
from swarm_evo.reporting.slot_timeline import lanes_report
from swarm_evo.reporting.fitness_report import fitness_summary, score_name
from swarm_evo.reporting.operation_stats import BASIS, best_lineage, improvement_stats, operations_of

NO_AGENT = "none"
"""Key of ``steps_per_agent`` for nodes whose ``agent_id`` is None (only present if any exist)."""

STAT_KEYS = (
    "count",
    "buggy_rate",
    "dead_rate",
    "debug_fix_rate_1",
    "debug_fix_rate_2",
    "mean_fitness",
    "mean_metric",
    "scored",
)
"""Keys of :func:`operation_stats`, in display order."""

ROUND_DIGITS = 4
"""Digits kept by the row functions for the Prefect table artifacts."""


# --------------------------------------------------------------------------- helpers
def _share(numerator: int, denominator: int) -> float | None:
    """``numerator / denominator``, or None when the denominator is 0."""
    return numerator / denominator if denominator else None


def _mean(values: list[float]) -> float | None:
    """Arithmetic mean, or None for an empty list."""
    return statistics.fmean(values) if values else None


def _round(value: Any) -> Any:
    """Floats rounded to :data:`ROUND_DIGITS`; ints, None and everything else unchanged."""
    if isinstance(value, float):
        return round(value, ROUND_DIGITS)
    return value


def attempt_succeeded(node: Node, attempt: int) -> bool | None:
    """Whether execution ``attempt`` of ``node`` succeeded (0 = the operation's own run, n = debug attempt n).

    Source of truth is ``node.metadata["debug_history"]``, written by
    :func:`swarm_evo.search.debug_chain.run_debug_chain`: when the first execution fails the history
    holds one entry per execution, attempts ``0 .. node.debug_attempts``, and an entry
    succeeded when its ``problems`` list is empty (the chain's own criterion,
    ``Attempt.failed``). For entries without ``problems`` (or nodes without history) the
    outcome follows from the chain's rules: it stops at the first success, so attempt ``k``
    succeeded iff ``k == node.debug_attempts`` and the node is not dead.

    Returns None when the node never reached that attempt (``attempt > node.debug_attempts``).
    """
    if attempt > node.debug_attempts:
        return None
    for entry in node.metadata.get("debug_history") or []:
        if isinstance(entry, dict) and entry.get("attempt") == attempt and "problems" in entry:
            return not entry["problems"]
    return attempt == node.debug_attempts and not node.dead


def _scored(node: Node) -> bool:
    """In the mean-fitness denominator: not buggy and a parsed metric (hence a fitness)."""
    return not node.is_buggy and ranking.fitness(node) is not None


# --------------------------------------------------------------------------- per operation
def operation_stats(journal: Journal, operation: str) -> dict[str, Any]:
    """Outcome statistics of one operation's nodes.

    With N = the journal nodes whose ``operation`` is ``operation``:

    * ``count`` — N.
    * ``buggy_rate`` — (nodes with ``is_buggy``) / N; None when N = 0. Dead nodes are buggy too.
    * ``dead_rate`` — (nodes with ``dead``) / N; None when N = 0. A node is dead when its last
      execution still failed (after the debug chain, or with no chain at all).
    * ``debug_fix_rate_1`` — among nodes whose first execution failed and got a debug attempt
      (``debug_attempts >= 1``), the share whose debug attempt 1 succeeded (see
      :func:`attempt_succeeded`); None when no node got a debug attempt. Nodes with
      ``debug_attempts == 0`` — first-try successes, or failures with ``debug_max_attempts``
      0 or a failed generation — are in neither debug denominator.
    * ``debug_fix_rate_2`` — among nodes that reached debug attempt 2 (``debug_attempts >= 2``,
      i.e. attempt 1 failed too), the share whose attempt 2 succeeded; None when none did.
    * ``scored`` — nodes that are not buggy and have a metric: the mean denominators below.
    * ``mean_fitness`` — mean of the ranking fitness (:func:`swarm_evo.population.ranking.fitness`) over the scored nodes; None when there are
      none. Fitness is direction-aware: the metric, *negated* when lower is better
      (``lower_is_better``), so e.g. an RMSE competition gives negative numbers and higher is
      always better.
    * ``mean_metric`` — mean of the plain ``metric_value`` over the same nodes (the
      competition's own direction and sign); None when there are none.

    An unknown or unused operation gives ``count`` 0 and None for every rate and mean.
    """
    nodes = [n for n in journal.nodes if n.operation == operation]
    count = len(nodes)
    debugged = [n for n in nodes if n.debug_attempts >= 1]
    reached_2 = [n for n in nodes if n.debug_attempts >= 2]
    scored = [n for n in nodes if _scored(n)]
    return {
        "count": count,
        "buggy_rate": _share(sum(1 for n in nodes if n.is_buggy), count),
        "dead_rate": _share(sum(1 for n in nodes if n.dead), count),
        "debug_fix_rate_1": _share(sum(1 for n in debugged if attempt_succeeded(n, 1)), len(debugged)),
        "debug_fix_rate_2": _share(sum(1 for n in reached_2 if attempt_succeeded(n, 2)), len(reached_2)),
        "mean_fitness": _mean([ranking.fitness(n) for n in scored]),  # type: ignore[misc]
        "mean_metric": _mean([n.metric_value for n in scored]),  # type: ignore[misc]
        "scored": len(scored),
    }


# --------------------------------------------------------------------------- per agent
def _node_quality(node: Node) -> float | None:
    """The dispatcher's quality of a node (SPEC §9) when the node carries it in
    ``metadata["quality"]`` as a number, else None."""
    q = node.metadata.get("quality")
    if isinstance(q, bool) or not isinstance(q, (int, float)):
        return None
    return float(q)


def _agent_stats(journal: Journal, agent_ids: list[str] | None) -> dict[str, dict[str, Any]]:
    """{agent key: {steps, share, valid, mean_quality}}; see :func:`build_run_report`."""
    nodes = journal.nodes
    keys: list[str] = list(dict.fromkeys(agent_ids or []))
    for n in nodes:
        if n.agent_id is not None and n.agent_id not in keys:
            keys.append(n.agent_id)
    if any(n.agent_id is None for n in nodes):
        keys.append(NO_AGENT)
    stats: dict[str, dict[str, Any]] = {}
    for key in keys:
        own = [n for n in nodes if (n.agent_id if n.agent_id is not None else NO_AGENT) == key]
        qualities = [q for q in (_node_quality(n) for n in own) if q is not None]
        stats[key] = {
            "steps": len(own),
            "share": _share(len(own), len(nodes)),
            "valid": sum(1 for n in own if journal.is_valid(n)),
            "mean_quality": _mean(qualities),
        }
    return stats


# --------------------------------------------------------------------------- the report
def build_run_report(
    journal: Journal, agent_evolutions: list[dict], agent_ids: list[str] | None = None
) -> dict[str, Any]:
    """The run report (JSON-serialisable dict).

    Keys:

    * ``nodes`` — number of journal nodes (= steps).
    * ``valid`` — size of the journal's valid pool (:meth:`Journal.is_valid`: not buggy, not
      dead, a fitness, genes pass ``validate_genes``).
    * ``dead`` — nodes with ``dead``.
    * ``buggy`` — nodes with ``is_buggy``.
    * ``best`` — the journal's best node (:meth:`Journal.best_node`) as
      ``{node_id, step, operation, agent_id, score, metric}`` (score =
      :func:`swarm_evo.population.ranking.score`, what the run selects on; metric = plain
      ``metric_value``, the printed one), or None without a valid node.
    * ``score_name`` — what ``score`` is, by name (``hidden-split score`` or ``validation
      metric``: :func:`swarm_evo.reporting.fitness_report.score_name`).
    * ``operations`` — ``{operation: operation_stats(...) | improvement_stats(...)}``: the
      operations every report lists (:func:`swarm_evo.operators.registry.listed_operations`:
      draft, merge, mutate), always present (count 0 and None rates for an unused operation);
      then the others some node has, such as greedy's ``debug``
      (:func:`swarm_evo.reporting.operation_stats.operations_of`). The improvement
      keys (:func:`swarm_evo.reporting.operation_stats.improvement_stats`: ``children``, ``valid``,
      ``compared``, ``improved``, ``improvement_rate``, ``mean_gain``, ``new_best``) say how
      often a valid child beat its parent's fitness (a merge: its best gene source's; drafts:
      None) and by how much, direction-aware.
    * ``improvement_basis`` — :data:`swarm_evo.reporting.operation_stats.BASIS`, the rule in one sentence.
    * ``best_lineage`` — :func:`swarm_evo.reporting.operation_stats.best_lineage`: the operations and
      nodes on the ``parent_id`` path from a draft to the best node; None without a valid node.
    * ``steps_per_agent`` — ``{agent_id: nodes with that agent_id}``. Agents of ``agent_ids``
      come first, in that order, with 0 when they never got a step; agents seen only in the
      journal follow in order of first appearance; nodes with ``agent_id`` None are counted
      under ``"none"`` (:data:`NO_AGENT`), a key present only when such nodes exist.
    * ``agents`` — per key of ``steps_per_agent``: ``steps``; ``share`` = steps / ``nodes``
      (None when the journal is empty); ``valid`` = that agent's nodes in the valid pool;
      ``mean_quality`` = mean of the nodes' dispatcher quality (SPEC §9: percentile rank of the
      fitness among valid nodes, 0 when buggy) where nodes carry it in ``metadata["quality"]``,
      else None.
    * ``max_agent_share`` — the largest ``share`` of one real agent (the ``"none"`` bucket is
      not an agent); None when there is no agent or no node.
    * ``agent_evolutions`` — the list passed in, unchanged (one record per agent-evolution
      event, SPEC §9).
    * ``phase2_started_at_step`` — the smallest ``step`` among Phase 2 nodes; None when
      Phase 2 never ran.
    * ``lanes`` — the scheduler's lanes (issue 52): occupancy, the model's share of the busy
      time, staleness, steps per lane (:func:`swarm_evo.reporting.slot_timeline.lanes_report`);
      None for a journal from before issue 52.
    * ``fitness`` — what the run selected on and how well the printed metric ranks the nodes
      against the hidden score (:func:`swarm_evo.reporting.fitness_report.fitness_summary`);
      ``best.hidden_score`` is the best node's hidden score in a run with a hidden split.
    """
    nodes = journal.nodes
    best = journal.best_node()
    agents = _agent_stats(journal, agent_ids)
    real_shares = [a["share"] for key, a in agents.items() if key != NO_AGENT and a["share"] is not None]
    phase2_steps = [n.step for n in nodes if n.phase == 2 and n.step is not None]
    return {
        "nodes": len(nodes),
        "valid": len(journal.valid_pool()),
        "dead": sum(1 for n in nodes if n.dead),
        "buggy": sum(1 for n in nodes if n.is_buggy),
        "best": None
        if best is None
        else {
            "node_id": best.id,
            "step": best.step,
            "operation": best.operation,
            "agent_id": best.agent_id,
            "score": ranking.score(best),
            "metric": best.metric_value,
            **({"hidden_score": best.hidden_score} if best.hidden_score is not None else {}),
        },
        "score_name": score_name(journal),
        "fitness": fitness_summary(journal),
        "operations": {op: {**operation_stats(journal, op), **improvement_stats(journal, op)}
                       for op in operations_of(journal)},
        "improvement_basis": BASIS,
        "best_lineage": best_lineage(journal),
        "steps_per_agent": {key: a["steps"] for key, a in agents.items()},
        "agents": agents,
        "max_agent_share": max(real_shares) if real_shares else None,
        "agent_evolutions": agent_evolutions,
        "phase2_started_at_step": min(phase2_steps) if phase2_steps else None,
        "lanes": lanes_report(nodes),
    }


def run_report_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for a Prefect table artifact: one per operation (the listed ones,
    :func:`swarm_evo.operators.registry.listed_operations`, then the others the report has),
    each ``{"operation": op}`` plus the :data:`STAT_KEYS` of :func:`operation_stats`, floats
    rounded to 4 digits, None kept as None."""
    listed = registry.listed_operations()
    rows = []
    for op in listed + tuple(op for op in report["operations"] if op not in listed):
        stats = report["operations"].get(op) or {}
        rows.append({"operation": op, **{k: _round(stats.get(k)) for k in STAT_KEYS}})
    return rows


def agent_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for a Prefect table artifact: one per key of ``report["steps_per_agent"]`` (same
    order), ``{agent_id, steps, share, valid, mean_quality}`` as defined in
    :func:`build_run_report`, floats rounded to 4 digits, None kept as None."""
    agents = report.get("agents") or {}
    rows = []
    for key, steps in report["steps_per_agent"].items():
        a = agents.get(key) or {}
        rows.append(
            {
                "agent_id": key,
                "steps": steps,
                "share": _round(a.get("share")),
                "valid": a.get("valid"),
                "mean_quality": _round(a.get("mean_quality")),
            }
        )
    return rows


def write_run_report(path: Path, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON (indent 2, keys in insertion order, None as null) atomically
    via :func:`swarm_evo.population.journal.atomic_write_text`. Values JSON cannot encode (e.g. a
    datetime inside an agent-evolution record) are written as their ``str()``."""
    atomic_write_text(Path(path), json.dumps(report, indent=2, sort_keys=False, default=str) + "\n")
