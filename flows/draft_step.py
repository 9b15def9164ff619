"""draft_step: one Phase 1 step, its own subflow run (seed 000 §5)."""

from __future__ import annotations

from prefect import flow

from flows._step import run_step
from tasks.generate import select_draft


@flow(name="draft-step", flow_run_name="draft-slot{slot}")
def draft_step(run_dir: str, slot: int, epoch: int):
    """Draft a new solution (draft.j2 with the draft history) and take it through the step."""
    return run_step(run_dir, slot, epoch, select_draft)
