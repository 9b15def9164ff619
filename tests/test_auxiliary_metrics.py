"""Auxiliary metrics (seed 002): good, broken, slow and lying files against the real LocalSandbox.

A broken auxiliary file must never raise and never fail the primary evaluation: it yields a
one-line error in auxiliary_errors[source].
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from swarm_evo.evaluation import (
    EvaluationResult,
    evaluate_program,
    load_problem,
    run_auxiliary,
    write_results,
)
from swarm_evo.evaluation.auxiliary import MAX_METRICS
from swarm_evo.sandbox import LocalSandbox

SUM_SQUARES = Path(__file__).resolve().parent / "fixtures" / "problems" / "sum-squares"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    return LocalSandbox(num_threads=1)


@pytest.fixture()
def results(tmp_path) -> Path:
    """A results dir holding a correct evaluation whose output is a dict of arrays (extra.npz)."""
    out = tmp_path / "results"
    write_results(
        EvaluationResult(
            combined_score=1.0,
            correct=True,
            private_metrics={"secret": 42},
            program_output={"radii": np.array([0.1, 0.2, 0.3]), "n": 3},
        ),
        out,
    )
    return out


def aux(sandbox, tmp_path, results, code, timeout=20, source="auxiliary_dynamic"):
    path = tmp_path / "auxiliary_metrics.py"
    path.write_text(textwrap.dedent(code).lstrip())
    return run_auxiliary(sandbox, path, results, source=source, timeout=timeout)


GOOD = """
    import os
    import numpy as np

    def evaluate_auxiliary_metrics(program_output):
        radii = program_output["radii"]
        return {
            "radius_std": np.std(radii),
            "count": int(program_output["n"]),
            "visible_files": len(os.listdir("input")),
        }

    METRIC_DEFINITIONS = {
        "radius_std": {"name": "Radius std", "description": "spread of radii",
                       "interpretation": "lower_better", "unit": "", "formula": "std(r)"},
        "count": {"name": "Count", "interpretation": "most_important"},
    }
"""


def test_good_file_gives_metrics_and_definitions(sandbox, tmp_path, results):
    metrics, definitions, error = aux(sandbox, tmp_path, results, GOOD)
    assert error is None
    assert metrics == {"radius_std": pytest.approx(np.std([0.1, 0.2, 0.3])), "count": 3.0, "visible_files": 1.0}
    assert all(type(v) is float for v in metrics.values())
    std = definitions["radius_std"]
    assert (std.name, std.interpretation, std.formula, std.source) == ("Radius std", "lower_better", "std(r)", "auxiliary_dynamic")
    assert definitions["count"].interpretation == "neutral"  # unknown interpretation -> neutral
    assert definitions["visible_files"].name == "visible_files"  # no definition -> minimal one
    # the file sees only the program output, not metrics.json (private metrics)
    staged = results / "auxiliary" / "auxiliary_dynamic-input"
    assert sorted(p.name for p in staged.iterdir()) == ["extra.npz"]
    assert (results / "auxiliary" / "auxiliary_dynamic" / "auxiliary_metrics.py").exists()


def test_output_from_extra_json(sandbox, tmp_path):
    out = tmp_path / "json-results"
    write_results(EvaluationResult(correct=True, program_output={"tour": [0, 2, 1], "pts": [np.zeros((2, 2))]}), out)
    assert (out / "extra.json").exists()
    metrics, _, error = aux(sandbox, tmp_path, out, """
        def evaluate_auxiliary_metrics(output):
            return {"cities": len(output["tour"]), "shape0": output["pts"][0].shape[0]}
    """)
    assert error is None and metrics == {"cities": 3.0, "shape0": 2.0}


@pytest.mark.parametrize(
    "code, message",
    [
        ("def evaluate_auxiliary_metrics(output)\n    return {}\n", "SyntaxError"),
        ("def other(output):\n    return {'a': 1.0}\n",
         "AttributeError: auxiliary_metrics.py defines no function 'evaluate_auxiliary_metrics'"),
        ("def evaluate_auxiliary_metrics(output):\n    raise KeyError('centers')\n", "KeyError: 'centers'"),
        ("def evaluate_auxiliary_metrics(output):\n    return [1.0, 2.0]\n", "returned list, expected a dict"),
        ("import sys\nsys.exit(3)\n", "ProcessError"),
    ],
    ids=["syntax-error", "missing-function", "raises", "non-dict", "exits"],
)
def test_broken_file_yields_a_one_line_error(sandbox, tmp_path, results, code, message):
    metrics, definitions, error = aux(sandbox, tmp_path, results, code)
    assert (metrics, definitions) == ({}, {})
    assert message in error and "\n" not in error


def test_slow_file_is_stopped_by_its_own_timeout(sandbox, tmp_path, results):
    start = time.monotonic()
    metrics, _, error = aux(sandbox, tmp_path, results, """
        def evaluate_auxiliary_metrics(output):
            while True:
                pass
    """, timeout=1)
    assert time.monotonic() - start < 6
    assert metrics == {} and error.startswith("TimeoutError") and "1 s" in error


def test_lying_values_are_dropped(sandbox, tmp_path, results):
    metrics, definitions, error = aux(sandbox, tmp_path, results, """
        import numpy as np
        def evaluate_auxiliary_metrics(output):
            return {"ok": 0.5, "nan": float("nan"), "inf": np.inf, "text": "high", "flag": True,
                    "vec": np.ones(3), "obj": object(), 7: 1.0, "np": np.float32(0.25)}
    """)
    assert metrics == {"ok": 0.5, "np": 0.25}
    assert set(definitions) == {"ok", "np"}
    assert "nan=nan" in error and "text='high'" in error and "flag=bool" in error
    assert "obj=object" in error and "vec=ndarray" in error and "kept the first" not in error
    assert "\n" not in error

    only_nan, defs, error = aux(sandbox, tmp_path, results, """
        def evaluate_auxiliary_metrics(output):
            return {"a": float("nan"), "b": float("-inf")}
    """)
    assert (only_nan, defs) == ({}, {}) and "dropped" in error


def test_missing_metric_definitions_gives_minimal_ones(sandbox, tmp_path, results):
    metrics, definitions, error = aux(sandbox, tmp_path, results, """
        def evaluate_auxiliary_metrics(output):
            return {"largest": float(output["radii"].max())}
    """, source="auxiliary_static")
    assert error is None and metrics == {"largest": 0.3}
    d = definitions["largest"]
    assert (d.name, d.interpretation, d.description, d.source) == ("largest", "neutral", "", "auxiliary_static")


def test_too_many_metrics_are_capped(sandbox, tmp_path, results):
    metrics, definitions, error = aux(sandbox, tmp_path, results, """
        def evaluate_auxiliary_metrics(output):
            return {f"m{i:03d}": float(i) for i in range(80)}
    """)
    assert len(metrics) == MAX_METRICS == len(definitions)
    assert "m000" in metrics and f"m{MAX_METRICS:03d}" not in metrics
    assert f"kept the first {MAX_METRICS} metrics, dropped 30 more" in error


def test_no_usable_output_is_an_error_not_an_exception(sandbox, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert aux(sandbox, tmp_path, empty, GOOD)[2].startswith("no program output to analyse")
    pickled = tmp_path / "pickled"
    write_results(EvaluationResult(correct=True, program_output={1: object()}), pickled)
    assert (pickled / "extra.pkl").exists()
    assert "only stored as extra.pkl" in aux(sandbox, tmp_path, pickled, GOOD)[2]
    missing = run_auxiliary(sandbox, tmp_path / "absent.py", empty, source="auxiliary_dynamic", timeout=5)
    assert missing[:2] == ({}, {}) and "cannot read" in missing[2]


def test_broken_dynamic_file_never_fails_the_primary_evaluation(sandbox, tmp_path):
    problem = load_problem(SUM_SQUARES)
    program = tmp_path / "main.py"
    program.write_text(problem.initial_program)
    dynamic = tmp_path / "dynamic_aux.py"
    dynamic.write_text("def evaluate_auxiliary_metrics(output):\n    return {'value_sqrt': 1.0, 'bad': 1 / 0}\n")
    result = evaluate_program(problem, program, tmp_path / "r", sandbox=sandbox, auxiliary_path=dynamic,
                              auxiliary_timeout=5)
    assert result.correct and result.combined_score == 1.0
    assert result.auxiliary_errors == {"auxiliary_dynamic": "ZeroDivisionError: division by zero"}
    assert set(result.auxiliary_metrics) == {"input_length", "value_sqrt"}  # the static ones survive
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["auxiliary_errors"] == result.auxiliary_errors
    assert metrics["correct"] is True

    dynamic.write_text("def evaluate_auxiliary_metrics(output):\n    return {'value_sqrt': -1.0, 'twice': 2 * float(output['value'])}\n")
    merged = evaluate_program(problem, program, tmp_path / "r2", sandbox=sandbox, auxiliary_path=dynamic)
    assert merged.auxiliary_errors == {}
    assert merged.auxiliary_metrics["twice"] == 28.0
    assert merged.auxiliary_metrics["value_sqrt"] == pytest.approx(14 ** 0.5)  # static one kept
    assert merged.auxiliary_definitions["twice"].source == "auxiliary_dynamic"
    assert merged.public_metrics == result.public_metrics
    on_disk = json.loads((tmp_path / "r2" / "metrics.json").read_text())
    assert on_disk["public"]["aux_twice"] == 28.0
