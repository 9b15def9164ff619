"""The run pictures (swarm_evo/reporting/charts.py, swarm_evo/reporting/evolution_tree.py) and how the final report publishes them (issue 6):
the best-fitness chart is a real PNG of the stated size, the evolution tree is one
self-contained HTML file with every node and the merge edges, and ``publish_final_report``
writes both files and puts the chart and a tree preview inline in the report artifact."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from factories import make_node

from swarm_evo.population.journal import Journal
from swarm_evo.reporting import charts, evolution_tree
from swarm_evo.reporting.report import final_report_markdown, run_summary

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def evolved_journal(lower_is_better: bool = False) -> Journal:
    """Phase 1: three drafts (one dead, one buggy-then-valid); Phase 2: a mutate, a buggy mutate,
    and a merge taking genes from its parent and two other nodes."""
    j = Journal(info={"competition_id": "toy-competition"})
    sign = -1 if lower_is_better else 1
    d1 = j.append(make_node(metric=sign * 0.70, lower_is_better=lower_is_better, approach_tag="ridge"))
    d2 = j.append(make_node(metric=sign * 0.80, lower_is_better=lower_is_better, approach_tag="gbm",
                            debug_attempts=1))
    j.append(make_node(metric=None, lower_is_better=lower_is_better, is_buggy=True, dead=True,
                       debug_attempts=2, exc_type="ValueError"))
    m1 = j.append(make_node(metric=sign * 0.85, lower_is_better=lower_is_better, operation="mutate", phase=2,
                            parent_id=d2.id, metadata={"target_locus": "MODEL"}))
    j.append(make_node(metric=None, lower_is_better=lower_is_better, is_buggy=True, operation="mutate",
                       phase=2, parent_id=d1.id, exc_type="KeyError"))
    sources = {"DATA": m1.id, "MODEL": m1.id, "LOSS": d1.id, "OPTIMIZER": d1.id, "REGULARIZATION": d2.id,
               "INITIALIZATION": m1.id, "TRAINING_TRICKS": m1.id}
    j.append(make_node(metric=sign * 0.83, lower_is_better=lower_is_better, operation="merge", phase=2,
                       parent_id=m1.id, metadata={"gene_sources": sources},
                       approach_tag="</script><script>alert('x')</script>"))
    return j


# ---------------------------------------------------------------------------- chart
@pytest.mark.parametrize("lower", [False, True])
def test_chart_is_a_png_of_the_stated_size(tmp_path, lower):
    path = charts.best_fitness_chart(evolved_journal(lower), tmp_path / "sub" / charts.CHART_FILE)
    assert path == tmp_path / "sub" / charts.CHART_FILE
    assert png_size(path) == charts.CHART_SIZE
    assert path.stat().st_size > 10_000, "a drawn chart, not an empty canvas"


def test_chart_of_an_empty_journal(tmp_path):
    assert png_size(charts.best_fitness_chart(Journal(), tmp_path / "empty.png")) == charts.CHART_SIZE


def test_best_so_far_follows_the_metric_direction():
    up = [v for _, v in charts.best_so_far(evolved_journal(False))]
    assert up == [0.70, 0.80, 0.80, 0.85, 0.85, 0.85]
    down = [v for _, v in charts.best_so_far(evolved_journal(True))]
    assert down == [-0.70, -0.80, -0.80, -0.85, -0.85, -0.85], "lower is better: the minimum so far"
    assert charts.lower_is_better(evolved_journal(True)) is True
    assert charts.phase2_start(evolved_journal()) == 4


def test_best_so_far_is_none_before_the_first_valid_node():
    j = Journal()
    j.append(make_node(metric=None, is_buggy=True))
    j.append(make_node(metric=0.5))
    assert charts.best_so_far(j) == [(1, None), (2, 0.5)]


@pytest.mark.parametrize("lower", [False, True])
def test_chart_marks_the_operation_of_each_new_best(tmp_path, monkeypatch, lower):
    """Issue 17: every node that raised the best so far is ringed in its operation's colour,
    one legend entry per operation ("new best by draft", "new best by mutate"), and labelled
    with its operation above the point."""
    from matplotlib.axes import Axes

    rings: dict[str, tuple] = {}
    labels: list[tuple[str, tuple]] = []
    scatter, annotate = Axes.scatter, Axes.annotate

    def record_scatter(self, x, y, *args, **kw):
        if str(kw.get("label", "")).startswith("new best by "):
            rings[kw["label"]] = (tuple(x), tuple(y), kw["edgecolors"])
        return scatter(self, x, y, *args, **kw)

    def record_annotate(self, text, xy, *args, **kw):
        labels.append((text, xy))
        return annotate(self, text, xy, *args, **kw)

    monkeypatch.setattr(Axes, "scatter", record_scatter)
    monkeypatch.setattr(Axes, "annotate", record_annotate)
    j = evolved_journal(lower)
    charts.best_fitness_chart(j, tmp_path / "chart.png")
    sign = -1 if lower else 1
    assert rings == {
        "new best by draft": ((1, 2), (sign * 0.70, sign * 0.80), charts.operation_colour("draft")),
        "new best by mutate": ((4,), (sign * 0.85,), charts.operation_colour("mutate")),
    }, "the merge at step 6 (0.83) did not beat the mutate: no ring"
    assert labels == [("dr", (1, sign * 0.70)), ("dr", (2, sign * 0.80)), ("mu", (4, sign * 0.85))]


# ---------------------------------------------------------------------------- tree
def test_tree_html_is_self_contained_with_every_node(tmp_path):
    j = evolved_journal()
    path = evolution_tree.evolution_tree_html(j, tmp_path / evolution_tree.TREE_FILE)
    text = path.read_text(encoding="utf-8")
    for node in j.nodes:
        assert node.id in text
        assert f'data-id="{node.id}"' in text, "every node is drawn"
    assert not re.search(r"https?://|//cdn|\bsrc\s*=|<link\b|@import", text, re.I), "no external resource"
    assert "<script>alert" not in text, "node texts cannot break out of the data script"
    assert text.count("<svg") >= 1 and "<style>" in text and "<script>" in text


def test_tree_colours_status_and_draws_merge_edges(tmp_path):
    j = evolved_journal()
    text = evolution_tree.evolution_tree_html(j, tmp_path / "tree.html").read_text(encoding="utf-8")
    nodes = j.nodes
    d1, d2, dead, m1, buggy, merge = nodes
    assert re.search(rf'class="node best" data-id="{m1.id}"', text)
    assert re.search(rf'class="node dead" data-id="{dead.id}"', text)
    assert re.search(rf'class="node buggy" data-id="{buggy.id}"', text)
    assert re.search(rf'class="node valid" data-id="{d1.id}"', text)
    # the parent's genes travel on the solid edge; the two other sources get dashed, labelled curves
    assert f'class="edge parent" data-source="{m1.id}" data-target="{merge.id}"' in text
    merge_edges = re.findall(r'<g class="edge merge" data-source="(\w+)" data-target="(\w+)">(.*?)</g>', text, re.S)
    assert {(s, t) for s, t, _ in merge_edges} == {(d1.id, merge.id), (d2.id, merge.id)}
    labels = {s: re.search(r"<text[^>]*>([^<]*)</text>", body).group(1) for s, _, body in merge_edges}
    assert labels == {d1.id: "LOSS,OPTIMIZER", d2.id: "REGULARIZATION"}
    assert "stroke-dasharray" in merge_edges[0][2]


def test_tree_svg_is_well_formed_and_standalone():
    j = evolved_journal()
    root = ET.fromstring(evolution_tree.evolution_tree_svg(j))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any("step 6 · merge · phase 2" in t and "metric 0.83" in t for t in titles), "tooltip per node"
    inline = evolution_tree.evolution_tree_svg(j, standalone=False)
    assert "xmlns" not in inline and ET.fromstring(inline).tag == "svg"


def test_tree_layout_places_children_below_parents_without_overlap():
    j = evolved_journal()
    pos = evolution_tree.tree_layout(j)
    assert set(pos) == {n.id for n in j.nodes}
    assert len(set(pos.values())) == len(pos), "no two nodes on the same spot"
    for n in j.nodes:
        if n.parent_id:
            assert pos[n.id][1] > pos[n.parent_id][1]


def test_long_mutation_chain_does_not_recurse(tmp_path):
    j = Journal()
    parent = j.append(make_node(metric=0.1))
    for i in range(1500):
        parent = j.append(make_node(metric=0.1 + i * 1e-4, operation="mutate", phase=2, parent_id=parent.id))
    pos = evolution_tree.tree_layout(j)
    assert len(pos) == 1501
    assert evolution_tree.evolution_tree_html(j, tmp_path / "chain.html").stat().st_size > 0


# ---------------------------------------------------------------------------- report
def test_report_markdown_embeds_chart_and_tree(tmp_path):
    j = evolved_journal()
    chart = charts.best_fitness_chart(j, tmp_path / charts.CHART_FILE)
    summary = run_summary(j)
    inline = final_report_markdown(
        summary,
        chart=charts.png_data_uri(chart),
        tree_image=charts.svg_data_uri(evolution_tree.evolution_tree_svg(j)),
        tree_link=str(tmp_path / evolution_tree.TREE_FILE),
    )
    assert re.search(r"!\[[^\]]*\]\(data:image/png;base64,[A-Za-z0-9+/=]+\)", inline)
    assert re.search(r"!\[[^\]]*\]\(data:image/svg\+xml;base64,[A-Za-z0-9+/=]+\)", inline)
    assert f"`{tmp_path / evolution_tree.TREE_FILE}`" in inline
    relative = final_report_markdown(summary, chart=charts.CHART_FILE, tree_link=evolution_tree.TREE_FILE)
    assert f"]({charts.CHART_FILE})" in relative and f"]({evolution_tree.TREE_FILE})" in relative
    assert "Best validation metric" not in final_report_markdown(summary)


# ---------------------------------------------------------------------------- one fitness on screen (issue 54)
def hidden_journal() -> Journal:
    """A lower-is-better run that selects on its hidden split, where the printed metric ranks
    otherwise: d2 is best on the hidden rows; the merge's printed metric beats its best gene
    source (d2) while its hidden-split score is worse."""
    j = Journal(info={"competition_id": "toy-rmse", "fitness": {"source": "hidden", "why": "test"}})
    kw = dict(lower_is_better=True)
    d1 = j.append(make_node(metric=0.1003, hidden_score=0.1600, **kw))
    d2 = j.append(make_node(metric=0.0971, hidden_score=0.1552, **kw, approach_tag="gbm"))
    j.append(make_node(metric=0.0500, is_buggy=True, dead=True, debug_attempts=2, exc_type="ValueError", **kw))
    j.append(make_node(metric=0.0950, hidden_score=0.1603, operation="merge", phase=2, parent_id=d1.id,
                       metadata={"gene_sources": {"DATA": d1.id, "MODEL": d2.id}}, **kw))
    return j


def test_every_view_shows_the_score_the_run_selects_on(tmp_path):
    """Tree (HTML, SVG, node records), node table, progress line and final report name the
    hidden-split score, show it (not the printed metric) and put the printed metric beside it."""
    from swarm_evo.llm.ledger import LLMTotals
    from swarm_evo.reporting.report import node_table, progress_line

    j = hidden_journal()
    d1, d2, dead, merge = j.nodes
    assert j.best_node() is d2
    text = evolution_tree.evolution_tree_html(j, tmp_path / "tree.html").read_text(encoding="utf-8")
    assert "best: step 2 (draft), hidden-split score 0.1552 (printed metric 0.0971)" in text
    assert "ranked by their hidden-split score, lower is better" in text
    svg = ET.fromstring(evolution_tree.evolution_tree_svg(j))
    ns = "{http://www.w3.org/2000/svg}"
    labels = {g.get("data-id"): [t.text for t in g.iter(f"{ns}text")][-1] for g in svg.iter(f"{ns}g")
              if g.get("class", "").startswith("node")}
    assert labels == {d1.id: "0.16", d2.id: "0.1552", dead.id: "—", merge.id: "0.1603"}, "hidden scores under the nodes"
    titles = [t.text for t in svg.iter(f"{ns}title")]
    assert any("hidden-split score 0.1552 (printed metric 0.0971)" in t for t in titles)
    records = json.loads(re.search(r'id="nodes-data">(.*?)</script>', text, re.S).group(1))
    assert {k: records[1][k] for k in ("score_name", "score", "metric", "hidden_score", "status")} == {
        "score_name": "hidden-split score", "score": 0.1552, "metric": 0.0971, "hidden_score": 0.1552, "status": "best"}

    rows = node_table(j)
    assert [r["hidden_split_score"] for r in rows] == [0.16, 0.1552, None, 0.1603]
    assert [r["printed_metric"] for r in rows] == [0.1003, 0.0971, 0.05, 0.095]
    assert "validation_metric" not in rows[0] and "metric" not in rows[0]
    assert progress_line(j, 10, LLMTotals()).startswith("4/10 nodes, 3 valid, best hidden-split score 0.1552 (printed 0.0971)")

    summary = run_summary(j)
    markdown = final_report_markdown(summary, chart=charts.CHART_FILE)
    assert "hidden-split score 0.1552 (selected on; printed validation metric 0.0971)" in markdown
    assert "## Best hidden-split score over steps" in markdown and "Best validation metric" not in markdown
    assert "improved* when its hidden-split score" in markdown
    section = markdown.split("## Where improvements come from")[1]
    merge_row = next(line for line in section.splitlines() if line.startswith("| merge |"))
    # the merge is worse than d2 on the hidden rows (0.1603 vs 0.1552) though its printed metric is better
    assert merge_row.split("|")[7].strip() == "-0.0051" and merge_row.split("|")[9].strip() == "+0.0021", merge_row
    assert charts.score_name(j) == "hidden-split score"
    assert charts.best_so_far(j)[-1] == (4, 0.1552)


def test_a_printed_metric_run_names_the_validation_metric():
    from swarm_evo.reporting.report import node_table

    j = evolved_journal()
    rows = node_table(j)
    assert rows[0]["validation_metric"] == 0.7 and "printed_metric" not in rows[0]
    assert "## Best validation metric over steps" in final_report_markdown(run_summary(j), chart="c.png")


# ---------------------------------------------------------------------------- publish (Prefect)
def test_publish_final_report_writes_and_publishes_pictures(prefect_server, tmp_path):
    """``publish_final_report`` in a real flow run: the files in the run directory, the report
    artifact with the chart and the tree preview inline, the link artifact to the HTML file."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from swarm_evo.cli.commands import main
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session
    from tasks.artifacts import publish_final_report

    assert main(["prepare", "sklearn-breast-cancer", "--data-dir", str(tmp_path / "data")]) == 0
    config = RunConfig()
    run_dir = tmp_path / "charts-publish"
    session = open_session(competition_id="sklearn-breast-cancer", data_dir=tmp_path / "data",
                           run_dir=run_dir, config=config, endpoint=endpoint_for(config.model))
    for node in evolved_journal().nodes:
        node.step = None
        session.journal.append(node)

    @flow
    def publish_only():
        return publish_final_report(str(session.run_dir), None)

    try:
        summary = publish_only()
    finally:
        close_session(session.run_dir)
    assert summary["nodes"] == 6
    assert png_size(session.run_dir / charts.CHART_FILE) == charts.CHART_SIZE
    tree = session.run_dir / evolution_tree.TREE_FILE
    assert all(n.id in tree.read_text() for n in session.journal.nodes)
    report_md = (session.run_dir / "report.md").read_text()
    assert f"]({charts.CHART_FILE})" in report_md and "base64" not in report_md

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_="charts-publish-%"))
            )

    artifacts = {a.key.rsplit("-", 1)[-1]: a for a in asyncio.run(read())}
    assert "data:image/png;base64," in artifacts["report"].data
    assert "data:image/svg+xml;base64," in artifacts["report"].data
    assert str(tree) in artifacts["report"].data
    assert tree.resolve().as_uri() in artifacts["tree"].data
