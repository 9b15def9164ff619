"""Failures look like failures in the Prefect UI (issue 54, item 2): a failed execution, a failed
debug attempt and a dead node end their runs in Failed states (``ProgramFailed``,
``AttemptFailed``, ``Dead``) whose messages carry the error's tail, the callers still get their
attempts, the step's flow run still completes, and a dead node logs at WARNING."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prefect import flow

import flows._step as step_module
import flows.debug_attempt as debug_module
from swarm_evo.config import RunConfig
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.population.node import LLMUsage, Node
from swarm_evo.run.session import close_session, open_session
from swarm_evo.step import generation
from tasks.execute import execute

FAILING = "def broken():\n    raise ValueError('boom: the planted error')\n\nbroken()\n"


@pytest.fixture
def session(tmp_path):
    config = RunConfig().with_overrides({"search.max_steps": 5})
    session = open_session(problem="circle-packing", run_dir=tmp_path / "run", config=config,
                           endpoint=endpoint_for(config.model))
    yield session
    close_session(session.run_dir)


def _runs(flow_run_id):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId, TaskRunFilter, \
        TaskRunFilterFlowRunId

    async def read():
        async with get_client() as client:
            parent = await client.read_flow_run(flow_run_id)
            tasks = await client.read_task_runs(task_run_filter=TaskRunFilter(
                flow_run_id=TaskRunFilterFlowRunId(any_=[flow_run_id])))
            children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))
            return parent, tasks, children

    return asyncio.run(read())


def test_failed_attempts_and_dead_nodes_end_in_failed_states(prefect_server, session, monkeypatch, caplog):
    run_dir = str(session.run_dir)
    fix = generation.Generated(plan="still broken", code=FAILING.replace("boom", "boom again"), usage=LLMUsage())
    monkeypatch.setattr(debug_module, "generate_debug", lambda *args, **kwargs: fix)
    dead = Node(id="d" * 32, step=3, operation="draft", phase=1, exc_type="ValueError",
                exc_info="ValueError: boom again", term_out="Traceback (most recent call last):\nValueError: boom again",
                is_buggy=True, dead=True, debug_attempts=1)

    @flow(name="failing-step")
    def failing_step():
        first = execute(run_dir, "n" * 32, FAILING, 0)
        second = debug_module.debug_attempt(run_dir=run_dir, node_id="n" * 32, slot=1, attempt=1,
                                            previous_code=first.code, previous_term_out=first.result.term_out,
                                            previous_exc_type=first.result.exc_type,
                                            previous_problems=first.problems)
        return first, second, step_module._outcome(dead)

    with caplog.at_level(logging.WARNING):
        state = failing_step(return_state=True)
    assert state.is_completed(), "the step's run completes: its failures are its attempts'"
    first, second, outcome = state.result()
    assert first.failed and first.result.exc_type == "ValueError" and first.attempt == 0
    assert second.failed and second.attempt == 1 and "boom again" in second.result.term_out
    assert outcome.name == "Dead" and outcome.data["dead"]

    parent, tasks, children = _runs(state.state_details.flow_run_id)
    by_name = {t.name: t.state for t in tasks}
    assert by_name["execute-attempt0"].is_failed() and by_name["execute-attempt0"].name == "ProgramFailed"
    assert "ValueError" in by_name["execute-attempt0"].message and "boom" in by_name["execute-attempt0"].message
    assert by_name["dead-step3"].is_failed() and by_name["dead-step3"].name == "Dead"
    assert by_name["dead-step3"].message.startswith("dead after 1 debug attempt: ValueError: boom again")
    (attempt_run,) = children
    assert attempt_run.name == "debug-nnnnnnnn-attempt1"
    assert attempt_run.state.is_failed() and attempt_run.state.name == "AttemptFailed"
    assert "boom again" in attempt_run.state.message
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("node dddddddd dead after 1 debug attempt" in w for w in warnings), warnings
