"""The Eval Service core (SPEC §11; seed 002): codec, harness, runner, result files, problems,
evaluate_program — against the real LocalSandbox (and the real DockerSandbox once)."""

from __future__ import annotations

import json
import math
import shutil
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from swarm_evo.evaluation import (
    PROBLEMS_DIR,
    EvaluationResult,
    EvaluatorError,
    MetricDefinition,
    ProblemError,
    RunLog,
    RunScore,
    call_entry,
    decode,
    encode,
    evaluate_program,
    evaluate_runs,
    load_problem,
    load_program_output,
    read_results,
    write_results,
)
from swarm_evo.evaluation.harness import HARNESS_PROGRAM
from swarm_evo.sandbox import DockerSandbox, LocalSandbox

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "problems"
SUM_SQUARES = FIXTURES / "sum-squares"
BROKEN = FIXTURES / "broken-evaluator"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    return LocalSandbox(num_threads=1)


def dedent(code: str) -> str:
    return textwrap.dedent(code).lstrip()


# --------------------------------------------------------------------------------- codec


def test_codec_round_trips_arrays_tuples_nan_and_tag_collisions():
    value = {
        "f": np.array([[1.5, np.nan], [np.inf, -np.inf]]),
        "i": np.arange(6, dtype=np.int32).reshape(3, 2),
        "empty": np.zeros((0, 2)),
        "b": np.array([True, False]),
        "s": np.array(["ab", "c"]),
        "t": (1, 2.5, "x", None, True),
        "scalars": [np.float32(1.5), np.int64(7), np.bool_(True), float("nan")],
        "clash": {"__ndarray__": "not an array", "dtype": 1},
    }
    text = json.dumps(encode(value))
    back = decode(json.loads(text))
    assert back["f"].dtype == np.float64 and back["f"].shape == (2, 2)
    assert back["f"][0, 0] == 1.5 and math.isnan(back["f"][0, 1]) and back["f"][1, 0] == np.inf
    assert back["i"].dtype == np.int32 and back["i"].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert back["empty"].shape == (0, 2)
    assert back["b"].dtype == bool and back["s"].tolist() == ["ab", "c"]
    assert back["t"] == [1, 2.5, "x", None, True]
    assert back["scalars"][:3] == [1.5, 7, True] and type(back["scalars"][1]) is int
    assert math.isnan(back["scalars"][3])
    assert back["clash"] == {"__ndarray__": "not an array", "dtype": 1}


def test_codec_refuses_what_it_cannot_restore():
    with pytest.raises(TypeError, match=r"type 'set' at value\['k'\]\[1\]"):
        encode({"k": [1, {2}]})
    with pytest.raises(TypeError, match="dtype object"):
        encode(np.array([object()]))
    with pytest.raises(TypeError, match="dict key of type 'int'"):
        encode({1: 2})
    with pytest.raises(TypeError, match="complex"):
        encode(1j)
    with pytest.raises(ValueError, match="not allowed"):
        decode({"__ndarray__": [1], "dtype": "O"})
    with pytest.raises(ValueError, match="malformed"):
        decode({"__ndarray__": [1, 2, 3], "dtype": "<f8", "shape": [2, 2]})


# ------------------------------------------------------------------------------ harness


def test_harness_round_trip_of_arrays_tuples_and_nan(sandbox, tmp_path):
    code = dedent("""
        import numpy as np
        def f(x, scale=1.0):
            print("computing")
            return np.asarray(x) * scale, (1, float("nan")), {"inf": float("inf"), "n": np.int64(3)}
        if __name__ == "__main__":
            raise SystemExit("the main block must not run")
    """)
    calls = [{"args": [np.arange(6.0).reshape(2, 3)], "kwargs": {"scale": 2}}, {"args": [[1, 2]]}]
    run = call_entry(sandbox, code, "f", calls, tmp_path / "run", timeout=20)
    assert run.error is None and run.ok, run.execution.term_out
    first, second = run.outputs
    arr, pair, extra = first
    assert isinstance(arr, np.ndarray) and arr.shape == (2, 3) and arr[1, 2] == 10.0
    assert pair[0] == 1 and math.isnan(pair[1])
    assert extra == {"inf": math.inf, "n": 3}
    assert second[0].tolist() == [1.0, 2.0]
    assert len(run.seconds) == 2 and all(s >= 0 for s in run.seconds)
    assert "computing" in run.execution.stdout
    assert (tmp_path / "run" / "program.py").read_text() == code
    assert json.loads((tmp_path / "run" / "calls.json").read_text())[1] == {"args": [[1, 2]], "kwargs": {}}
    assert (tmp_path / "run-input").is_dir() and not any((tmp_path / "run-input").iterdir())
    # the harness is a fixed program: the candidate is never pasted into it
    assert (tmp_path / "run" / "solution.py").read_text() == HARNESS_PROGRAM


def test_harness_reports_missing_entry(sandbox, tmp_path):
    run = call_entry(sandbox, "def g():\n    return 1\n", "run_packing", [{}], tmp_path / "r", timeout=20)
    assert run.outputs is None
    assert run.execution.exc_type == "AttributeError"
    assert run.error == "AttributeError: program defines no function 'run_packing'"
    not_callable = call_entry(sandbox, "f = 3\n", "f", [{}], tmp_path / "r2", timeout=20)
    assert "program defines no function 'f'" in not_callable.error


def test_harness_crash_keeps_the_exception_class(sandbox, tmp_path):
    code = dedent("""
        class PackingFailed(Exception):
            pass
        def f(n):
            if n > 1:
                raise PackingFailed(f"cannot pack {n} circles")
            return n
    """)
    run = call_entry(sandbox, code, "f", [{"args": [1]}, {"args": [5]}], tmp_path / "r", timeout=20)
    assert run.outputs is None
    assert run.execution.exc_type == "PackingFailed"
    assert run.error == "program.PackingFailed: cannot pack 5 circles"
    assert "Traceback" in run.execution.stderr


def test_harness_timeout_is_reported_with_the_limit(sandbox, tmp_path):
    start = time.monotonic()
    run = call_entry(sandbox, "def f():\n    while True:\n        pass\n", "f", [{}], tmp_path / "r", timeout=1)
    elapsed = time.monotonic() - start
    assert elapsed < 1 + 5
    assert run.execution.exc_type == "TimeoutError" and run.execution.timed_out
    assert run.error.startswith("TimeoutError:") and "1 s" in run.error
    assert run.outputs is None


def test_harness_unencodable_output_names_the_type(sandbox, tmp_path):
    code = dedent("""
        class Packing:
            pass
        def f():
            return {"centers": [1, 2], "obj": Packing()}
    """)
    run = call_entry(sandbox, code, "f", [{}], tmp_path / "r", timeout=20)
    assert run.outputs is None and run.execution.exc_type == "TypeError"
    assert "cannot be encoded" in run.error and "'Packing'" in run.error and "['obj']" in run.error


def test_harness_exit_without_return_is_an_error(sandbox, tmp_path):
    run = call_entry(sandbox, "import sys\ndef f():\n    sys.exit(0)\n", "f", [{}], tmp_path / "a", timeout=20)
    assert run.error == "RuntimeError: f() called exit(0) instead of returning"
    hard = call_entry(sandbox, "import os\ndef f():\n    os._exit(0)\n", "f", [{}], tmp_path / "b", timeout=20)
    assert hard.outputs is None and "outputs.json was not written" in hard.error


def test_harness_through_the_docker_sandbox(docker_client, tmp_path):
    docker_sandbox = DockerSandbox(memory_limit_mb=512, cpus=1, pids_limit=128, num_threads=1, client=docker_client)
    code = "import numpy as np\ndef f(x):\n    return np.asarray(x) ** 2, float('nan')\n"
    run = call_entry(docker_sandbox, code, "f", [{"args": [np.array([1.0, 3.0])]}], tmp_path / "d", timeout=60)
    assert run.error is None, run.execution.term_out
    squares, nan = run.outputs[0]
    assert squares.tolist() == [1.0, 9.0] and math.isnan(nan)
    missing = call_entry(docker_sandbox, code, "g", [{}], tmp_path / "m", timeout=60)
    assert missing.execution.exc_type == "AttributeError"
    assert missing.error == "AttributeError: program defines no function 'g'"


# ------------------------------------------------------------------------------- runner

RUN_DEPENDENT = dedent("""
    def f(run):
        if run == 1:
            return float("nan")
        return float(run + 1)
""")


def _score(run, outputs, harness):
    value = outputs[0]
    if not isinstance(value, float) or not math.isfinite(value):
        return RunScore(correct=False, error=f"run {run}: f returned {value!r}")
    return RunScore(correct=True, score=value, public={"value": value, "run": run},
                    private={"secret": -value}, output={"value": np.array(value)})


def test_evaluate_runs_one_invalid_run_makes_the_result_incorrect(sandbox, tmp_path):
    program = tmp_path / "program.py"
    program.write_text(RUN_DEPENDENT)
    result = evaluate_runs(program, tmp_path / "results", sandbox=sandbox, entry="f",
                           calls_for_run=lambda i: [{"args": [i]}], score_run=_score,
                           num_runs=3, timeout=20)
    assert result.correct is False and result.combined_score == 0.0
    assert result.num_runs == 3 and result.num_valid_runs == 2
    assert result.error == "run 1: f returned nan"
    assert [r.error for r in result.runs] == [None, "run 1: f returned nan", None]
    # public/private/output of the best correct run (run 2 scored 3.0)
    assert result.public_metrics == {"value": 3.0, "run": 2} and result.private_metrics == {"secret": -3.0}
    assert float(result.program_output["value"]) == 3.0
    assert all((tmp_path / "results" / "runs" / f"run-{i}" / "outputs.json").exists() for i in range(3))
    assert result.execution_time == pytest.approx(sum(r.exec_time for r in result.runs) / 3)


def test_evaluate_runs_averages_correct_runs_and_logs_crashes(sandbox, tmp_path):
    program = tmp_path / "program.py"
    program.write_text("def f(run):\n    return float(run + 1)\n")
    definitions = {"value": MetricDefinition(name="value", interpretation="higher_better")}
    result = evaluate_runs(program, tmp_path / "ok", sandbox=sandbox, entry="f",
                           calls_for_run=lambda i: [{"args": [i]}], score_run=_score,
                           num_runs=3, timeout=20, definitions=definitions)
    assert result.correct and result.combined_score == pytest.approx(2.0) and result.num_valid_runs == 3
    assert result.auxiliary_definitions == definitions

    program.write_text("def f(run):\n    return 1 / run\n")
    crashed = evaluate_runs(program, tmp_path / "crash", sandbox=sandbox, entry="f",
                            calls_for_run=lambda i: [{"args": [i]}], score_run=_score,
                            num_runs=2, timeout=20)
    assert not crashed.correct and crashed.combined_score == 0.0
    assert crashed.runs[0].exc_type == "ZeroDivisionError" and crashed.error.startswith("ZeroDivisionError")
    assert "Traceback" in crashed.runs[0].term_out
    assert crashed.runs[1].exc_type is None and crashed.num_valid_runs == 1
    # metrics of the best correct run even when the result is incorrect
    assert crashed.public_metrics == {"value": 1.0, "run": 1}
    only = evaluate_runs(program, tmp_path / "only", sandbox=sandbox, entry="f",
                         calls_for_run=lambda i: [{"args": [i]}], score_run=_score, num_runs=1, timeout=20)
    assert only.public_metrics == {} and only.program_output is None and only.num_valid_runs == 0


# ------------------------------------------------------------------------ result files


def _result(output=None, **kw) -> EvaluationResult:
    base = dict(
        combined_score=2.5,
        correct=True,
        public_metrics={"sum_of_radii": np.float64(2.5), "score_interpretation": "higher_better"},
        private_metrics={"reported_sum": 2.5},
        auxiliary_metrics={"spread": 0.25},
        auxiliary_definitions={"spread": MetricDefinition(name="Spread", source="auxiliary_dynamic")},
        auxiliary_errors={"auxiliary_static": "TimeoutError: too slow"},
        program_output=output,
        execution_time=0.5,
        num_runs=1,
        num_valid_runs=1,
        runs=[RunLog(run=0, exec_time=0.5, term_out="x" * 5000)],
    )
    base.update(kw)
    return EvaluationResult(**base)


def test_metrics_json_is_shinka_compatible_and_read_results_round_trips(tmp_path):
    result = _result(output={"radii": np.array([0.1, 0.2])})
    assert len(result.runs[0].term_out) == 4000
    write_results(result, tmp_path)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert {"combined_score", "public", "private"} <= set(metrics)
    assert metrics["combined_score"] == 2.5
    assert metrics["public"] == {"sum_of_radii": 2.5, "score_interpretation": "higher_better", "aux_spread": 0.25}
    assert metrics["private"] == {"reported_sum": 2.5}
    assert metrics["auxiliary"] == {"spread": 0.25}
    assert metrics["auxiliary_definitions"]["spread"]["source"] == "auxiliary_dynamic"
    assert metrics["execution_time_mean"] == 0.5 and metrics["num_valid_runs"] == 1
    assert json.loads((tmp_path / "correct.json").read_text()) == {"correct": True, "error": None}
    assert "program_output" not in metrics and "program_output" not in result.model_dump()

    back = read_results(tmp_path)
    assert back.model_dump() == result.model_dump()
    assert back.program_output["radii"].tolist() == [0.1, 0.2]
    assert result.summary() == {
        "combined_score": 2.5, "correct": True, "error": None,
        "public_metrics": {"sum_of_radii": 2.5, "score_interpretation": "higher_better"},
        "auxiliary_metrics": {"spread": 0.25},
    }


def test_correct_json_of_a_failed_result(tmp_path):
    write_results(EvaluationResult(correct=False, error="TimeoutError: 60 s"), tmp_path)
    assert json.loads((tmp_path / "correct.json").read_text()) == {"correct": False, "error": "TimeoutError: 60 s"}
    assert read_results(tmp_path).error == "TimeoutError: 60 s"
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        read_results(tmp_path / "nowhere")


class Opaque:
    def __init__(self, x):
        self.x = x


def test_program_output_goes_to_npz_json_or_pkl(tmp_path):
    write_results(_result(output={"centers": np.ones((3, 2)), "n": 3, "ok": True}), tmp_path)
    assert (tmp_path / "extra.npz").exists()
    loaded = load_program_output(tmp_path)
    assert loaded["centers"].shape == (3, 2) and int(loaded["n"]) == 3 and bool(loaded["ok"])

    write_results(_result(output={"tour": [0, 2, 1], "pair": (1, 2), "nested": {"a": np.arange(3)}}), tmp_path)
    assert (tmp_path / "extra.json").exists() and not (tmp_path / "extra.npz").exists()
    loaded = load_program_output(tmp_path)
    assert loaded["tour"] == [0, 2, 1] and loaded["pair"] == [1, 2]
    assert loaded["nested"]["a"].tolist() == [0, 1, 2]

    write_results(_result(output=[Opaque(7)]), tmp_path)
    assert (tmp_path / "extra.pkl").exists() and not (tmp_path / "extra.json").exists()
    assert load_program_output(tmp_path)[0].x == 7

    # no output: files written by the evaluator itself are left alone
    write_results(_result(output=None), tmp_path)
    assert load_program_output(tmp_path)[0].x == 7
    assert load_program_output(tmp_path / "empty") is None


# ------------------------------------------------------------------------------ problems


def copy_problem(tmp_path: Path, source: Path = SUM_SQUARES) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def test_load_problem_reads_the_folder():
    problem = load_problem(str(SUM_SQUARES))
    assert problem.name == "sum-squares" and problem.entry == "f"
    assert problem.loci == ("SETUP", "BODY") and problem.required_loci == ("BODY",)
    assert problem.timeout == 10 and problem.num_runs == 1
    assert (problem.score_name, problem.score_interpretation, problem.known_best) == ("closeness", "higher_better", 1.0)
    assert problem.static_auxiliary == SUM_SQUARES / "auxiliary_metrics.py"
    assert set(problem.alleles) == {"BODY", "SETUP"} and "SCALE = 0.5" in problem.alleles["SETUP"]["half_scale"]
    assert problem.description.startswith("# Sum of squares") and "# [SECTION: BODY]" in problem.initial_program
    assert problem.data_path is None and problem.directions == ("vectorise the sum", "avoid the Python loop")
    assert callable(problem.evaluator()) and problem.evaluator() is problem.evaluator()
    assert load_problem(SUM_SQUARES / "problem.yaml").directory == SUM_SQUARES
    assert PROBLEMS_DIR == Path(__file__).resolve().parents[1] / "swarm_evo" / "problems"


def test_load_problem_rejects_unknown_keys_and_bad_values(tmp_path):
    folder = copy_problem(tmp_path)
    yaml_path = folder / "problem.yaml"
    original = yaml_path.read_text()
    yaml_path.write_text(original + "timeout_per_call: 3\n")
    with pytest.raises(ProblemError, match=r"problem\.yaml.*unknown key 'timeout_per_call'"):
        load_problem(folder)
    yaml_path.write_text(original.replace("known_best: 1.0", "known_best: 1.0, best: 2"))
    with pytest.raises(ProblemError, match=r"unknown key 'score\.best'"):
        load_problem(folder)
    yaml_path.write_text(original.replace("required_loci: [BODY]", "required_loci: [LOOP]"))
    with pytest.raises(ProblemError, match=r"required_loci \['LOOP'\] are not in loci"):
        load_problem(folder)
    yaml_path.write_text(original.replace("entry: f\n", ""))
    with pytest.raises(ProblemError, match="missing key 'entry'"):
        load_problem(folder)
    yaml_path.write_text("name: [unclosed\n")
    with pytest.raises(ProblemError, match="not valid YAML"):
        load_problem(folder)
    with pytest.raises(ProblemError, match="unknown problem 'no-such-problem'.*circle-packing"):
        load_problem("no-such-problem")


@pytest.mark.parametrize("missing", ["description.md", "initial.py", "evaluate.py"])
def test_load_problem_names_a_missing_file(tmp_path, missing):
    folder = copy_problem(tmp_path)
    (folder / missing).unlink()
    with pytest.raises(ProblemError, match=rf"missing {missing}.*add"):
        load_problem(folder)


def test_load_problem_checks_the_initial_program_and_alleles(tmp_path):
    folder = copy_problem(tmp_path)
    initial = folder / "initial.py"
    original = initial.read_text()
    initial.write_text(original.replace("# [SECTION: SETUP]\n", ""))
    with pytest.raises(ProblemError, match=r"initial\.py: missing section marker.*SETUP"):
        load_problem(folder)
    initial.write_text(original.replace("def f(x):", "def g(x):"))
    with pytest.raises(ProblemError, match="defines no top-level function 'f'"):
        load_problem(folder)
    initial.write_text(original + "def broken(:\n")
    with pytest.raises(ProblemError, match="syntax error"):
        load_problem(folder)
    initial.write_text(original)
    (folder / "alleles" / "LOOP").mkdir()
    (folder / "alleles" / "LOOP" / "x.py").write_text("pass\n")
    with pytest.raises(ProblemError, match="'LOOP' is not a locus"):
        load_problem(folder)


def test_data_file_resolution_order(tmp_path, monkeypatch):
    folder = copy_problem(tmp_path)
    yaml_path = folder / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("data_file: null", "data_file: sums/input.txt"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SWARM_EVO_DATA_DIR", raising=False)
    with pytest.raises(ProblemError, match=r"data file 'sums/input.txt' not found.*--data-dir"):
        load_problem(folder)
    for base in ("explicit", "env", "data"):
        (tmp_path / base / "sums").mkdir(parents=True)
        (tmp_path / base / "sums" / "input.txt").write_text(base)
    assert load_problem(folder).data_path == (tmp_path / "data" / "sums" / "input.txt").resolve()
    monkeypatch.setenv("SWARM_EVO_DATA_DIR", str(tmp_path / "env"))
    assert load_problem(folder).data_path.read_text() == "env"
    assert load_problem(folder, data_dir=tmp_path / "explicit").data_path.read_text() == "explicit"
    with pytest.raises(ProblemError, match="--data-dir"):
        load_problem(folder, data_dir=tmp_path / "nowhere")


# ------------------------------------------------------------------------------- service


def test_evaluate_program_writes_results_with_static_auxiliary(sandbox, tmp_path):
    problem = load_problem(SUM_SQUARES)
    program = tmp_path / "main.py"
    program.write_text(problem.initial_program.replace("SCALE = 1.0", "SCALE = 1.5"))
    result = evaluate_program(problem, program, tmp_path / "results", sandbox=sandbox, num_runs=2)
    # run 0: x=[1,2,3] -> 21 vs 14; run 1: x=[0.5,-1.5] -> 3.75 vs 2.5
    assert result.correct and result.num_runs == 2
    assert result.combined_score == pytest.approx((1 / 8 + 1 / 2.25) / 2)
    assert result.public_metrics["closeness"] == pytest.approx(1 / 2.25)
    assert result.auxiliary_metrics == {"input_length": 2.0, "value_sqrt": pytest.approx(math.sqrt(3.75))}
    assert result.auxiliary_definitions["input_length"].source == "auxiliary_static"
    assert result.auxiliary_definitions["closeness"].source == "primary"
    on_disk = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert on_disk["public"]["aux_input_length"] == 2.0
    assert read_results(tmp_path / "results").auxiliary_metrics == result.auxiliary_metrics
    assert json.loads((tmp_path / "results" / "correct.json").read_text()) == {"correct": True, "error": None}

    plain = evaluate_program(problem, program, tmp_path / "plain", sandbox=sandbox, use_static_auxiliary=False)
    assert plain.correct and plain.auxiliary_metrics == {}


def test_evaluate_program_failed_program_is_a_result_not_an_error(sandbox, tmp_path):
    problem = load_problem(SUM_SQUARES)
    program = tmp_path / "main.py"
    program.write_text("def f(x):\n    return 'fourteen'\n")
    result = evaluate_program(problem, program, tmp_path / "results", sandbox=sandbox)
    assert not result.correct and result.combined_score == 0.0
    assert result.error == "f(x) returned 'fourteen', expected a finite number"
    assert result.auxiliary_metrics == {} and not (tmp_path / "results" / "auxiliary").exists()
    assert json.loads((tmp_path / "results" / "correct.json").read_text())["correct"] is False


def test_evaluate_program_missing_program_is_an_evaluator_error(sandbox, tmp_path):
    with pytest.raises(EvaluatorError, match="not found"):
        evaluate_program(load_problem(SUM_SQUARES), tmp_path / "absent.py", tmp_path / "r", sandbox=sandbox)


def test_broken_evaluator_raises_evaluator_error(sandbox, tmp_path):
    problem = load_problem(BROKEN)
    program = tmp_path / "main.py"
    program.write_text(problem.initial_program)
    with pytest.raises(EvaluatorError, match=r"RuntimeError: evaluator bug: this evaluator always fails") as info:
        evaluate_program(problem, program, tmp_path / "r", sandbox=sandbox)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_evaluator_contract_violations(sandbox, tmp_path):
    folder = copy_problem(tmp_path)
    program = tmp_path / "main.py"
    program.write_text("def f(x):\n    return 1.0\n")
    (folder / "evaluate.py").write_text("def evaluate(program_path, results_dir, **kwargs):\n    return {'combined_score': 1}\n")
    with pytest.raises(EvaluatorError, match="returned dict, expected an EvaluationResult"):
        evaluate_program(load_problem(folder), program, tmp_path / "a", sandbox=sandbox)

    other = copy_problem(tmp_path / "nan")
    (other / "evaluate.py").write_text(dedent("""
        from swarm_evo.evaluation import EvaluationResult
        def evaluate(program_path, results_dir, **kwargs):
            return EvaluationResult(combined_score=float("nan"), correct=True, num_runs=1)
    """))
    result = evaluate_program(load_problem(other), program, tmp_path / "b", sandbox=sandbox)
    assert not result.correct and result.combined_score == 0.0 and "non-finite" in result.error

    third = copy_problem(tmp_path / "noimport")
    (third / "evaluate.py").write_text("import no_such_module_xyz\n")
    with pytest.raises(EvaluatorError, match="ModuleNotFoundError"):
        evaluate_program(load_problem(third), program, tmp_path / "c", sandbox=sandbox)


def test_evaluator_may_import_its_siblings_relatively(sandbox, tmp_path):
    folder = copy_problem(tmp_path)
    (folder / "reference.py").write_text("SCORE = 0.75\n")
    (folder / "evaluate.py").write_text(dedent("""
        from .reference import SCORE
        from swarm_evo.evaluation import EvaluationResult
        def evaluate(program_path, results_dir, **kwargs):
            return EvaluationResult(combined_score=SCORE, correct=True, num_runs=1)
    """))
    program = tmp_path / "main.py"
    program.write_text("def f(x):\n    return 1.0\n")
    result = evaluate_program(load_problem(folder), program, tmp_path / "r", sandbox=sandbox,
                              use_static_auxiliary=False)
    assert result.combined_score == 0.75


def test_the_run_deadline_bounds_a_whole_multi_run_evaluation(sandbox, tmp_path):
    """Issue 31 item 8: with num_runs > 1 each run used to get min(timeout, time left), so one
    evaluation could take num_runs times the time left; the time left bounds the whole
    evaluation, auxiliary metrics included."""
    from swarm_evo.objective import ProblemObjective

    folder = copy_problem(tmp_path)
    yaml_path = folder / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("num_runs: 1", "num_runs: 4"))
    slow = load_problem(folder).initial_program.replace("def f(x):\n", "def f(x):\n    import time; time.sleep(1.0)\n")
    objective = ProblemObjective(load_problem(folder))
    objective.time_left = lambda: 2.0  # what the session sets: Budget.time_left
    started = time.monotonic()
    assessed = objective.assess(sandbox, slow, tmp_path / "multi", timeout=2.0)  # the step's exec_timeout
    assert time.monotonic() - started < 3.5, "4 runs of 1 s each do not fit in the 2 s left"
    evaluation = assessed.evaluation
    assert not evaluation["correct"] and assessed.metric is None
    assert "TimeoutError" in evaluation["error"]

    yaml_path.write_text(yaml_path.read_text().replace("num_runs: 4", "num_runs: 1"))
    aux = folder / "auxiliary_metrics.py"
    aux.write_text(aux.read_text().replace("    x = program_output", "    import time; time.sleep(5)\n    x = program_output"))
    objective = ProblemObjective(load_problem(folder))
    objective.time_left = lambda: 2.5  # what the session sets: Budget.time_left
    program = tmp_path / "main.py"
    program.write_text(objective.problem.initial_program)
    started = time.monotonic()
    result = objective.evaluate(sandbox, program, tmp_path / "aux", timeout=2.5)
    assert time.monotonic() - started < 4.5, "the auxiliary metrics end by the deadline too"
    assert result.correct and result.auxiliary_metrics == {}
    assert "TimeoutError" in result.auxiliary_errors["auxiliary_static"]
