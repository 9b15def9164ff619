"""The built-in circle-packing problem: strict validation of run_packing() outputs through the
real Eval Service (evaluate_program + LocalSandbox), its static auxiliary metrics and alleles."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from swarm_evo.evaluation import evaluate_program, load_problem, read_results
from swarm_evo.population.genes import parse_genes, replace_gene
from swarm_evo.sandbox import LocalSandbox

KNOWN_BEST = 2.635983


@pytest.fixture(scope="module")
def problem():
    return load_problem("circle-packing")


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    return LocalSandbox(num_threads=1)


@pytest.fixture(scope="module")
def evaluator_module(problem):
    spec = importlib.util.spec_from_file_location("circle_packing_evaluate", problem.directory / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluate(problem, sandbox, tmp_path: Path, code: str, **kwargs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(code).lstrip(), encoding="utf-8")
    return evaluate_program(problem, program, tmp_path / "results", sandbox=sandbox, **kwargs)


# A valid 6x5 grid packing (26 of the 30 cells, r = 0.08 < half the 1/6 spacing), sum 2.08;
# each invalid program below breaks exactly one rule of it.
GRID = """
import numpy as np

def grid():
    xs, ys = np.meshgrid((np.arange(6) + 0.5) / 6, (np.arange(5) + 0.5) / 5)
    centers = np.column_stack([xs.ravel(), ys.ravel()])[:26].copy()
    radii = np.full(26, 0.08)
    return centers, radii
"""


def test_initial_program_is_valid_and_scored_by_the_recomputed_sum(problem, sandbox, tmp_path):
    result = evaluate(problem, sandbox, tmp_path, problem.initial_program)
    assert result.correct, result.error
    assert result.error is None
    radii = np.asarray(result.program_output["radii"])
    assert radii.shape == (26,) and np.asarray(result.program_output["centers"]).shape == (26, 2)
    assert result.combined_score == pytest.approx(float(radii.sum()), abs=1e-12)
    assert 0.9 < result.combined_score < 1.6
    public = result.public_metrics
    assert public["sum_of_radii"] == result.combined_score
    assert public["score_interpretation"] == "higher_better"
    assert public["num_circles"] == 26
    assert public["gap_to_best"] == pytest.approx(KNOWN_BEST - result.combined_score)
    assert public["min_radius"] == pytest.approx(radii.min())
    assert result.private_metrics["reported_sum"] == pytest.approx(result.combined_score, abs=1e-9)
    assert result.auxiliary_definitions["sum_of_radii"].source == "primary"
    # Static auxiliary metrics ran in the sandbox on extra.npz.
    assert result.auxiliary_errors == {}
    aux = result.auxiliary_metrics
    assert aux["min_radius"] == pytest.approx(radii.min())
    assert aux["radius_std"] == pytest.approx(radii.std())
    assert 0.0 <= aux["border_touch_fraction"] <= 1.0
    assert result.auxiliary_definitions["radius_std"].source == "auxiliary_static"

    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert metrics["combined_score"] == result.combined_score
    assert metrics["public"]["sum_of_radii"] == result.combined_score
    assert metrics["public"]["aux_radius_std"] == pytest.approx(aux["radius_std"])
    assert metrics["private"]["reported_sum"] == pytest.approx(result.combined_score, abs=1e-9)
    assert json.loads((tmp_path / "results" / "correct.json").read_text()) == {"correct": True, "error": None}
    back = read_results(tmp_path / "results")
    assert back.combined_score == result.combined_score and back.correct
    np.testing.assert_allclose(back.program_output["radii"], radii)


INVALID = {
    "nan_centre": (
        GRID + "def run_packing():\n    c, r = grid()\n    c[3, 0] = float('nan')\n    return c, r, float(r.sum())\n",
        ["non-finite centre", "circle 3", "nan"],
    ),
    "inf_radius": (
        GRID + "def run_packing():\n    c, r = grid()\n    r[7] = float('inf')\n    return c, r, 2.0\n",
        ["non-finite radii", "circle 7", "inf"],
    ),
    "negative_radius": (
        GRID + "def run_packing():\n    c, r = grid()\n    r[5] = -0.05\n    return c, r, float(r.sum())\n",
        ["negative radii", "circle 5", "-0.05"],
    ),
    # The "sum of 4" hack: small valid radii, but a reported sum of 4.
    "reported_sum_4": (
        GRID + "def run_packing():\n    c, r = grid()\n    return c, r, 4.0\n",
        ["reported_sum 4", "2.08"],
    ),
    # Radii that really sum to 4, all inside the square: they must overlap.
    "radii_sum_to_4": (
        "import numpy as np\n"
        "def run_packing():\n"
        "    xs, ys = np.meshgrid(np.linspace(0.16, 0.84, 6), np.linspace(0.16, 0.84, 5))\n"
        "    c = np.column_stack([xs.ravel(), ys.ravel()])[:26]\n"
        "    r = np.full(26, 4 / 26)\n"
        "    return c, r, 4.0\n",
        ["overlapping pair", "= 0.3076923077"],
    ),
    "circle_outside": (
        GRID + "def run_packing():\n    c, r = grid()\n    c[2] = [0.99, 0.5]\n    return c, r, float(r.sum())\n",
        ["not inside the unit square", "circle 2", "x=0.99"],
    ),
    "wrong_shape": (
        GRID + "def run_packing():\n    c, r = grid()\n    return c[:25], r[:25], float(r[:25].sum())\n",
        ["centers must have shape (26, 2)", "(25, 2)"],
    ),
    "nan_reported_sum": (
        GRID + "def run_packing():\n    c, r = grid()\n    return c, r, float('nan')\n",
        ["reported_sum is not finite"],
    ),
    "nan_output": (
        "def run_packing():\n    return float('nan')\n",
        ["must return (centers, radii, reported_sum)", "float"],
    ),
    "crash": (
        "def run_packing():\n    raise ValueError('no packing today')\n",
        ["ValueError", "no packing today"],
    ),
    "missing_entry": (
        "def pack():\n    return None\n",
        ["run_packing"],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_programs_score_zero_with_a_named_error(problem, sandbox, tmp_path, case):
    code, fragments = INVALID[case]
    result = evaluate(problem, sandbox, tmp_path, code)
    assert not result.correct
    assert result.combined_score == 0.0
    for fragment in fragments:
        assert fragment in result.error, (fragment, result.error)
    assert result.auxiliary_metrics == {}
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert metrics["combined_score"] == 0.0 and metrics["correct"] is False
    assert metrics["error"] == result.error


def test_timeout_is_an_incorrect_run(problem, sandbox, tmp_path):
    result = evaluate(problem, sandbox, tmp_path, "import time\ndef run_packing():\n    time.sleep(30)\n", timeout=1.5)
    assert not result.correct and result.combined_score == 0.0
    assert "TimeoutError" in result.error
    assert result.runs[0].timed_out
    assert result.runs[0].exec_time < 10


def test_validator_tolerances_and_types(evaluator_module):
    validate, error = evaluator_module.validate_packing, evaluator_module.PackingError
    # Two circles touching exactly, and a third touching a side: valid at the 1e-9 tolerance.
    centers = np.array([[0.25, 0.25], [0.75, 0.25]] + [[0.5, 0.75]] + [[0.05 + 0.035 * k, 0.95] for k in range(23)])
    radii = np.array([0.25, 0.25, 0.2] + [0.0] * 23)
    c, r, s = validate([centers, radii, float(radii.sum())])
    assert s == pytest.approx(0.7) and c.dtype == float
    # Overlap by 2e-9 fails, by 5e-10 passes.
    nudged = centers.copy()
    nudged[1, 0] -= 2e-9
    with pytest.raises(error, match="circles 0 & 1"):
        validate([nudged, radii, float(radii.sum())])
    nudged[1, 0] = 0.75 - 5e-10
    validate([nudged, radii, float(radii.sum())])
    # The reported sum may differ by up to 1e-6.
    validate([centers, radii, float(radii.sum()) + 9e-7])
    with pytest.raises(error, match="reported_sum"):
        validate([centers, radii, float(radii.sum()) + 2e-6])
    # Types: bools, strings, ragged lists and a vector reported_sum are rejected.
    for bad, pattern in [
        ([centers, radii.astype(bool), 3.0], "radii must hold real numbers"),
        ([centers.astype(str), radii, 0.7], "centers must hold real numbers"),
        ([[[0.1, 0.2], [0.3]], radii, 0.7], "centers is not a numeric array"),
        ([centers, radii, [0.7]], "single number"),
        ([centers, radii, True], "reported_sum must hold real numbers"),
        ({"centers": centers}, "must return"),
    ]:
        with pytest.raises(error, match=pattern):
            validate(bad)
    # Lists of Python numbers are fine.
    validate([centers.tolist(), radii.tolist(), 0.7])


def test_alleles_are_well_formed_and_the_best_combination_scores_above_2_6(problem, sandbox, tmp_path):
    assert set(problem.alleles) == {"LAYOUT", "RADII", "REFINE"}
    for locus, texts in problem.alleles.items():
        for name, text in texts.items():
            assert text.startswith("# allele: "), (locus, name)
            compile(text, f"{locus}/{name}.py", "exec")
    assert set(parse_genes(problem.initial_program)) == {"LAYOUT", "RADII", "REFINE"}

    code = problem.initial_program
    for locus, name in [("LAYOUT", "hex_rows"), ("RADII", "linear_program"), ("REFINE", "slsqp")]:
        code = replace_gene(code, locus, problem.alleles[locus][name])
    best = evaluate(problem, sandbox, tmp_path / "best", code, timeout=60)
    assert best.correct, best.error
    assert best.combined_score > 2.6
    assert best.combined_score < KNOWN_BEST + 1e-6
    assert best.execution_time < 30

    broken = replace_gene(problem.initial_program, "RADII", problem.alleles["RADII"]["border_only"])
    result = evaluate(problem, sandbox, tmp_path / "broken", broken)
    assert not result.correct and "overlapping pair" in result.error

    short = replace_gene(problem.initial_program, "LAYOUT", problem.alleles["LAYOUT"]["one_circle_short"])
    result = evaluate(problem, sandbox, tmp_path / "short", short)
    assert not result.correct and "shape (26, 2)" in result.error


def test_every_allele_runs_in_the_initial_program(problem, evaluator_module):
    """Each allele swapped alone into the initial program runs; the broken ones are caught."""
    broken = {("RADII", "border_only"): "overlapping pair", ("LAYOUT", "one_circle_short"): "shape (26, 2)"}
    for locus, texts in problem.alleles.items():
        for name, text in texts.items():
            namespace: dict = {}
            exec(compile(replace_gene(problem.initial_program, locus, text), f"{locus}/{name}", "exec"), namespace)
            score = evaluator_module.score_packing(list(namespace["run_packing"]()))
            if (locus, name) in broken:
                assert not score.correct and broken[locus, name] in score.error, (locus, name, score.error)
            else:
                assert score.correct, (locus, name, score.error)
                assert 0.9 < score.score < KNOWN_BEST + 1e-6
