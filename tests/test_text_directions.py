"""Text-only Evolution Log directions reach the prompts of text competitions, and only those
(issue 16, defect 2: the run never told build_evolution_log that a competition is text)."""

from __future__ import annotations

import pandas as pd
import pytest

from swarm_evo.competition.text_columns import free_text_columns, has_free_text
from swarm_evo.config import RunConfig
from swarm_evo.learning.evolution_log import TEXT_ONLY_DIRECTIONS
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.run.session import open_session
from swarm_evo.step import operations
from factories import make_node


def test_free_text_columns_rule(tmp_path):
    frame = pd.DataFrame({"id": [1, 2], "name": ["Ann", "Bob"], "flag": [True, False],
                          "text": ["a sentence of a novel, long enough to count as free text here", "x" * 80]})
    assert free_text_columns(frame) == ["text"]
    frame.to_csv(tmp_path / "train.csv", index=False)
    assert has_free_text(tmp_path) is True
    assert has_free_text(tmp_path / "absent") is False


@pytest.mark.parametrize("competition_id, text", [("spooky-author-identification", True), ("spaceship-titanic", False)])
def test_operation_prompts_offer_text_directions_only_for_text_data(data_dir, tmp_path, competition_id, text):
    config = RunConfig().with_overrides({"search.max_steps": 5})
    session = open_session(competition_id=competition_id, data_dir=data_dir, run_dir=tmp_path / "run",
                           config=config, endpoint=endpoint_for(config.model))
    assert session.objective.has_text_data() is text
    session.journal.append(make_node(0.5, code="model = LogisticRegression()\n"))  # a log needs one node
    _, variables = operations.operation_context(session, 1, "draft")
    offered = set(variables["evolution_log"].unexplored) & TEXT_ONLY_DIRECTIONS
    assert bool(offered) is text, variables["evolution_log"].unexplored
