"""Behaviour kept across restructuring (issue 16, item 2): a one-worker run with a fixed seed
gives the same journal, ids and timings aside, as the golden file recorded before the change.

The run: the two-phase-evo flow on the built-in ``sklearn-breast-cancer`` competition (no raw
data), offline model with planted faults (so debug chains run), seed 0, one worker, 9 steps in
epochs of 4 with K=3 (both phases: drafts, then merges and mutates), programs run by the
project's own interpreter (``sandbox.python`` = ``sys.executable``) so no time-dependent library
(optuna) is drafted. It selects on the printed metric (``search.fitness: printed``, issue 41):
the golden file was recorded before hidden fitness, and printed fitness must still give it. Programs run single-threaded (``OMP_NUM_THREADS=1``): on a busy 2-core machine
OpenMP's thread spinning made one HistGradientBoosting program take 150 s instead of a few.

Per node, in step order, the test compares: operation, phase, epoch, the parent's and the gene
sources' step indices (node ids are random, so each id is mapped to its node's step), the agent,
the mutate target locus, a hash of the code, the exception type, buggy/dead, the metric rounded to
4 decimals, the approach tag, the number of debug attempts and the exception type of each attempt.
Left out: ids, ``created_at``, ``exec_time`` and ``metadata.timings`` (wall-clock), terminal output
(it holds timings and temporary paths) and LLM usage.

Regenerate the golden file (only when a change of behaviour is intended, and say so in the
commit): ``SWARM_EVO_REGEN_GOLDEN=1 .venv/bin/pytest -q tests/test_same_journal.py``. The test
then writes ``tests/fixtures/same_journal_golden.json`` and fails on purpose, so the flag is never
left on.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

GOLDEN = Path(__file__).parent / "fixtures" / "same_journal_golden.json"
REGEN = "SWARM_EVO_REGEN_GOLDEN"


def _summary(nodes: list[dict]) -> list[dict]:
    """The journal's behaviour, node by node, with ids mapped to step indices."""
    step_of = {n["id"]: n["step"] for n in nodes}
    out = []
    for n in nodes:
        meta = n.get("metadata") or {}
        metric = n.get("metric_value")
        out.append({
            "step": n["step"],
            "operation": n["operation"],
            "phase": n["phase"],
            "epoch": n["epoch"],
            "parent": step_of.get(n["parent_id"]) if n.get("parent_id") else None,
            "gene_sources": {locus: step_of.get(src) for locus, src in sorted((meta.get("gene_sources") or {}).items())},
            "target_locus": meta.get("target_locus"),
            "agent_id": n.get("agent_id"),
            "code_sha256": hashlib.sha256(n["code"].encode()).hexdigest(),
            "exc_type": n.get("exc_type"),
            "is_buggy": n["is_buggy"],
            "dead": n["dead"],
            "metric": None if metric is None else round(metric, 4),
            "approach_tag": n.get("approach_tag"),
            "debug_attempts": n["debug_attempts"],
            "debug_exc_types": [a.get("exc_type") for a in meta.get("debug_history") or []],
        })
    return out


def _run(tmp: Path) -> list[dict]:
    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.competition import prepare_competition

    data = tmp / "data"
    prepare_competition("sklearn-breast-cancer", None, data)
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({
        "search": {"steps_per_epoch": 4, "phase1_target_nodes": 3, "fitness": "printed", "proposal_backlog": 0},
        "model": {"fault_rate": 0.4, "repair_rate": 0.8},
        "sandbox": {"python": sys.executable},
    }))
    run_dir = tmp / "run"
    two_phase_evo(competition_id="sklearn-breast-cancer", data_dir=str(data), run_dir=str(run_dir),
                  model="offline", max_steps=9, seed=0, parallel_workers=1, config_path=str(config))
    return _summary(json.loads((run_dir / "journal.json").read_text())["nodes"])


def test_one_worker_fixed_seed_run_gives_the_golden_journal(prefect_server, tmp_path, monkeypatch):
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "1")  # programs inherit it (scrub_env keeps a set value): no OpenMP spin on 2 busy cores
    summary = _run(tmp_path)
    if os.environ.get(REGEN):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(summary, indent=1) + "\n")
        pytest.fail(f"{REGEN} is set: wrote {GOLDEN}; unset it and run again (never leave it on)")
    golden = json.loads(GOLDEN.read_text())
    assert len(summary) == len(golden)
    for got, want in zip(summary, golden):
        assert got == want, f"step {want['step']} differs"
