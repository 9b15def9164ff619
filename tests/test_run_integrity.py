"""Run integrity (issue 31, items 1 and 2) at the level of the core: the hand-in never loses a
node or its budget slot, a flagged node's files survive a failed fix, and a resumed run counts
only its own model failures. ``tests/test_run_integrity_http.py`` runs the same through real
``swarm-evo`` processes against the stand-in model server."""

from __future__ import annotations

import json
import logging

import litellm
import pytest
from factories import make_node

from swarm_evo.config import RunConfig
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.population.journal import Journal
from swarm_evo.step import assembly, attempt_files, limits, persistence
from swarm_evo.step.request import OperationRequest


def _session(tmp_path, **model):
    from swarm_evo.competition import prepare_competition
    from swarm_evo.run.session import open_session

    if not (tmp_path / "data").exists():
        prepare_competition("sklearn-wine", None, tmp_path / "data")
    config = RunConfig().with_overrides({"search.max_steps": 50, **{f"model.{k}": v for k, v in model.items()}})
    return open_session(competition_id="sklearn-wine", data_dir=tmp_path / "data", run_dir=tmp_path / "run",
                        config=config, endpoint=endpoint_for(config.model))


def _request(session) -> OperationRequest:
    slot = session.budget.reserve()
    return OperationRequest(operation="draft", phase=1, slot=slot, template="draft.j2", prompt="p", ctx={})


# ------------------------------------------------------------------ 1. the hand-in
def test_submission_candidates_go_best_first_then_flagged_nodes_only_without_valid_ones(tmp_path):
    journal = Journal(tmp_path / "journal.json")
    flagged = make_node(metric=0.9, is_buggy=True, id="flagged", metadata={"facts_passed": True})
    journal.append(flagged)
    assert [n.id for n, _ in journal.submission_candidates()] == ["flagged"]
    for i, metric in enumerate((0.5, 0.7, 0.6)):
        journal.append(make_node(metric=metric, id=f"v{i}"))
    ranked = journal.submission_candidates()
    assert [n.id for n, _ in ranked] == ["v1", "v2", "v0"], "valid nodes only, best first"
    assert ranked[0][1].startswith("the best of 3 valid node(s)") and ranked[1][1].startswith("rank 2 of 3")
    assert journal.submission_candidate() == ranked[0]


def test_a_hand_in_that_fails_loses_neither_the_node_nor_its_slot(tmp_path, caplog):
    """Before the fix (issue 31): the FileNotFoundError of the hand-in escaped ``append_node``:
    the journal file never got the node, the slot was given back, and every later append failed
    the same way. Now the node is saved, its slot committed, and the next candidate handed in."""
    session = _session(tmp_path)
    handed_in: list[str] = []

    def hand_in(run_dir, node):
        if node.id == "broken":
            raise FileNotFoundError(f"{run_dir}/nodes/broken/submission/submission.csv")
        handed_in.append(node.id)

    session.objective.publish_best = hand_in
    caplog.set_level(logging.WARNING, logger="swarm_evo.step.persistence")
    for node in (make_node(metric=0.5, id="first"), make_node(metric=0.9, id="broken"),
                 make_node(metric=0.4, id="third")):
        persistence.append_node(session, node, _request(session))
    on_disk = json.loads((session.run_dir / "journal.json").read_text())["nodes"]
    assert [n["id"] for n in on_disk] == ["first", "broken", "third"]
    assert session.budget.used == 3 and session.budget.in_flight == 0
    assert handed_in == ["first"], "the best node cannot be handed in: the next one stays handed in"
    assert session.published_best_id == "first"
    warnings = [r.getMessage() for r in caplog.records if "cannot be handed in" in r.getMessage()]
    assert len(warnings) == 1 and "broken" in warnings[0], "one warning per unusable candidate"
    node, why = persistence.handed_in(session)
    assert node.id == "first" and why.startswith("rank 2 of 3 valid node(s)")


def test_a_flagged_node_keeps_its_files_when_its_fix_is_not_kept(tmp_path):
    node_dir = tmp_path / "run" / "nodes" / "n1"
    (node_dir / "submission").mkdir(parents=True)
    (node_dir / "solution.py").write_text("original\n")
    (node_dir / "submission" / "submission.csv").write_text("id,y\n1,0\n")
    (node_dir / "prompt-draft.md").write_text("the prompt")
    (node_dir / "input").symlink_to(tmp_path, target_is_directory=True)

    aside = attempt_files.set_aside(node_dir, 0)
    assert aside == tmp_path / "run" / "attempts" / "n1" / "0"
    assert sorted(p.name for p in node_dir.iterdir()) == ["input", "prompt-draft.md"], "the fix starts clean"
    (node_dir / "solution.py").write_text("from sklearn.ensemble import Nope\n")  # the fix, which crashed
    (node_dir / "stderr.txt").write_text("ImportError")

    attempt_files.bring_back(node_dir, 0, replaced=2)
    assert (node_dir / "solution.py").read_text() == "original\n"
    assert (node_dir / "submission" / "submission.csv").read_text() == "id,y\n1,0\n"
    assert not (node_dir / "stderr.txt").exists() and (node_dir / "input").is_symlink()
    kept = tmp_path / "run" / "attempts" / "n1"
    assert sorted(p.name for p in kept.iterdir()) == ["2"]
    assert (kept / "2" / "solution.py").read_text().startswith("from sklearn.ensemble import Nope")

    attempt_files.set_aside(node_dir, 0)  # a fix that ran nothing (its generation failed)
    attempt_files.bring_back(node_dir, 0, replaced=None)
    assert (node_dir / "solution.py").read_text() == "original\n"
    with pytest.raises(FileNotFoundError, match="attempt 5"):
        attempt_files.bring_back(node_dir, 5, replaced=None)


# ------------------------------------------------------------------ 2. resume after failures
def _fail(session) -> None:
    request = _request(session)
    error = litellm.NotFoundError(message="the model does not exist", model="m", llm_provider="openai")
    node = assembly.failed_generation_node(session, f"f{request.slot}", request, error, epoch=1, wall_seconds=0.1)
    persistence.append_node(session, node, request)


def test_a_resumed_run_counts_only_the_model_failures_since_it_resumed(tmp_path):
    """Before the fix (issue 31): the resumed session read the journal's last N nodes, still
    the failures that stopped the run, and stopped again before its first step."""
    from swarm_evo.run.session import close_session

    session = _session(tmp_path, max_consecutive_failures=2)
    _fail(session)
    _fail(session)
    assert session.stop_is_failure and "failed 2 times in a row" in session.stop_reason
    close_session(session.run_dir)

    resumed = _session(tmp_path, max_consecutive_failures=2)
    assert limits.check_limits(resumed) is None and not resumed.finished, "the resumed run may start"
    _fail(resumed)
    assert limits.check_limits(resumed) is None, "one failure since the resume is not two in a row"
    _fail(resumed)
    assert resumed.stop_is_failure and len(resumed.journal) == 4
