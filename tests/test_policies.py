"""Search policies for ablations (SPEC §12; issue 6): the greedy (AIDE search_policy) and
random decisions on hand-built journals, and one real flow run per policy with the offline
model on sklearn-breast-cancer (same budget, same step machinery, graded)."""

from __future__ import annotations

import json
import random

import pytest
import yaml
from factories import make_node

from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.population.journal import Journal
from swarm_evo.search.policies import (
    GREEDY_MAX_DEBUG_DEPTH,
    GREEDY_NUM_DRAFTS,
    Action,
    debug_depth,
    debuggable_nodes,
    drafts_due,
    greedy_action,
)


class FixedRng(random.Random):
    """``random()`` returns ``value``; ``choice`` picks ``pick`` (an index); records the draws."""

    def __init__(self, value: float, pick: int = 0) -> None:
        super().__init__(0)
        self.value, self.pick, self.draws = value, pick, 0

    def random(self) -> float:
        self.draws += 1
        return self.value

    def choice(self, seq):
        return seq[self.pick]


def _journal(*nodes) -> Journal:
    journal = Journal()
    for n in nodes:
        journal.append(n)
    return journal


def _drafts(*metrics, lower_is_better=False):
    """Drafts with these metrics; None makes a buggy (dead) draft."""
    return [
        make_node(metric=m, is_buggy=m is None, dead=m is None, lower_is_better=lower_is_better)
        for m in metrics
    ]


# --------------------------------------------------------------------------- greedy decisions
def test_greedy_drafts_until_five_drafts_without_drawing():
    rng = FixedRng(0.0)
    for k in range(GREEDY_NUM_DRAFTS):
        assert greedy_action(_journal(*_drafts(*[0.5] * k)), rng) == Action("draft")
    assert rng.draws == 0, "AIDE draws the debug coin only after the drafting stage"


def test_greedy_improves_the_best_valid_node_direction_aware():
    nodes = _drafts(0.30, 0.10, None, 0.20, 0.25, lower_is_better=True)
    journal = _journal(*nodes)
    action = greedy_action(journal, FixedRng(0.9))  # no debug this time
    assert action == Action("improve", nodes[1].id), "lower is better: 0.10 is the best"
    higher = _journal(*_drafts(0.30, 0.10, None, 0.20, 0.25))
    assert greedy_action(higher, FixedRng(0.9)).parent_id == higher.nodes[0].id


def test_greedy_debugs_a_buggy_leaf_with_probability_half():
    nodes = _drafts(0.5, None, 0.6, None, 0.7)
    journal = _journal(*nodes)
    assert greedy_action(journal, FixedRng(0.49, pick=1)) == Action("debug", nodes[3].id, 1)
    assert greedy_action(journal, FixedRng(0.5)).kind == "improve", "0.5 is not below debug_prob"
    # over many seeds about half the steps debug
    kinds = [greedy_action(journal, random.Random(seed)).kind for seed in range(400)]
    assert 0.4 < kinds.count("debug") / len(kinds) < 0.6
    assert set(kinds) == {"debug", "improve"}


def test_greedy_falls_back_to_improve_then_draft():
    valid = _journal(*_drafts(0.5, 0.6, 0.7, 0.8, 0.9))
    assert greedy_action(valid, FixedRng(0.0)) == Action("improve", valid.nodes[4].id), "no buggy leaf"
    # every node buggy, but none debuggable (no code: generation failures) and none valid
    failed = [make_node(metric=None, is_buggy=True, dead=True, code="") for _ in range(5)]
    assert greedy_action(_journal(*failed), FixedRng(0.0)) == Action("draft")
    assert greedy_action(_journal(*failed), FixedRng(0.9)) == Action("draft")


def test_buggy_leaf_excludes_parents_claimed_and_deep_chains():
    d = _drafts(0.5, None, None, 0.6, 0.7)
    # d[1] already has a debug child, so it is no leaf
    fix1 = make_node(metric=None, is_buggy=True, dead=True, operation="debug", phase=2, parent_id=d[1].id)
    journal = _journal(*d, fix1)
    leaves = debuggable_nodes(journal)
    assert [n.id for n in leaves] == [d[2].id, fix1.id]
    assert debug_depth(journal, fix1) == 1 and debug_depth(journal, d[2]) == 0
    assert [n.id for n in debuggable_nodes(journal, exclude={d[2].id})] == [fix1.id]
    # a chain of max_debug_depth debug nodes is not debugged further (debug depth <= 3)
    chain = [fix1]
    for _ in range(GREEDY_MAX_DEBUG_DEPTH - 1):
        chain.append(make_node(metric=None, is_buggy=True, dead=True, operation="debug", phase=2,
                               parent_id=chain[-1].id))
        journal.append(chain[-1])
    assert debug_depth(journal, chain[-1]) == GREEDY_MAX_DEBUG_DEPTH
    assert chain[-1].id not in {n.id for n in debuggable_nodes(journal)}
    assert debug_depth(journal, chain[-2]) == GREEDY_MAX_DEBUG_DEPTH - 1
    action = greedy_action(journal, FixedRng(0.0, pick=0), exclude={d[2].id})
    assert action == Action("improve", d[4].id), "only the claimed leaf and a too-deep chain are buggy leaves"
    # an improve child makes a buggy node a non-leaf as well; a valid node is never a leaf to debug
    improve = make_node(metric=0.8, operation="mutate", phase=2, parent_id=d[2].id)
    journal.append(improve)
    assert debuggable_nodes(journal) == []


def test_drafts_due_per_policy():
    journal = _journal(*_drafts(0.5, None, 0.6))
    assert drafts_due(journal, "greedy", 10) == GREEDY_NUM_DRAFTS - 3
    assert drafts_due(journal, "greedy", 1) == 1
    assert drafts_due(_journal(*_drafts(*[0.5] * 6)), "greedy", 10) == 0
    assert drafts_due(journal, "random", 7) == 7
    with pytest.raises(ValueError, match="two_phase"):
        drafts_due(journal, "two_phase", 3)


def test_policy_config_key():
    assert RunConfig().search.policy == "two_phase"
    assert RunConfig().with_overrides({"search.policy": "greedy"}).search.policy == "greedy"
    with pytest.raises(ConfigError, match="search.policy"):
        RunConfig().with_overrides({"search.policy": "beam"})


def test_cli_rejects_an_unknown_policy(capsys):
    from swarm_evo.cli.commands import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--competition-id", "x", "--data-dir", "d", "--policy", "beam"])
    assert exc.value.code == 2
    assert "--policy" in capsys.readouterr().err


# --------------------------------------------------------------------------- real flow runs
MAX_STEPS = {"greedy": 7, "random": 3}
"""Budgets: greedy drafts 5 nodes before it improves or debugs; random only drafts."""


@pytest.fixture(scope="module")
def policy_runs(prefect_server, tmp_path_factory):
    """One offline run per policy on sklearn-breast-cancer, 2 workers, 3 steps per epoch: greedy
    7 nodes (its drafts take two epochs) with a higher fault rate and no inner debug attempts, so
    buggy leaves exist for it to debug; random 3 nodes."""
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.competition import prepare_competition

    tmp = tmp_path_factory.mktemp("policies")
    data = tmp / "data"
    prepare_competition("sklearn-breast-cancer", None, data)
    runs = {}
    for policy, search, model in (
        ("greedy", {"steps_per_epoch": 3, "debug_max_attempts": 0}, {"fault_rate": 0.5}),
        ("random", {"steps_per_epoch": 3}, {}),
    ):
        config = tmp / f"{policy}.yaml"
        # programs limited to 19 s: the offline model writes quick-tier programs (the policies are under test)
        config.write_text(yaml.safe_dump({"search": search, "model": model, "sandbox": {"exec_timeout": 19}}))
        run_dir = tmp / f"run-{policy}"
        summary = two_phase_evo(
            competition_id="sklearn-breast-cancer", data_dir=str(data), run_dir=str(run_dir), model="offline",
            max_steps=MAX_STEPS[policy], seed=3, parallel_workers=2, config_path=str(config), policy=policy,
        )
        runs[policy] = (run_dir, summary, json.loads((run_dir / "journal.json").read_text()))
    return runs


def _check_common(run_dir, summary, journal, policy):
    nodes = journal["nodes"]
    assert len(nodes) == MAX_STEPS[policy], "node count = budget"
    assert [n["step"] for n in nodes] == list(range(1, MAX_STEPS[policy] + 1))
    assert journal["info"]["policy"] == policy and journal["info"]["config"]["search"]["policy"] == policy
    assert summary["policy"] == policy and summary["nodes"] == MAX_STEPS[policy]
    report = json.loads((run_dir / "grade_report.json").read_text())
    assert report["competition_id"] == "sklearn-breast-cancer"
    assert report["valid_submission"] is True and report["score"] == summary["grade_report"]["score"]


def test_greedy_run_drafts_five_then_improves_and_debugs(policy_runs):
    run_dir, summary, journal = policy_runs["greedy"]
    _check_common(run_dir, summary, journal, "greedy")
    nodes = journal["nodes"]
    by_id = {n["id"]: n for n in nodes}
    first, rest = nodes[:GREEDY_NUM_DRAFTS], nodes[GREEDY_NUM_DRAFTS:]
    assert all(n["operation"] == "draft" and n["parent_id"] is None and n["phase"] == 1 for n in first)
    assert rest and all(n["operation"] in ("mutate", "debug") and n["phase"] == 2 for n in rest)
    for n in rest:
        parent = by_id[n["parent_id"]]
        assert parent["step"] < n["step"]
        assert n["metadata"]["policy_action"] == ("improve" if n["operation"] == "mutate" else "debug")
        if n["operation"] == "debug":
            assert parent["is_buggy"] and n["agent_id"] is None and n["metadata"]["debug_depth"] >= 1
            assert (run_dir / "nodes" / n["id"] / "prompt-debug.md").exists()
        else:
            assert not parent["is_buggy"] and n["metadata"]["target_locus"]
    assert {n["operation"] for n in rest} == {"mutate", "debug"}, "seed 3 exercises both actions"
    debug_parents = [n["parent_id"] for n in rest if n["operation"] == "debug"]
    assert len(debug_parents) == len(set(debug_parents)), "a buggy leaf is debugged once"
    run_report = json.loads((run_dir / "run_report.json").read_text())
    assert run_report["operations"]["debug"]["count"] == sum(n["operation"] == "debug" for n in nodes)


def test_random_run_only_drafts(policy_runs):
    run_dir, summary, journal = policy_runs["random"]
    _check_common(run_dir, summary, journal, "random")
    assert all(n["operation"] == "draft" and n["parent_id"] is None and n["phase"] == 1 for n in journal["nodes"])
    assert summary["phase2_nodes"] == 0
    run_report = json.loads((run_dir / "run_report.json").read_text())
    assert set(run_report["operations"]) == {"draft", "merge", "mutate"}


def test_a_run_directory_keeps_its_policy(policy_runs):
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.run.session import RunDirectoryError

    run_dir, _, journal = policy_runs["random"]
    with pytest.raises(RunDirectoryError, match="random run"):
        two_phase_evo(competition_id="sklearn-breast-cancer", data_dir=journal["info"]["data_dir"],
                      run_dir=str(run_dir), model="offline", max_steps=MAX_STEPS["random"] + 1, seed=3, policy="greedy")
