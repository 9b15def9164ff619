"""Where improvements come from (issue 17 item 2, swarm_evo/reporting/operation_stats.py): per operation,
the share of valid children beating their parent (a merge: its best gene source; drafts: none;
a child of a buggy parent: not compared), the mean direction-aware gain, the new bests, the
best node's lineage, and how run_report.json, the final report and the CLI show them; one real
kroA100 run whose run_report.json is recomputed here from its journal."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
import yaml
from factories import make_node

from swarm_evo.population.journal import Journal
from swarm_evo.reporting.operation_stats import (
    IMPROVEMENT_KEYS,
    best_lineage,
    improvement_line,
    improvement_rows,
    improvement_stats,
    improvements_by_operation,
    lineage_text,
    new_best_nodes,
    node_gain,
    reference_parent,
)
from swarm_evo.reporting.report import final_report_markdown, run_summary
from swarm_evo.reporting.run_report import build_run_report

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SEVEN = ("DATA", "MODEL", "LOSS", "OPTIMIZER", "REGULARIZATION", "INITIALIZATION", "TRAINING_TRICKS")


def merge_of(journal: Journal, metric: float, sources: dict[str, str], parent: str, **kw):
    """A merge node taking the loci of ``sources`` ({locus: node id}) with primary parent ``parent``."""
    return journal.append(make_node(metric, operation="merge", phase=2, parent_id=parent,
                                    metadata={"gene_sources": sources}, **kw))


def family(lower: bool = False) -> tuple[Journal, dict[str, object]]:
    """Drafts a (0.6), b (0.8); mutate m of a (0.7, improves); merge g1 of a (primary, 5 loci) and
    b (2 loci) at 0.75 (worse than b, its best source); merge g2 of a and m at 0.9 (better than
    both); a buggy mutate of b; a buggy draft x and a debug node of x at 0.95 (the new best).
    ``lower``: the same with negated metrics and lower is better (same ranking)."""
    s = -1 if lower else 1
    j = Journal()
    n: dict[str, object] = {}
    n["a"] = j.append(make_node(s * 0.6, lower_is_better=lower))
    n["b"] = j.append(make_node(s * 0.8, lower_is_better=lower))
    n["m"] = j.append(make_node(s * 0.7, lower_is_better=lower, operation="mutate", phase=2, parent_id=n["a"].id))
    n["g1"] = merge_of(j, s * 0.75, {**{l: n["a"].id for l in SEVEN[:5]}, **{l: n["b"].id for l in SEVEN[5:]}},
                       n["a"].id, lower_is_better=lower)
    n["g2"] = merge_of(j, s * 0.9, {**{l: n["m"].id for l in SEVEN[:4]}, **{l: n["a"].id for l in SEVEN[4:]}},
                       n["m"].id, lower_is_better=lower)
    n["bug"] = j.append(make_node(None, lower_is_better=lower, is_buggy=True, operation="mutate", phase=2,
                                  parent_id=n["b"].id, exc_type="KeyError"))
    n["x"] = j.append(make_node(s * 0.99, lower_is_better=lower, is_buggy=True))  # a metric, but the review flagged it
    n["d"] = j.append(make_node(s * 0.95, lower_is_better=lower, operation="debug", phase=2, parent_id=n["x"].id))
    return j, n


@pytest.mark.parametrize("lower", [False, True])
def test_reference_parents_and_gains(lower):
    j, n = family(lower)
    assert reference_parent(j, n["a"]) is None, "a draft has no parent"
    assert reference_parent(j, n["m"]).id == n["a"].id
    assert reference_parent(j, n["g1"]).id == n["b"].id, "a merge: its best gene source, not the primary parent"
    assert reference_parent(j, n["g2"]).id == n["m"].id
    assert reference_parent(j, n["d"]) is None, "a debug of a buggy node has no parent fitness"
    # gains are direction-aware and in the metric's units: positive = better in both directions
    assert node_gain(j, n["m"]) == pytest.approx(0.1)
    assert node_gain(j, n["g1"]) == pytest.approx(-0.05)
    assert node_gain(j, n["g2"]) == pytest.approx(0.2)
    assert node_gain(j, n["bug"]) is None and node_gain(j, n["d"]) is None and node_gain(j, n["a"]) is None


@pytest.mark.parametrize("lower", [False, True])
def test_per_operation_numbers(lower):
    j, _ = family(lower)
    stats = improvements_by_operation(j)
    assert list(stats) == ["draft", "merge", "mutate", "debug"]
    assert stats["draft"] == {"children": 3, "valid": 2, "compared": 0, "improved": 0,
                              "improvement_rate": None, "mean_gain": None, "new_best": 2}
    merge = stats["merge"]
    assert (merge["children"], merge["valid"], merge["compared"], merge["improved"]) == (2, 2, 2, 1)
    assert merge["improvement_rate"] == 0.5
    assert merge["mean_gain"] == pytest.approx((-0.05 + 0.2) / 2)
    assert merge["new_best"] == 1
    mutate = stats["mutate"]
    assert (mutate["children"], mutate["valid"], mutate["compared"], mutate["improved"]) == (2, 1, 1, 1)
    assert mutate["improvement_rate"] == 1.0 and mutate["mean_gain"] == pytest.approx(0.1)
    assert mutate["new_best"] == 0, "0.7 never beat draft b's 0.8"
    assert stats["debug"] == {"children": 1, "valid": 1, "compared": 0, "improved": 0,
                              "improvement_rate": None, "mean_gain": None, "new_best": 1}
    assert list(stats["merge"]) == list(IMPROVEMENT_KEYS)


def test_a_tie_is_no_improvement_and_an_unused_operation_is_empty():
    j = Journal()
    a = j.append(make_node(0.5))
    j.append(make_node(0.5, operation="mutate", phase=2, parent_id=a.id))
    s = improvement_stats(j, "mutate")
    assert (s["compared"], s["improved"], s["improvement_rate"], s["mean_gain"]) == (1, 0, 0.0, 0.0)
    assert improvement_stats(j, "merge") == {"children": 0, "valid": 0, "compared": 0, "improved": 0,
                                             "improvement_rate": None, "mean_gain": None, "new_best": 0}


def test_a_merge_of_missing_or_buggy_sources_is_not_compared():
    j = Journal()
    bad = j.append(make_node(None, is_buggy=True))
    g = merge_of(j, 0.7, {l: bad.id for l in SEVEN[:4]} | {l: "gone" for l in SEVEN[4:]}, bad.id)
    assert reference_parent(j, g) is None
    assert improvement_stats(j, "merge")["compared"] == 0


def test_new_bests_and_the_lineage():
    j, n = family()
    assert [x.id for x in new_best_nodes(j)] == [n["a"].id, n["b"].id, n["g2"].id, n["d"].id]
    lineage = best_lineage(j)
    assert lineage["operations"] == ["draft", "debug"], "the best is the debug node, its parent the buggy draft"
    assert lineage["complete"] is True
    assert [e["node_id"] for e in lineage["nodes"]] == [n["x"].id, n["d"].id]
    assert [e["step"] for e in lineage["nodes"]] == [7, 8]
    assert lineage_text(lineage) == "draft (step 7) → debug (step 8)"
    # through a merge: the primary parent (parent_id), the other sources listed
    j2 = Journal()
    a = j2.append(make_node(0.6))
    b = j2.append(make_node(0.8))
    m = j2.append(make_node(0.7, operation="mutate", phase=2, parent_id=a.id))
    g = merge_of(j2, 0.9, {**{l: m.id for l in SEVEN[:4]}, **{l: b.id for l in SEVEN[4:]}}, m.id)
    top = j2.append(make_node(0.95, operation="mutate", phase=2, parent_id=g.id))
    lineage = best_lineage(j2)
    assert lineage["operations"] == ["draft", "mutate", "merge", "mutate"]
    assert [e["node_id"] for e in lineage["nodes"]] == [a.id, m.id, g.id, top.id]
    assert lineage["nodes"][2]["gene_sources"] == [m.id, b.id]
    assert lineage["nodes"][2]["gain"] == pytest.approx(0.1), "over b, the best gene source"
    assert lineage["nodes"][0]["gain"] is None
    assert best_lineage(Journal()) is None and lineage_text(None) == "—"


def test_a_lineage_whose_parent_is_missing_is_incomplete():
    j = Journal()
    j.append(make_node(0.9, operation="mutate", phase=2, parent_id="f" * 32))
    lineage = best_lineage(j)
    assert lineage["operations"] == ["mutate"] and lineage["complete"] is False
    assert lineage_text(lineage).startswith("… → mutate")


def test_run_report_final_report_and_cli_line():
    j, n = family()
    report = build_run_report(j, [])
    for op in ("draft", "merge", "mutate", "debug"):
        assert {k: report["operations"][op][k] for k in IMPROVEMENT_KEYS} == improvement_stats(j, op)
    assert report["operations"]["mutate"]["count"] == 2, "the earlier keys stay"
    assert report["best_lineage"] == best_lineage(j)
    assert "best valid gene source" in report["improvement_basis"]
    json.dumps(report)
    summary = run_summary(j)
    md = final_report_markdown(summary)
    assert "## Where improvements come from" in md
    assert "| merge | 2 | 2 | 2 | 1 | 0.5 | +0.075 | 1 |" in md
    assert "| draft | 3 | 2 | 0 | 0 | — | — | 2 |" in md
    assert "**Best lineage:** draft (step 7) → debug (step 8)" in md
    line = improvement_line(summary["improvements"], summary["best_lineage"])
    assert line == "improved over parent: merge 1/2 (mean gain +0.075), mutate 1/1 (mean gain +0.1); " \
                   "best lineage: draft → debug"
    rows = improvement_rows(summary["improvements"])
    assert rows[1] == {"operation": "merge", "children": 2, "valid": 2, "compared": 2, "improved": 1,
                       "improvement_rate": 0.5, "mean_gain": 0.075, "new_best": 1}


# ---------------------------------------------------------------------------- a real run
def _recompute(journal: Journal) -> dict[str, dict]:
    """The per-operation numbers from the journal's raw fields, written out without the module."""
    valid = {n.id: n for n in journal.nodes if journal.is_valid(n)}

    def fit(n):
        return -n.metric_value if n.lower_is_better else n.metric_value

    out: dict[str, dict] = {}
    for op in dict.fromkeys(["draft", "merge", "mutate", *(n.operation for n in journal.nodes)]):
        kids = [n for n in journal.nodes if n.operation == op]
        gains = []
        for n in kids:
            if n.id not in valid or op == "draft":
                continue
            ids = list((n.metadata.get("gene_sources") or {}).values()) + [n.parent_id] if op == "merge" \
                else [n.parent_id]
            parents = [fit(valid[i]) for i in ids if i in valid]
            if parents:
                gains.append(fit(n) - max(parents))
        out[op] = {"children": len(kids), "valid": sum(n.id in valid for n in kids), "compared": len(gains),
                   "improved": sum(g > 0 for g in gains),
                   "improvement_rate": sum(g > 0 for g in gains) / len(gains) if gains else None,
                   "mean_gain": statistics.fmean(gains) if gains else None}
    return out


@pytest.mark.slow
def test_a_tsp_run_report_matches_its_journal(prefect_server, tmp_path, capsys):
    """``swarm-evo run --problem tsp --instance berlin52 --max-steps 12`` (offline model, Phase 2
    from 4 valid nodes so merges and mutates both happen): run_report.json's per-operation
    numbers equal the ones recomputed from journal.json; report.md and the CLI show them."""
    from swarm_evo.cli.commands import main
    from swarm_evo.evaluation import load_problem

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 2, "phase1_target_nodes": 4,
                                                 "parallel_workers": 1}}))
    run_dir = tmp_path / "run"
    code = main(["run", "--problem", "tsp", "--instance", "berlin52", "--data-dir", str(SHARED_DATA),
                 "--max-steps", "12", "--model", "offline", "--run-dir", str(run_dir), "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "improved over parent:" in out and "best lineage: draft" in out

    problem = load_problem("tsp", SHARED_DATA, "berlin52")
    journal = Journal.load(run_dir / "journal.json", loci=problem.loci, required=problem.required_loci)
    report = json.loads((run_dir / "run_report.json").read_text())
    expected = _recompute(journal)
    assert set(report["operations"]) == set(expected)
    for op, numbers in expected.items():
        got = report["operations"][op]
        for key, value in numbers.items():
            assert got[key] == (pytest.approx(value) if isinstance(value, float) else value), (op, key)
    assert expected["mutate"]["children"] + expected["merge"]["children"] > 0, "Phase 2 ran"
    assert sum(report["operations"][op]["new_best"] for op in expected) == len(new_best_nodes(journal))

    lineage = report["best_lineage"]
    assert lineage["nodes"][-1]["node_id"] == report["best"]["node_id"]
    assert lineage["operations"][0] == "draft" and lineage["complete"] is True
    for child, parent in zip(lineage["nodes"][1:], lineage["nodes"]):
        assert journal.get(child["node_id"]).parent_id == parent["node_id"]
    markdown = (run_dir / "report.md").read_text()
    assert "## Where improvements come from" in markdown and "**Best lineage:** draft (step" in markdown
