"""The built-in TSP problem (TSPLIB berlin52): TSPLIB parsing, tour validation and scoring
through the real Eval Service (evaluate_program + LocalSandbox), auxiliary metrics, alleles."""

from __future__ import annotations

import importlib.util
import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from swarm_evo.evaluation import evaluate_program, load_problem, read_results
from swarm_evo.population.genes import parse_genes, replace_gene
from swarm_evo.sandbox import LocalSandbox

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OPTIMUM = 7542


@pytest.fixture(scope="module")
def problem():
    return load_problem("tsp", data_dir=SHARED_DATA)


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    return LocalSandbox(num_threads=1)


@pytest.fixture(scope="module")
def tsp(problem):
    spec = importlib.util.spec_from_file_location("tsp_evaluate", problem.directory / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluate(problem, sandbox, tmp_path: Path, code: str, **kwargs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(code).lstrip(), encoding="utf-8")
    return evaluate_program(problem, program, tmp_path / "results", sandbox=sandbox, **kwargs)


def test_berlin52_is_parsed_from_the_shared_data_file(problem, tsp):
    assert problem.data_path == (SHARED_DATA / "tsp" / "berlin52.tsp").resolve()
    instance = tsp.parse_tsplib(problem.data_path)
    assert instance.name == "berlin52"
    assert instance.coords.shape == (52, 2) and instance.coords.dtype == float
    assert instance.coords[0].tolist() == [565.0, 575.0]
    assert instance.coords[51].tolist() == [1740.0, 245.0]
    assert instance.optimum == OPTIMUM
    # TSPLIB nint distance: d(1, 2) = nint(sqrt(540^2 + 390^2)) = nint(666.108...) = 666.
    assert tsp.euc_2d(instance.coords, 0, 1) == 666
    # The identity tour's length, computed independently.
    c = instance.coords
    expected = sum(
        int(math.sqrt((c[k, 0] - c[(k + 1) % 52, 0]) ** 2 + (c[k, 1] - c[(k + 1) % 52, 1]) ** 2) + 0.5)
        for k in range(52)
    )
    assert tsp.tour_length(list(range(52)), c) == expected


def test_other_tsplib_files_are_rejected_with_a_clear_error(tsp, tmp_path):
    geo = tmp_path / "geo.tsp"
    geo.write_text("NAME: g\nTYPE: TSP\nDIMENSION: 2\nEDGE_WEIGHT_TYPE: GEO\nNODE_COORD_SECTION\n1 1 2\n2 3 4\nEOF\n")
    with pytest.raises(tsp.TsplibError, match="EDGE_WEIGHT_TYPE 'GEO' is not supported"):
        tsp.parse_tsplib(geo)
    short = tmp_path / "short.tsp"
    short.write_text("NAME: s\nDIMENSION: 3\nEDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 0\n2 3 4\nEOF\n")
    with pytest.raises(tsp.TsplibError, match="DIMENSION 3 but 2 coordinate lines"):
        tsp.parse_tsplib(short)
    bad = tmp_path / "bad.tsp"
    bad.write_text("EDGE_WEIGHT_TYPE: EUC_2D\nNODE_COORD_SECTION\n1 0 zero\nEOF\n")
    with pytest.raises(tsp.TsplibError, match=r"bad\.tsp:3: bad coordinate line"):
        tsp.parse_tsplib(bad)
    ok = tmp_path / "ok.tsp"
    ok.write_text("NAME: square\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n2 0 3\n1 0 0\n3 4 3\n4 4 0\n")
    instance = tsp.parse_tsplib(ok)
    assert instance.coords.tolist() == [[0, 0], [0, 3], [4, 3], [4, 0]] and instance.optimum is None
    assert tsp.tour_length([0, 1, 2, 3], instance.coords) == 14


def test_initial_program_is_valid_and_scored_optimum_over_length(problem, sandbox, tmp_path, tsp):
    result = evaluate(problem, sandbox, tmp_path, problem.initial_program)
    assert result.correct, result.error
    tour = np.asarray(result.program_output["tour"])
    assert sorted(tour.tolist()) == list(range(52))
    coords = tsp.parse_tsplib(problem.data_path).coords
    length = tsp.tour_length(tour.tolist(), coords)
    assert result.public_metrics["tour_length"] == length
    assert result.combined_score == pytest.approx(OPTIMUM / length)
    assert 0.8 < result.combined_score < 0.95
    assert result.public_metrics["optimum"] == OPTIMUM
    assert result.public_metrics["gap_pct"] == pytest.approx(100 * (length - OPTIMUM) / OPTIMUM)
    assert result.public_metrics["score_interpretation"] == "lower_better"
    assert result.auxiliary_definitions["tour_length"].interpretation == "lower_better"
    # Static auxiliary metrics on extra.npz (tour + coords).
    assert result.auxiliary_errors == {}
    aux = result.auxiliary_metrics
    assert aux["mean_edge"] == pytest.approx(length / 52)
    assert aux["longest_edge"] >= aux["mean_edge"] > 0
    assert aux["crossing_edge_pairs"] >= 0
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert metrics["combined_score"] == result.combined_score
    assert metrics["public"]["tour_length"] == length
    assert metrics["public"]["aux_longest_edge"] == aux["longest_edge"]
    assert "private" in metrics
    back = read_results(tmp_path / "results")
    assert back.correct and back.program_output["tour"].tolist() == tour.tolist()


INVALID = {
    "duplicate_city": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[10] = 3\n    return tour\n",
        ["city 3 at positions [3, 10]", "missing cities: [10]"],
    ),
    "missing_city": (
        "def solve(coords):\n    return list(range(len(coords) - 1))\n",
        ["all 52 cities", "got 51"],
    ),
    "closed_tour_repeats_start": (
        "def solve(coords):\n    return list(range(len(coords))) + [0]\n",
        ["got 53"],
    ),
    "float_index": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[4] = 1.5\n    return tour\n",
        ["integers", "tour[4] = 1.5"],
    ),
    "float_array": (
        "import numpy as np\ndef solve(coords):\n    return np.arange(len(coords), dtype=float)\n",
        ["integers", "float64"],
    ),
    "nan_index": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[0] = float('nan')\n    return tour\n",
        ["tour[0] = nan"],
    ),
    "bool_index": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[1] = True\n    return tour\n",
        ["tour[1] = True (bool)"],
    ),
    "out_of_range": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[7] = 52\n    return tour\n",
        ["[0, 51]", "tour[7] = 52"],
    ),
    "negative_index": (
        "def solve(coords):\n    tour = list(range(len(coords)))\n    tour[0] = -1\n    return tour\n",
        ["tour[0] = -1"],
    ),
    "not_a_sequence": (
        "def solve(coords):\n    return {'tour': list(range(len(coords)))}\n",
        ["got dict"],
    ),
    "crash": (
        "def solve(coords):\n    return coords[1000]\n",
        ["IndexError"],
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_tours_score_zero_with_a_named_error(problem, sandbox, tmp_path, case):
    code, fragments = INVALID[case]
    result = evaluate(problem, sandbox, tmp_path, code)
    assert not result.correct
    assert result.combined_score == 0.0
    for fragment in fragments:
        assert fragment in result.error, (fragment, result.error)
    assert json.loads((tmp_path / "results" / "correct.json").read_text())["correct"] is False


def test_numpy_integer_tours_are_accepted(problem, sandbox, tmp_path):
    code = "import numpy as np\ndef solve(coords):\n    return np.arange(len(coords), dtype=np.int32)[::-1]\n"
    result = evaluate(problem, sandbox, tmp_path, code)
    assert result.correct, result.error
    assert result.public_metrics["tour_length"] > OPTIMUM


def test_timeout_is_an_incorrect_run(problem, sandbox, tmp_path):
    result = evaluate(problem, sandbox, tmp_path, "def solve(coords):\n    while True:\n        pass\n", timeout=1.5)
    assert not result.correct and result.combined_score == 0.0
    assert "TimeoutError" in result.error and result.runs[0].timed_out


def test_alleles_are_well_formed_and_the_best_combination_is_near_optimal(problem, sandbox, tmp_path):
    assert set(problem.alleles) == {"CONSTRUCTION", "IMPROVEMENT", "PERTURBATION"}
    for locus, texts in problem.alleles.items():
        for name, text in texts.items():
            assert text.startswith("# allele: "), (locus, name)
            compile(text, f"{locus}/{name}.py", "exec")
    assert set(parse_genes(problem.initial_program)) == set(problem.loci)

    code = problem.initial_program
    for locus, name in [
        ("CONSTRUCTION", "nearest_neighbour_all_starts"),
        ("IMPROVEMENT", "two_opt_or_opt"),
        ("PERTURBATION", "double_bridge"),
    ]:
        code = replace_gene(code, locus, problem.alleles[locus][name])
    best = evaluate(problem, sandbox, tmp_path / "best", code)
    assert best.correct, best.error
    assert best.public_metrics["tour_length"] < 8200
    assert best.combined_score > 0.95
    assert best.auxiliary_metrics["crossing_edge_pairs"] == 0

    two_opt = replace_gene(problem.initial_program, "IMPROVEMENT", problem.alleles["IMPROVEMENT"]["two_opt"])
    result = evaluate(problem, sandbox, tmp_path / "two_opt", two_opt)
    assert result.correct and result.public_metrics["tour_length"] < 8300

    broken = replace_gene(
        problem.initial_program, "CONSTRUCTION", problem.alleles["CONSTRUCTION"]["nearest_neighbour_duplicate"]
    )
    result = evaluate(problem, sandbox, tmp_path / "broken", broken)
    assert not result.correct and "cities visited more than once" in result.error


def test_every_allele_runs_in_the_initial_program(problem, tsp):
    """Each allele swapped alone into the initial program runs; the broken one is caught."""
    coords = tsp.parse_tsplib(problem.data_path).coords
    for locus, texts in problem.alleles.items():
        for name, text in texts.items():
            namespace: dict = {}
            exec(compile(replace_gene(problem.initial_program, locus, text), f"{locus}/{name}", "exec"), namespace)
            score = tsp.score_tour(namespace["solve"](coords.copy()), coords, OPTIMUM)
            if name == "nearest_neighbour_duplicate":
                assert not score.correct and "more than once" in score.error
            else:
                assert score.correct, (locus, name, score.error)
                assert OPTIMUM <= score.public["tour_length"] < 25_000
