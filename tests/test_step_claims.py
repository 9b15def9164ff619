"""A step's claims end with the step, even when it crashes after selection (issue 16, defect 1):
a merge's gene plan leaves ``plans_in_flight`` (else the novelty guard swaps away from that plan
for the rest of the session) and a greedy debug's leaf leaves ``debugs_in_flight``."""

from __future__ import annotations

import pytest
from prefect import flow

import flows._step as step_module
from swarm_evo.config import RunConfig
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.population.node import LLMUsage
from swarm_evo.run.session import open_session
from swarm_evo.sandbox import SandboxError
from swarm_evo.step import generation
from swarm_evo.step.request import OperationRequest

PLAN_KEY = ("gene-a", "gene-b", None, None, None, None, "gene-c")


@pytest.fixture
def session(tmp_path):
    config = RunConfig().with_overrides({"search.max_steps": 5})
    return open_session(problem="circle-packing", run_dir=tmp_path / "run", config=config,
                        endpoint=endpoint_for(config.model))


def _claiming_select(session, operation: str):
    """A selection that claims what prepare_merge / prepare_greedy claim."""

    def select(run_dir: str, slot: int) -> OperationRequest:
        metadata = {}
        if operation == "merge":
            metadata = {"gene_plan": {"key": list(PLAN_KEY)}}
            session.plans_in_flight.add(PLAN_KEY)
        else:
            session.debugs_in_flight.add("leaf-1")
        return OperationRequest(operation=operation, phase=2, slot=slot, template="merge.j2", prompt="p",
                                      ctx={}, parent_id="leaf-1", metadata=metadata)

    return select


@pytest.mark.parametrize("operation", ["merge", "debug"])
def test_a_step_that_crashes_after_selection_releases_its_claim(prefect_server, session, monkeypatch, operation):
    generated = generation.Generated(plan="plan", code="print(1)\n", usage=LLMUsage())
    monkeypatch.setattr(step_module, "generate", lambda run_dir, node_id, request: generated)

    def crash(*_args, **_kwargs):
        raise SandboxError("the Docker daemon went away")

    monkeypatch.setattr(step_module, "execute", crash)

    @flow(name="crashing-step")
    def crashing_step():
        return step_module.run_step(str(session.run_dir), 1, 1, _claiming_select(session, operation))

    with pytest.raises(SandboxError):
        crashing_step()
    assert PLAN_KEY not in session.plans_in_flight
    assert "leaf-1" not in session.debugs_in_flight
    assert PLAN_KEY not in session.merged_plan_keys()
