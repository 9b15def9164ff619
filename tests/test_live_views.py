"""The live views of a run (issue 54, item 5): while a run goes, the node table, the lanes and the
``<run>-lineage`` artifact (best so far, its lineage, the best-score chart and the evolution tree)
are replaced at most every ``LIVE_INTERVAL`` seconds and only after the journal grew, on a thread
of their own in the top-level flow run's context."""

from __future__ import annotations

from factories import make_node

from swarm_evo.population.journal import Journal
from swarm_evo.reporting import live


def test_versions_are_bounded_by_time_and_by_growth():
    assert not live.live_due(10, 10, 999.0, 20.0)  # nothing appended
    assert not live.live_due(11, 10, 19.9, 20.0)  # too soon
    assert live.live_due(11, 10, 20.0, 20.0)
    assert not live.live_due(1040, 1000, 60.0, 20.0)  # 4 % grown: a 1,000-node run waits for 50 nodes
    assert live.live_due(1050, 1000, 60.0, 20.0)
    versions, nodes = 0, 0  # one node per second for 1,000 s, as often as the rule allows
    last = -1e9
    for t in range(1, 1001):
        if live.live_due(t, nodes, t - last, 20.0):
            versions, nodes, last = versions + 1, t, t
    assert versions < 110


def test_the_page_names_the_best_node_and_links_its_lineage():
    journal = Journal()
    root = make_node(metric=0.6, step=1)
    journal.append(root)
    child = make_node(metric=0.8, step=2, operation="mutate", parent_id=root.id)
    journal.append(child)
    journal.append(make_node(metric=None, step=3, is_buggy=True, dead=True))
    pages = {n.id: f"/artifacts/key/run-node-{n.step}" for n in journal.nodes}
    text = live.live_markdown(journal, 10, pages=pages, chart="data:image/png;base64,AAAA",
                              tree="data:image/svg+xml;base64,BBBB", links={"node table": "/artifacts/key/run-nodes"})
    assert "3 of 10 nodes: 2 valid, 0 buggy, 1 dead" in text
    assert f"**Best so far:** [step 2 (mutate, `{child.id[:8]}`)](/artifacts/key/run-node-2): validation metric 0.8" in text
    assert "**Its lineage:** [step 1 draft](/artifacts/key/run-node-1) → [step 2 mutate](/artifacts/key/run-node-2)" in text
    assert "![evolution tree](data:image/svg+xml;base64,BBBB)" in text and "data:image/png;base64,AAAA" in text
    assert "[node table](/artifacts/key/run-nodes)" in text


def test_live_views_are_replaced_while_the_run_goes(prefect_server, tmp_path, monkeypatch):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from swarm_evo.cli.commands import main
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session
    from tasks import artifacts

    assert main(["prepare", "sklearn-breast-cancer", "--data-dir", str(tmp_path / "data")]) == 0
    config = RunConfig().with_overrides({"search.max_steps": 6})
    session = open_session(competition_id="sklearn-breast-cancer", data_dir=tmp_path / "data",
                           run_dir=tmp_path / "live-run", config=config, endpoint=endpoint_for(config.model))
    run_dir = str(session.run_dir)
    clock = [1000.0]
    monkeypatch.setattr(artifacts.time, "monotonic", lambda: clock[0])

    def versions(kind: str) -> list:
        with get_client(sync_client=True) as client:
            return client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[artifacts.artifact_key(run_dir, kind)])))

    def append(advance: float) -> None:
        session.journal.append(make_node(metric=0.5 + 0.1 * len(session.journal)))
        clock[0] += advance
        artifacts.update_progress(run_dir)
        artifacts.update_live_views(run_dir, final=True)  # waits for the thread (the end of a search does)

    @flow
    def run() -> tuple[list, str]:
        artifacts.start_progress(run_dir)
        seen = []
        append(artifacts.LIVE_INTERVAL + 1)  # due: one version of each view
        seen.append((len(versions("lineage")), len(versions("nodes"))))
        append(1.0)  # too soon: none
        seen.append((len(versions("lineage")), len(versions("nodes"))))
        for _ in range(2):  # due by time: a version for the node appended meanwhile, then none (nothing new)
            clock[0] += artifacts.LIVE_INTERVAL
            artifacts.update_progress(run_dir)
            artifacts.update_live_views(run_dir, final=True)
            seen.append((len(versions("lineage")), len(versions("nodes"))))
        append(artifacts.LIVE_INTERVAL)  # grown and due: a third version
        seen.append((len(versions("lineage")), len(versions("nodes"))))
        flow_run_ids = {str(a.flow_run_id) for a in versions("lineage")}
        from prefect.runtime import flow_run

        assert flow_run_ids == {flow_run.get_id()}  # the top-level run's artifacts, not a thread's orphans
        return seen, max(versions("lineage"), key=lambda a: a.created).data

    try:
        seen, page = run()
    finally:
        close_session(session.run_dir)
    assert seen == [(1, 1), (1, 1), (2, 2), (2, 2), (3, 3)]
    assert "data:image/png;base64," in page and "data:image/svg+xml;base64," in page
    assert "3 of 6 nodes" in page
    assert (session.run_dir / "evolution_tree.html").exists() and (session.run_dir / "best_fitness.png").exists()
