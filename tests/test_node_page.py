"""A node's page (swarm_evo/reporting/node_page.py, issue 54 item 3): facts with the score the run
selects on, the error and output tail, the diff to its parent, per gene source for a merge, the
debug chain with each fix as a diff, the code; bounded in size."""

from __future__ import annotations

from factories import make_node, program

from swarm_evo.population.journal import Journal
from swarm_evo.reporting import node_page
from swarm_evo.reporting.report import node_table


def _journal() -> tuple[Journal, list]:
    j = Journal(info={"competition_id": "toy", "fitness": {"source": "hidden"}})
    d1 = j.append(make_node(metric=0.81, hidden_score=0.79, code=program(MODEL="model = Ridge(alpha=1)\n")))
    d2 = j.append(make_node(metric=0.83, hidden_score=0.80, code=program(LOSS="loss = 'log'\n")))
    merged = program(MODEL="model = Ridge(alpha=1)\n", LOSS="loss = 'log'\n")
    merge = j.append(make_node(metric=0.84, hidden_score=0.78, operation="merge", phase=2, parent_id=d1.id,
                               code=merged, metadata={"gene_sources": {"MODEL": d1.id, "LOSS": d2.id}}))
    broken = program(DATA="df = load()\nraise KeyError('Age')\n")
    history = [
        {"attempt": 0, "code": broken, "exc_type": "KeyError", "problems": ["KeyError: 'Age'"],
         "term_out": "Traceback (most recent call last):\nKeyError: 'Age'"},
        {"attempt": 1, "code": broken.replace("raise KeyError('Age')\n", "df = df.fillna(0)\n"), "exc_type": None,
         "problems": [], "term_out": "Validation metric: 0.8"},
    ]
    mutate = j.append(make_node(metric=0.8, hidden_score=0.77, operation="mutate", phase=2, parent_id=d2.id,
                                code=history[1]["code"], debug_attempts=1, metadata={"debug_history": history}))
    dead = j.append(make_node(metric=None, is_buggy=True, dead=True, debug_attempts=2, exc_type="ValueError",
                              exc_info="ValueError: could not convert ```string``` to float",
                              term_out="x" * 10_000 + "\nValueError: could not convert string to float"))
    return j, [d1, d2, merge, mutate, dead]


def test_node_page_shows_scores_diffs_chain_and_error():
    j, (d1, d2, merge, mutate, dead) = _journal()
    page = node_page.node_page_markdown(j, merge, flow_run_url="/runs/flow-run/abc")
    assert page.startswith("# Node step 3: merge (valid)")
    assert "| hidden-split score (what the run selects on) | 0.78 |" in page
    assert "| printed validation metric | 0.84 |" in page and "[/runs/flow-run/abc](/runs/flow-run/abc)" in page
    assert f"## Diff to its parent, step 1 (draft, `{d1.id[:8]}`)" in page
    assert "+loss = 'log'" in page and "-value_loss = compute_loss(alpha=1)" in page
    assert f"### LOSS from step 2 (draft, `{d2.id[:8]}`)" in page and f"### MODEL from step 1" in page
    assert "Taken unchanged." in page, "the MODEL gene is d1's as it was"

    chain = node_page.node_page_markdown(j, mutate)
    assert "### Attempt 0: failed: KeyError" in chain and "### Attempt 1: succeeded" in chain
    assert "-raise KeyError('Age')" in chain and "+df = df.fillna(0)" in chain, "the fix, as a diff"

    error = node_page.node_page_markdown(j, dead)
    assert "# Node step 5: draft (dead)" in error and "## Error" in error
    assert "````\nValueError: could not convert ```string``` to float\n````" in error, "a longer fence than the text's"
    assert error.count("x") < node_page.MAX_OUTPUT_CHARS + 100, "the output's tail only"
    assert "ValueError: could not convert string to float\n```" in error


def test_node_page_is_bounded_and_links_show_in_the_table():
    j = Journal()
    huge = j.append(make_node(code=program(DATA="x = 1\n" * 40_000)))
    child = j.append(make_node(code=program(DATA="y = 2\n" * 40_000), operation="mutate", phase=2, parent_id=huge.id))
    page = node_page.node_page_markdown(j, child)
    assert len(page) <= node_page.MAX_PAGE_CHARS
    assert page.rstrip().endswith("```") and "more characters left out" in page, "the code gives way, its fence kept"
    rows = node_table(j, {child.id: {"page": "[node 2](/artifacts/key/k)"}})
    assert rows[0]["page"] == "" and rows[1]["page"] == "[node 2](/artifacts/key/k)"
