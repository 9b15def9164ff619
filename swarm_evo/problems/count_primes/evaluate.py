"""Evaluator of count-primes, the code-optimisation problem: be faster, stay exact.

The candidate defines ``count_primes(n)`` (number of primes ≤ n). Every run of every
evaluation draws fresh held-out inputs from a private RNG (a 64-bit seed from
:mod:`secrets`, recorded in the private metrics): :data:`NUM_SMALL` values in
:data:`SMALL_RANGE` (edge cases such as 0, 1, 2) and :data:`NUM_LARGE` values in
:data:`LARGE_RANGE`, shuffled. The program learns them only when it is called.

Per run, first the candidate, then the trusted ``reference.py`` (the slow trial division the
initial program starts from) are executed in the sandbox on the same calls through the same
harness (:func:`swarm_evo.evaluation.harness.call_entry`), the reference in a fresh directory
created after the candidate has exited. The reference's outputs are the expected values; its
sandbox wall time is the numerator of the speed-up::

    speedup = reference ExecutionResult.exec_time / candidate ExecutionResult.exec_time

(both measured outside the programs, so a program cannot tamper with them; both include the
interpreter start-up, which bounds the reachable speed-up to roughly reference time / start-up
time). combined_score = speedup when every output equals the reference's, else 0 with an error
naming the first differing input and both values. LARGE_RANGE is sized so that the reference
takes about 1–3 s per run on one CPU.
"""

from __future__ import annotations

import random
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from swarm_evo.evaluation.contract import EvaluationResult, MetricDefinition
from swarm_evo.evaluation.harness import HarnessRun, call_entry
from swarm_evo.evaluation.runner import RunScore, evaluate_runs

REFERENCE_FILE = "reference.py"
"""The trusted reference implementation, next to this file."""

NUM_SMALL = 2
SMALL_RANGE = (0, 100)
"""Edge-case inputs: NUM_SMALL values drawn uniformly from this inclusive range."""

NUM_LARGE = 5
LARGE_RANGE = (10_000, 18_000)
"""Timing inputs: NUM_LARGE values from this inclusive range (reference ≈ 0.2–0.6 s each)."""

REFERENCE_TIMEOUT = 300.0
"""Seconds allowed for one reference execution (it normally needs 1–3 s)."""


class ReferenceFailure(RuntimeError):
    """The trusted reference failed in the sandbox (an evaluator failure, not the program's)."""


def draw_inputs(seed: int) -> list[int]:
    """The held-out inputs of one run: NUM_SMALL small and NUM_LARGE large n, shuffled."""
    rng = random.Random(seed)
    values = [rng.randint(*SMALL_RANGE) for _ in range(NUM_SMALL)]
    values += [rng.randint(*LARGE_RANGE) for _ in range(NUM_LARGE)]
    rng.shuffle(values)
    return values


def _as_int(value: Any) -> int | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def check_types(inputs: list[int], outputs: list[Any]) -> str | None:
    """None when every output is an integer (Python or numpy int, not bool), else an error
    naming the first offending call (checked before the reference runs)."""
    for n, got in zip(inputs, outputs):
        if _as_int(got) is None:
            return f"count_primes({n}) returned {got!r} ({type(got).__name__}); it must return an int"
    return None


def compare_outputs(inputs: list[int], outputs: list[Any], expected: list[int]) -> str | None:
    """None when every output is an integer equal to the expected count, else an error naming
    the first differing input, the returned value and the expected one."""
    error = check_types(inputs, outputs)
    if error is not None:
        return error
    for n, got, want in zip(inputs, outputs, expected):
        value = _as_int(got)
        if value != want:
            return f"count_primes({n}) returned {value}, expected {want} (the reference's count of primes <= {n})"
    return None


def run_reference(sandbox, inputs: list[int], workdir: Path, timeout: float = REFERENCE_TIMEOUT) -> HarnessRun:
    """Execute reference.py's ``count_primes`` on ``inputs`` in ``sandbox`` (in ``workdir``).

    Raises:
        ReferenceFailure: the reference crashed, timed out or returned non-integers.
    """
    code = (Path(__file__).resolve().parent / REFERENCE_FILE).read_text(encoding="utf-8")
    calls = [{"args": [n], "kwargs": {}} for n in inputs]
    run = call_entry(sandbox, code, "count_primes", calls, workdir, timeout)
    if run.error is not None or run.outputs is None:
        raise ReferenceFailure(f"the reference implementation failed in the sandbox: {run.error}")
    if any(_as_int(v) is None for v in run.outputs):
        raise ReferenceFailure(f"the reference returned non-integers: {run.outputs!r}")
    return run


def score_speed(
    inputs: list[int],
    seed: int,
    outputs: list[Any],
    candidate: HarnessRun,
    reference: HarnessRun,
    score_name: str = "speedup",
) -> RunScore:
    """Compare the candidate's outputs with the reference's and compute the speed-up.

    Returns a RunScore: correct with score = speed-up, public ``{score_name, speedup,
    score_interpretation, candidate_seconds, reference_seconds, calls}``, private ``{seed,
    inputs, expected}``, output ``{"n", "counts", "call_seconds"}``; or incorrect (score 0)
    with the first mismatch.
    """
    expected = [int(v) for v in reference.outputs or []]
    private = {
        "seed": seed,
        "inputs": list(inputs),
        "expected": expected,
        "reference_call_seconds": list(reference.seconds),
    }
    error = compare_outputs(inputs, outputs, expected)
    if error is not None:
        return RunScore(correct=False, error=error, private=private)
    candidate_seconds = float(candidate.execution.exec_time)
    reference_seconds = float(reference.execution.exec_time)
    speedup = reference_seconds / max(candidate_seconds, 1e-6)
    public = {
        score_name: speedup,
        "score_interpretation": "higher_better",
        "speedup": speedup,
        "candidate_seconds": candidate_seconds,
        "reference_seconds": reference_seconds,
        "calls": len(inputs),
    }
    output = {
        "n": np.asarray(inputs, dtype=np.int64),
        "counts": np.asarray([_as_int(v) for v in outputs], dtype=np.int64),
        "call_seconds": np.asarray(candidate.seconds, dtype=float),
    }
    return RunScore(correct=True, score=speedup, public=public, private=private, output=output)


def evaluate(program_path: str, results_dir: str, *, sandbox, problem, timeout: float, num_runs: int,
             **kwargs: Any) -> EvaluationResult:
    """Time the candidate against the reference on fresh held-out inputs, ``num_runs`` times.

    Raises:
        ReferenceFailure: the reference itself failed (reported by the service as an evaluator
            failure).
    """
    results = Path(results_dir)
    seeds: dict[int, int] = {}
    inputs: dict[int, list[int]] = {}

    def calls_for_run(run: int) -> list[dict]:
        seeds[run] = secrets.randbits(64)
        inputs[run] = draw_inputs(seeds[run])
        return [{"args": [n], "kwargs": {}} for n in inputs[run]]

    def score_run(run: int, outputs: list[Any], harness: HarnessRun) -> RunScore:
        error = check_types(inputs[run], outputs)
        if error is not None:  # no need to time the reference
            return RunScore(correct=False, error=error, private={"seed": seeds[run], "inputs": list(inputs[run])})
        # The candidate has exited: only now does the reference run, in a fresh directory.
        results.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"reference-run-{run}-", dir=results))
        reference = run_reference(sandbox, inputs[run], workdir / "run")
        shutil.rmtree(workdir, ignore_errors=True)
        return score_speed(inputs[run], seeds[run], outputs, harness, reference, problem.score_name)

    definitions = {
        problem.score_name: MetricDefinition(
            name=problem.score_name,
            description="Reference wall time / candidate wall time on the same held-out calls "
            "(sandbox-measured; 0 when any count differs from the reference)",
            interpretation="higher_better",
            unit="x",
            formula="reference exec_time / candidate exec_time",
            source="primary",
        )
    }
    return evaluate_runs(
        Path(program_path),
        results,
        sandbox=sandbox,
        entry=problem.entry,
        calls_for_run=calls_for_run,
        score_run=score_run,
        num_runs=num_runs,
        timeout=timeout,
        definitions=definitions,
    )
