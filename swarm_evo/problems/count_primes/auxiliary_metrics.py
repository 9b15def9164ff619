"""Static auxiliary metrics of count-primes (seed 002): what the program was asked and answered.

Runs in the sandbox on the program output saved by the evaluator (``extra.npz``):
``{"n": int array (calls,), "counts": int array (calls,), "call_seconds": float array
(calls,)}`` — the held-out inputs of the best run, the program's counts (equal to the
reference's, since only correct runs are analysed) and the in-process seconds per call as the
harness measured them (informational; the score uses the sandbox's wall time).
"""

import numpy as np


def evaluate_auxiliary_metrics(program_output):
    """Number of calls, largest input, prime density and how time grows with n."""
    n = np.asarray(program_output["n"], dtype=float).reshape(-1)
    counts = np.asarray(program_output["counts"], dtype=float).reshape(-1)
    seconds = np.asarray(program_output.get("call_seconds", np.zeros_like(n)), dtype=float).reshape(-1)
    metrics = {
        "num_calls": float(n.size),
        "largest_n": float(n.max()) if n.size else 0.0,
        "prime_density": float(counts.sum() / n.sum()) if n.sum() > 0 else 0.0,
        "total_call_seconds": float(seconds.sum()),
    }
    big = (n >= 1000) & (seconds > 0)
    if big.sum() >= 2 and np.ptp(np.log(n[big])) > 0:
        # Slope of log(seconds) against log(n): ~2 for naive trial division, ~1 for a sieve.
        metrics["time_scaling_exponent"] = float(np.polyfit(np.log(n[big]), np.log(seconds[big]), 1)[0])
    return metrics


METRIC_DEFINITIONS = {
    "num_calls": {
        "name": "num_calls",
        "description": "Number of count_primes calls in the timed run",
        "interpretation": "neutral",
        "unit": "calls",
        "formula": "len(n)",
    },
    "largest_n": {
        "name": "largest_n",
        "description": "Largest input n of the run",
        "interpretation": "neutral",
        "unit": "",
        "formula": "max(n)",
    },
    "prime_density": {
        "name": "prime_density",
        "description": "Primes found per integer examined over all calls (about 1 / ln n)",
        "interpretation": "neutral",
        "unit": "fraction",
        "formula": "sum(counts) / sum(n)",
    },
    "total_call_seconds": {
        "name": "total_call_seconds",
        "description": "In-process seconds spent inside count_primes (excludes start-up and imports)",
        "interpretation": "lower_better",
        "unit": "s",
        "formula": "sum(call_seconds)",
    },
    "time_scaling_exponent": {
        "name": "time_scaling_exponent",
        "description": "Slope of log(call seconds) against log(n) over calls with n >= 1000: "
        "about 2 for trial division of every k, about 1 for a sieve",
        "interpretation": "lower_better",
        "unit": "",
        "formula": "polyfit(log n, log seconds, 1)[0]",
    },
}
