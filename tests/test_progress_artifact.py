"""The run's progress artifact (SPEC §12) against a real Prefect API: created at 0 %, updated by
the steps at most every ``PROGRESS_INTERVAL`` seconds (issue 16: one PATCH per node was a tenth
of the orchestration per node), and always by the final update at the end of the search."""

from __future__ import annotations

import pytest


def _progress(key: str) -> float:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return float(found[-1].data)


def test_updates_are_throttled_and_the_final_one_always_lands(prefect_server, tmp_path, monkeypatch):
    from prefect import flow

    from swarm_evo.cli.commands import main
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session
    from tasks import artifacts
    from factories import make_node

    assert main(["prepare", "sklearn-breast-cancer", "--data-dir", str(tmp_path / "data")]) == 0
    config = RunConfig().with_overrides({"search.max_steps": 4})
    session = open_session(competition_id="sklearn-breast-cancer", data_dir=tmp_path / "data",
                           run_dir=tmp_path / "progress-run", config=config, endpoint=endpoint_for(config.model))
    run_dir = str(session.run_dir)
    key = artifacts.artifact_key(run_dir, "progress")
    clock = [1000.0]
    monkeypatch.setattr(artifacts.time, "monotonic", lambda: clock[0])

    def add_node_and_update(advance: float, final: bool = False) -> float:
        session.journal.append(make_node())
        clock[0] += advance
        artifacts.update_progress(run_dir, final=final)
        return _progress(key)

    @flow
    def steps() -> list[float]:
        artifacts.start_progress(run_dir)
        seen = [_progress(key)]
        seen.append(add_node_and_update(artifacts.PROGRESS_INTERVAL + 0.1))  # due: 25 %
        seen.append(add_node_and_update(0.5))  # 0.5 s later: skipped, still 25 %
        seen.append(add_node_and_update(0.5))  # 1 s after the last update: skipped
        seen.append(add_node_and_update(0.1, final=True))  # the end of the search: 100 %
        return seen

    try:
        assert steps() == pytest.approx([0.0, 25.0, 25.0, 25.0, 100.0])
    finally:
        close_session(session.run_dir)
