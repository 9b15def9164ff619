"""The learning loops through a real flow run (SPEC §9; issue 4): agents chosen by the
dispatcher, experience examples and the evolution log in the prompts, agent evolutions on the
global epoch count across both phases, the run report, and a repository left untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from swarm_evo.learning.agents import initial_texts, text_kinds

REPO = Path(__file__).resolve().parents[1]


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


STEPS = 12
INTERVAL = 2


@pytest.fixture(scope="module")
def wine_run(prefect_server, tmp_path_factory):
    """12 steps on sklearn-wine: 2 steps per epoch, Phase 1 ends at 4 valid nodes, agents
    evolve every 2 global epochs once 4 records exist (so at least once in each phase)."""
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.competition import prepare_competition

    tmp = tmp_path_factory.mktemp("loops")
    prepare_competition("sklearn-wine", None, tmp / "data")
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({
        "search": {"steps_per_epoch": 2, "phase1_target_nodes": 4, "parallel_workers": 2,
                   "proposal_backlog": 0},  # 2 steps at once: evolutions while steps can still start
        "agents": {"num_agents": 4, "evolution_interval": INTERVAL, "evolution_min_records": 4},
        "model": {"fault_rate": 0.0},  # the learning loops are under test, not the debug chain
        "sandbox": {"exec_timeout": 19},  # the offline model writes quick-tier programs for a 19 s limit
    }))
    run_dir = tmp / "wine-loops"
    status_before = _git_status()
    summary = two_phase_evo(competition_id="sklearn-wine", data_dir=str(tmp / "data"), run_dir=str(run_dir),
                            model="offline", max_steps=STEPS, seed=2, config_path=str(config))
    return run_dir, summary, status_before


def _nodes(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "journal.json").read_text())["nodes"]


def test_every_node_has_an_agent_and_feeds_dispatcher_and_experience(wine_run):
    run_dir, _, _ = wine_run
    nodes = _nodes(run_dir)
    assert len(nodes) == STEPS and all(n["agent_id"] for n in nodes)
    records = [json.loads(line) for line in (run_dir / "experience.jsonl").read_text().splitlines()]
    assert [r["node_id"] for r in records] == [n["id"] for n in sorted(nodes, key=lambda n: n["step"])]
    assert all(r["quality"] == n["metadata"]["quality"] for r, n in zip(records, sorted(nodes, key=lambda n: n["step"])))
    dispatcher = json.loads((run_dir / "agents" / "dispatcher.json").read_text())
    updates = sum(sum(ops.values()) for ops in dispatcher["updates"].values())
    assert updates == STEPS, "the dispatcher is updated after every step"
    assert len({n["agent_id"] for n in nodes}) >= 3


def test_agent_evolution_counts_global_epochs_across_both_phases(wine_run):
    from swarm_evo.learning.agent_evolution import load_evolutions

    run_dir, _, _ = wine_run
    nodes = _nodes(run_dir)
    last_phase1_epoch = max(n["epoch"] for n in nodes if n["phase"] == 1)
    # an epoch is a count of appended nodes (issue 52): a step belongs to the epoch current at its start
    assert all(n["epoch"] == 1 + n["metadata"]["schedule"]["nodes_at_start"] // 2 for n in nodes)
    evolutions = load_evolutions(run_dir)
    last_epoch = max(n["epoch"] for n in nodes)
    # every INTERVAL epochs, but none after the last epoch: no step would use its texts
    assert [e.epoch for e in evolutions] == list(range(INTERVAL, STEPS // 2, INTERVAL)), (last_epoch, evolutions)
    assert any(e.epoch > last_phase1_epoch for e in evolutions), "an evolution happened in Phase 2"
    # a step records which texts of its agent wrote its prompt: rewritten ones after an evolution
    assert all(isinstance(n["metadata"]["agent_generation"], int) for n in nodes)
    assert any(n["metadata"]["agent_generation"] > 0 for n in nodes), "later steps use the evolved texts"
    first = evolutions[0]
    assert len(first.rewrites) == 2 and first.elite_id not in {r.agent_id for r in first.rewrites}
    assert all(r.changed for r in first.rewrites)
    # the rewritten texts are the agents' texts now (for the latest rewrite of each agent), in the run dir
    latest = {r.agent_id: r for e in evolutions for r in e.rewrites if r.changed}
    for agent_id, rewrite in latest.items():
        for kind in text_kinds():
            assert (run_dir / "agents" / agent_id / f"{kind}.md").read_text().strip() == rewrite.new_texts[kind]
    assert any(rewrite.new_texts != {k: v for k, v in initial_texts().items()} for rewrite in latest.values())
    assert (run_dir / "agent_evolutions" / f"evolution-{first.index}" / f"prompt-{first.rewrites[0].agent_id}.md").exists()


def test_prompts_carry_agent_texts_examples_and_evolution_log(wine_run):
    from swarm_evo.learning.agent_evolution import load_evolutions

    run_dir, _, _ = wine_run
    nodes = sorted(_nodes(run_dir), key=lambda n: n["step"])
    last = nodes[-1]
    # an evolution after the last node's epoch (due then: 12 steps, 2 per epoch, every 2 epochs) runs
    # after its prompt: if it rewrote that agent, the prompt has the text the rewrite replaced
    later = [r for e in load_evolutions(run_dir) if e.epoch >= last["epoch"] for r in e.rewrites
             if r.agent_id == last["agent_id"] and r.changed]
    seen = set()
    for node in nodes:
        if node["metadata"]["schedule"]["nodes_at_start"] == 0:  # written from an empty journal: no log yet
            continue
        prompt_file = run_dir / "nodes" / node["id"] / f"prompt-{node['operation']}.md"
        if not prompt_file.exists():
            continue
        prompt = prompt_file.read_text()
        assert "# Evolution log" in prompt and "## Recent changes" in prompt
        if f"# Examples from earlier {node['operation']} steps" in prompt:
            seen.add(node["operation"])
            other = {"draft", "merge", "mutate"} - {node["operation"]}
            assert not any(f"# Examples from earlier {o} steps" in prompt for o in other)
        if node["step"] == last["step"]:
            current = (run_dir / "agents" / node["agent_id"] / f"{node['operation']}.md").read_text().strip()
            then = later[0].old_texts[node["operation"]].strip() if later else current
            assert then in prompt, "the last prompt uses the strategy text its agent had when it was written"
    assert "draft" in seen and seen & {"merge", "mutate"}, seen  # which Phase 2 operation repeats first varies


def test_run_report_and_artifacts(wine_run):
    run_dir, summary, _ = wine_run
    report = json.loads((run_dir / "run_report.json").read_text())
    assert set(report["operations"]) == {"draft", "merge", "mutate"}
    assert sum(op["count"] for op in report["operations"].values()) == STEPS
    assert sum(report["steps_per_agent"].values()) == STEPS
    assert len(report["agent_evolutions"]) >= 2
    nodes = _nodes(run_dir)
    assert report["phase2_started_at_step"] == min(n["step"] for n in nodes if n["phase"] == 2)


def test_the_repository_is_untouched_by_a_run(wine_run):
    _, _, before = wine_run
    assert _git_status() == before
