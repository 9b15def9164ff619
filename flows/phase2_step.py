"""phase2_step: one Phase 2 step, merge or mutate, its own subflow run (seed 000 §6)."""

from __future__ import annotations

from prefect import flow

from flows._step import run_step
from tasks.generate import select_phase2


@flow(name="phase2-step", flow_run_name="phase2-slot{slot}")
def phase2_step(run_dir: str, slot: int, epoch: int):
    """Merge (pheromone gene plan) or mutate (tournament parent) and take it through the step."""
    return run_step(run_dir, slot, epoch, select_phase2)
