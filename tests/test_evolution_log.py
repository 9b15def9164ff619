"""Evolution Log (SPEC §9): best node, last-10 changes with tags, constraints from failures,
unexplored directions, and the ``skills/evolution_log.j2`` partial."""

from __future__ import annotations

import pytest

from swarm_evo.learning.evolution_log import (
    DIRECTIONS,
    TEXT_ONLY_DIRECTIONS,
    EvolutionLog,
    LogChange,
    build_evolution_log,
    explored_directions,
    failure_constraints,
    first_sentence,
    normalise_error,
    unexplored_directions,
)
from swarm_evo.population import genes as G
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.prompting.prompts import render

CATALOGUE = [text for text, _ in DIRECTIONS if text not in TEXT_ONLY_DIRECTIONS]
GBM = "gradient boosting (HistGradientBoosting, LightGBM, XGBoost, CatBoost)"
RF = "random forest / extra trees"
TFIDF = "TF-IDF text features (word or character n-grams, TfidfVectorizer)"


def program(**overrides: str) -> str:
    """A 7-locus program whose default genes use no catalogue keyword."""
    body = {l: f"value_{l.lower()} = compute_{l.lower()}(alpha=1)\n" for l in G.LOCI}
    body.update(overrides)
    preamble = "import numpy as np\nimport pandas as pd\n"
    return G.render_program(preamble, body, G.LOCI)


def make_node(metric=0.5, is_buggy=False, dead=False, code=None, **kw) -> Node:
    code = program() if code is None else code
    return Node(
        operation=kw.pop("operation", "draft"),
        phase=kw.pop("phase", 1),
        code=code,
        genes=G.split_program(code)[1],
        metric_value=metric,
        is_buggy=is_buggy,
        dead=dead,
        **kw,
    )


def failed(exc_type=None, exc_info=None, dead=False, **kw) -> Node:
    return make_node(metric=None, is_buggy=True, dead=dead, exc_type=exc_type, exc_info=exc_info, **kw)


def journal_of(*nodes: Node) -> Journal:
    j = Journal()
    for n in nodes:
        j.append(n)
    return j


# --------------------------------------------------------------------------- best / changes
def test_empty_journal_gives_empty_log_and_renders_nothing():
    log = build_evolution_log(Journal())
    assert log == EvolutionLog()
    assert log.is_empty()
    assert render("skills/evolution_log.j2", evolution_log=log).strip() == ""
    assert render("skills/evolution_log.j2", evolution_log=None).strip() == ""
    assert render("skills/evolution_log.j2").strip() == ""  # not passed at all


def test_best_is_the_journal_best_valid_node_direction_aware():
    nodes = [make_node(0.70), make_node(0.81), make_node(0.99, is_buggy=True), make_node(0.75)]
    log = build_evolution_log(journal_of(*nodes))
    assert log.best is not None
    assert log.best.node_id == nodes[1].id and log.best.step == 2
    assert log.best.metric == 0.81 and log.best.tags == ["BEST"]
    assert log.lower_is_better is False

    low = [make_node(m, lower_is_better=True) for m in (0.30, 0.12, 0.25)]
    log = build_evolution_log(journal_of(*low))
    assert log.best.node_id == low[1].id and log.best.metric == 0.12
    assert log.lower_is_better is True


def test_changes_are_the_last_ten_by_step_oldest_first():
    nodes = [make_node(0.5 + i / 100) for i in range(13)]
    j = journal_of(*nodes)
    log = build_evolution_log(j)
    assert [c.step for c in log.changes] == list(range(4, 14))
    assert [c.node_id for c in log.changes] == [n.id for n in nodes[3:]]
    assert [c.step for c in build_evolution_log(j, max_changes=3).changes] == [11, 12, 13]
    assert build_evolution_log(j, max_changes=0).changes == []
    with pytest.raises(ValueError, match="max_changes"):
        build_evolution_log(j, max_changes=-1)


def test_change_tags_metric_and_summary():
    best = make_node(0.8061, operation="merge", phase=2, agent_id="agent-2",
                     approach_tag="LightGBM + 5-fold CV + target encoding")
    buggy = make_node(0.95, is_buggy=True, plan="## Plan\n1. Use a ridge model. Then tune it.",
                      approach_tag="unknown")
    dead = failed("KeyError", "KeyError: 'Cabin_deck'", dead=True, operation="mutate", phase=2)
    long_tag = make_node(0.6, approach_tag="x" * 400)
    log = build_evolution_log(journal_of(make_node(0.7), best, buggy, dead, long_tag))

    by_step = {c.step: c for c in log.changes}
    assert by_step[1].tags == [] and by_step[1].metric == 0.7
    assert by_step[2] == LogChange(step=2, node_id=best.id, operation="merge", agent_id="agent-2",
                                   metric=0.8061, tags=["BEST"],
                                   summary="LightGBM + 5-fold CV + target encoding")
    # a buggy node's metric is not shown; "unknown" tag falls back to the plan's first sentence
    assert by_step[3].tags == ["BUGGY"] and by_step[3].metric is None
    assert by_step[3].summary == "Use a ridge model."
    assert by_step[4].tags == ["BUGGY", "DEAD"] and by_step[4].summary == ""
    assert len(by_step[5].summary) == 160 and by_step[5].summary.endswith("…")


def test_first_sentence_skips_headings_marks_and_labels():
    assert first_sentence("## Plan\n\n- **Plan:** Train LightGBM on e.g. 5 folds. Then blend.") == (
        "Train LightGBM on e.g. 5 folds."
    )
    assert first_sentence("") == ""
    assert first_sentence("No full stop here") == "No full stop here"


# --------------------------------------------------------------------------- constraints
def test_constraints_grouped_counted_and_ordered():
    nodes = [
        make_node(0.7),                                                             # 1
        failed("KeyError", "KeyError: 'Cabin_deck'"),                                # 2
        failed("ValueError", "ValueError: could not convert string to float: 'Europa'"),  # 3
        failed("TimeoutError", "Execution exceeded the time limit of 600 s and was killed."),  # 4
        failed("KeyError", "KeyError: 'Cabin_deck'", dead=True),                    # 5
        failed(metadata={"problems": ["no final line 'Validation metric: <number>' in stdout"]}),  # 6
        failed("ValueError", "ValueError: could not convert string to float: 'Earth'"),   # 7
        make_node(0.8),                                                             # 8
        failed("KeyError", "KeyError: 'Cabin_deck'"),                                # 9
        failed("TimeoutError", "Execution exceeded the time limit of 540 s and was killed."),  # 10
        failed("KeyError", "KeyError: 'Age'"),                                       # 11
        failed(metadata={                                                            # 12
            "review": {"reasons": ["note: no usable LLM review; decided on deterministic checks only",
                                   "invalid submission: 5 rows, expected 10"]},
            "problems": ["submission: ignored because the review gave reasons"],
        }),
        failed("GenerationError", "GenerationError: the reply has no fenced code block (812 characters)",
               dead=True),                                                           # 13
    ]
    log = build_evolution_log(journal_of(*nodes))
    assert log.constraints == [
        "Avoid KeyError: 'Cabin_deck' (3 nodes, last at step 9)",
        # equal counts: the most recent first; numbers and quoted data values do not split groups,
        # and the group shows its latest member's text
        "Avoid TimeoutError: Execution exceeded the time limit of 540 s and was killed. (2 nodes, last at step 10)",
        "Avoid ValueError: could not convert string to float: 'Earth' (2 nodes, last at step 7)",
        "Avoid GenerationError: the reply has no fenced code block (812 characters) (1 node, last at step 13)",
        "Avoid: invalid submission: 5 rows, expected 10 (1 node, last at step 12)",
        # a KeyError's quoted key is the lesson: another column is another constraint
        "Avoid KeyError: 'Age' (1 node, last at step 11)",
        "Avoid: no final line 'Validation metric: <number>' in stdout (1 node, last at step 6)",
    ]
    assert build_evolution_log(journal_of(*[n.model_copy() for n in nodes]), max_constraints=2).constraints == (
        log.constraints[:2]
    )


def test_constraints_ignore_valid_nodes_and_cut_long_messages():
    long_msg = "ValueError: " + "shape mismatch " * 40
    nodes = [make_node(0.7), failed("ValueError", long_msg)]
    journal_of(*nodes)
    (constraint,) = failure_constraints(nodes)
    assert constraint.startswith("Avoid ValueError: shape mismatch")
    assert constraint.endswith("… (1 node, last at step 2)")
    assert len(constraint) <= 200 + len("Avoid  (1 node, last at step 2)")
    assert normalise_error("Found input variables: [891, 12] at 0x7f3a2c") == (
        "Found input variables: [<n>, <n>] at <addr>"
    )


# --------------------------------------------------------------------------- directions
def test_unexplored_directions_follow_the_catalogue_and_shrink_when_tried():
    j = journal_of(make_node(0.7))
    assert build_evolution_log(j).unexplored == CATALOGUE[:5]
    assert CATALOGUE[:2] == [GBM, RF]

    hgb = program(MODEL="from sklearn.ensemble import HistGradientBoostingClassifier\n"
                        "model = HistGradientBoostingClassifier(max_iter=300)\n")
    j.append(make_node(0.8, code=hgb))
    assert build_evolution_log(j).unexplored == CATALOGUE[1:6]

    # a comment is not an attempt; a buggy node's code is
    j.append(make_node(0.8, code=program(MODEL="# RandomForest next time?\nmodel = build_model(seed=1)\n")))
    assert RF in build_evolution_log(j).unexplored
    j.append(failed("ValueError", "ValueError: bad", code=program(
        MODEL="from sklearn.ensemble import ExtraTreesClassifier\nmodel = ExtraTreesClassifier()\n")))
    assert build_evolution_log(j).unexplored == CATALOGUE[2:7]
    assert build_evolution_log(j, max_directions=2).unexplored == CATALOGUE[2:4]


def test_text_directions_only_for_text_data():
    j = journal_of(make_node(0.7))
    assert TFIDF not in build_evolution_log(j).unexplored
    assert build_evolution_log(j, text_data=True).unexplored[0] == TFIDF
    j.append(make_node(0.8, code=program(DATA="from sklearn.feature_extraction.text import TfidfVectorizer\n"
                                              "vec = TfidfVectorizer(ngram_range=(1, 2))\n")))
    assert TFIDF not in build_evolution_log(j, text_data=True).unexplored


def test_keyword_matching_is_an_identifier_prefix():
    assert "support vector machine (SVC, SVR, LinearSVC)" in explored_directions(["m = SVC(C=1.0)"])
    # an identifier that merely ends in a keyword does not count
    assert explored_directions(["m = MyCustomSVC()"]) == []
    assert unexplored_directions(["clf = LogisticRegression(C=2.0)"], max_directions=3) == [
        GBM, RF, "stacking / voting ensemble of different model families"
    ]


# --------------------------------------------------------------------------- the partial
def test_partial_renders_all_sections():
    best = make_node(0.8061, operation="merge", phase=2, agent_id="agent-2", approach_tag="LightGBM + CV")
    nodes = [
        make_node(0.7, agent_id="agent-1", approach_tag="Ridge baseline"),
        failed("KeyError", "KeyError: 'Cabin_deck'", agent_id="agent-1"),
        best,
    ]
    log = build_evolution_log(journal_of(*nodes))
    text = render("skills/evolution_log.j2", evolution_log=log)
    assert text.startswith("# Evolution log\n")
    assert f"## Current best\n- [step 3] merge by agent-2: metric=0.8061 [BEST] — LightGBM + CV (node {best.id[:8]}; higher is better)\n" in text
    assert (
        "## Recent changes\n"
        "- [step 1] draft by agent-1: metric=0.7 — Ridge baseline\n"
        "- [step 2] draft by agent-1: metric=n/a [BUGGY]\n"
        "- [step 3] merge by agent-2: metric=0.8061 [BEST] — LightGBM + CV\n"
    ) in text
    assert "## Constraints learned from failures\n- Avoid KeyError: 'Cabin_deck' (1 node, last at step 2)\n" in text
    assert "## Unexplored directions\n" + "".join(f"- {d}\n" for d in CATALOGUE[:5]) in text
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["# Evolution log", "## Current best", "## Recent changes",
                        "## Constraints learned from failures", "## Unexplored directions"]


def test_partial_omits_empty_subsections():
    log = EvolutionLog(changes=[LogChange(step=1, node_id="a" * 32, operation="draft", metric=None,
                                          tags=["BUGGY", "DEAD"], summary="")])
    text = render("skills/evolution_log.j2", evolution_log=log)
    assert [l for l in text.splitlines() if l.startswith("#")] == ["# Evolution log", "## Recent changes"]
    assert "- [step 1] draft: metric=n/a [BUGGY] [DEAD]\n" in text
    only_constraints = EvolutionLog(constraints=["Avoid MemoryError: out of memory (2 nodes, last at step 3)"])
    assert not only_constraints.is_empty()
    text = render("skills/evolution_log.j2", evolution_log=only_constraints)
    assert "## Current best" not in text and "## Recent changes" not in text
    assert "- Avoid MemoryError: out of memory (2 nodes, last at step 3)\n" in text
