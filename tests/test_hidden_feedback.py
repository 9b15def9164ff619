"""Feedback that cannot be probed (issue 53, item 8): prompts show a node's hidden score rounded
to what the split can tell apart (its bootstrap standard error, computed once per split); the
journal keeps the exact value.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from factories import make_node
from swarm_evo.competition import load_competition, prepare_competition
from swarm_evo.competition.hidden_resolution import score_resolution
from swarm_evo.population.hidden_display import display_step, shown_fields, shown_score
from swarm_evo.competition.hidden_split import SPLIT_DIR, write_split
from swarm_evo.learning.evolution_log import log_change
from swarm_evo.population.journal import Journal
from swarm_evo.search.selection import draft_history


@pytest.mark.parametrize("resolution, step, value, shown", [
    (0.0123, 0.01, 0.81234, 0.81),
    (0.03, 0.02, 0.81234, 0.82),
    (0.0045, 0.002, 0.81234, 0.812),
    (0.06, 0.05, 0.4321, 0.45),
    (12.8, 10.0, 57.3, 60.0),
    (0.0002, 0.0002, 0.123456, 0.1234),
])
def test_a_score_is_rounded_to_the_largest_1_2_5_step_within_the_error(resolution, step, value, shown):
    assert display_step(resolution) == step
    assert shown_score(value, resolution) == pytest.approx(shown)
    assert shown_score(value, None) == value, "no resolution: the exact score"


def test_the_resolution_is_the_graders_bootstrap_error_on_the_hidden_rows(tmp_path):
    prepare_competition("sklearn-digits", None, tmp_path / "data")
    competition = load_competition("sklearn-digits", tmp_path / "data")
    split = write_split(competition, tmp_path / "run" / SPLIT_DIR, 0, 0.15)
    again = write_split(competition, tmp_path / "again" / SPLIT_DIR, 0, 0.15)
    assert split.resolution == again.resolution and split.record()["resolution"] == split.resolution, \
        "once per split, the same when the split is drawn again (a resumed run)"
    # accuracy of a model right on ~70-75 % of 243 rows: about sqrt(p(1-p)/n) ≈ 0.028
    assert 0.015 < split.resolution < 0.04, split.resolution
    answers = pd.read_csv(split.answers_path)
    scaled = score_resolution(competition.grader, answers.head(60), "id", list(competition.target_columns), 0)
    assert scaled > split.resolution, "fewer rows tell less apart"
    assert score_resolution(competition.grader, answers.head(1), "id", list(competition.target_columns), 0) is None


def test_prompts_show_the_rounded_score_and_the_journal_keeps_the_exact_one():
    from swarm_evo.prompting.prompts import _environment, templates_dir

    node = make_node(metric=0.95, hidden_score=0.812345, approach_tag="random forest")
    node.metadata.update(shown_fields(node.hidden_score, 0.0123), printed_misleads=True)
    assert node.hidden_score == 0.812345 and node.metadata["hidden_shown"] == 0.81
    journal = Journal()
    journal.append(node)
    assert draft_history(journal, include_failed=True)[0]["held_out"] == 0.81
    assert log_change(node).hidden == 0.81
    mutate = (templates_dir() / "mutate.j2").read_text()
    heading = mutate[mutate.index("## Parent solution"):mutate.index("```python")]
    text = _environment(str(templates_dir())).from_string(
        '{% from "skills/held_out.j2" import fitness, held_out %}' + heading).render(parent=node)
    assert text.startswith("## Parent solution (fitness 0.81)\n") and "0.8123" not in text
    assert "held-out rows say 0.81:" in text and "rounded to 0.01" in text
    log = _environment(str(templates_dir())).get_template("skills/evolution_log.j2")
    from swarm_evo.learning.evolution_log import build_evolution_log

    rendered = log.render(evolution_log=build_evolution_log(journal))
    assert "held-out=0.81" in rendered and "0.8123" not in rendered
    old = make_node(metric=0.9, hidden_score=0.7777)  # a node from before issue 53: no shown value
    assert log_change(old).hidden == 0.7777 and not math.isnan(old.hidden_score)
