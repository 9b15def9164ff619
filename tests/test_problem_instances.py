"""Problem instances (issue 17 item 1): the tsp problem on any TSPLIB file of the data directory
(``--instance``, ``problem.instance``, the flow's ``instance``): resolution, the optimum table,
scores recomputed independently with numpy, texts naming the instance, clear errors, and a real
CLI run on kroA100 with the offline model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from swarm_evo.evaluation import ProblemError, evaluate_program, load_problem
from swarm_evo.population.genes import replace_gene
from swarm_evo.sandbox import LocalSandbox

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TSPLIB_OPTIMA = {"berlin52": 7542, "kroA100": 21282, "ch150": 6528, "a280": 2579}  # TSPLIB 95 STSP.html


def _coords(path: Path) -> np.ndarray:
    """NODE_COORD_SECTION of a TSPLIB file, read here without the problem's parser."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "NODE_COORD_SECTION") + 1
    rows = [line.split() for line in lines[start:] if line.strip() and line.strip() != "EOF"]
    return np.array([[float(x), float(y)] for _, x, y in rows])


def _nint_length(coords: np.ndarray, tour: np.ndarray) -> int:
    """TSPLIB EUC_2D length of the closed tour: sum of nint(euclidean distance)."""
    a, b = coords[tour], coords[np.roll(tour, -1)]
    return int(np.sum(np.floor(np.sqrt(np.sum((a - b) ** 2, axis=1)) + 0.5)))


@pytest.mark.parametrize("instance", sorted(TSPLIB_OPTIMA))
def test_each_shared_instance_resolves_with_its_optimum_and_texts(instance):
    problem = load_problem("tsp", SHARED_DATA, instance)
    n = len(_coords(SHARED_DATA / "tsp" / f"{instance}.tsp"))
    assert problem.instance == instance and problem.label == f"tsp-{instance}"
    assert problem.data_path == (SHARED_DATA / "tsp" / f"{instance}.tsp").resolve()
    assert problem.known_best == TSPLIB_OPTIMA[instance]  # kroA100 and a280 files have no OPTIMUM line: the table
    assert problem.instance_facts["num_cities"] == n
    assert problem.title == f"Travelling salesman (TSPLIB {instance}, {n} cities)"
    assert f"TSPLIB instance `{instance}`" in problem.description and f"{n} cities" in problem.description
    assert f"combined_score = {TSPLIB_OPTIMA[instance]} / L" in problem.description
    assert "at most 60 seconds" in problem.description
    if instance != "berlin52":
        assert "berlin52" not in problem.title + problem.description and "52 cities" not in problem.description


def test_the_default_instance_is_berlin52():
    assert load_problem("tsp", SHARED_DATA).instance == "berlin52"


def test_kroA100_scores_optimum_over_the_numpy_length_of_a_known_tour(tmp_path):
    problem = load_problem("tsp", SHARED_DATA, "kroA100")
    coords = _coords(SHARED_DATA / "tsp" / "kroA100.tsp")
    tours = {"identity": np.arange(100), "reversed_odd_first": np.r_[np.arange(1, 100, 2), np.arange(0, 100, 2)][::-1]}
    sandbox = LocalSandbox(num_threads=1)
    for name, tour in tours.items():
        program = tmp_path / f"{name}.py"
        program.write_text(f"def solve(coords):\n    return {tour.tolist()!r}\n")
        result = evaluate_program(problem, program, tmp_path / name, sandbox=sandbox)
        length = _nint_length(coords, tour)
        assert result.correct, result.error
        assert result.public_metrics["tour_length"] == length
        assert result.public_metrics["num_cities"] == 100 and result.public_metrics["optimum"] == 21282
        assert result.combined_score == pytest.approx(21282 / length)
    assert _nint_length(coords, np.arange(100)) > 100_000  # sanity: the identity tour is poor


def test_alleles_give_valid_tours_on_a280_and_the_initial_program_is_quick():
    """The offline model's programs are built from these sections: each, alone in the initial
    program, must give a valid tour on 280 cities well within the 60 s timeout (the ILS
    allele stops itself after TIME_LIMIT_SECONDS)."""
    import time

    problem = load_problem("tsp", SHARED_DATA, "a280")
    spec = importlib.util.spec_from_file_location("tsp_evaluate", problem.directory / "evaluate.py")
    tsp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tsp)
    coords = _coords(problem.data_path)
    for locus, texts in problem.alleles.items():
        for name, text in texts.items():
            namespace: dict = {}
            exec(compile(replace_gene(problem.initial_program, locus, text), f"{locus}/{name}", "exec"), namespace)
            started = time.monotonic()
            score = tsp.score_tour(namespace["solve"](coords.copy()), coords, 2579)
            seconds = time.monotonic() - started
            assert seconds < problem.timeout / 2, (locus, name, seconds)
            if name == "nearest_neighbour_duplicate":
                assert not score.correct
            else:
                assert score.correct, (locus, name, score.error)
                assert 2579 <= score.public["tour_length"] < 40_000


def test_unknown_instance_names_the_value_the_directories_and_the_instances():
    with pytest.raises(ProblemError) as err:
        load_problem("tsp", SHARED_DATA, "kroA1000")
    message = str(err.value)
    assert "unknown instance 'kroA1000' of problem 'tsp'" in message and "tsp/kroA1000.tsp" in message
    assert str(SHARED_DATA.resolve()) in message
    assert "available instances: a280, berlin52, ch150, kroA100" in message
    with pytest.raises(ProblemError, match="not an instance name"):
        load_problem("tsp", SHARED_DATA, "../../etc/passwd")


def test_an_instance_for_a_problem_without_instances_is_an_error():
    with pytest.raises(ProblemError, match="problem 'circle-packing' takes no instance \\(got 'kroA100'\\)"):
        load_problem("circle-packing", None, "kroA100")


def test_file_and_table_must_agree_and_an_unknown_optimum_is_refused(tmp_path):
    (tmp_path / "tsp").mkdir()
    text = (SHARED_DATA / "tsp" / "berlin52.tsp").read_text()
    (tmp_path / "tsp" / "berlin52.tsp").write_text(text.replace("OPTIMUM: 7542", "OPTIMUM: 7000"))
    with pytest.raises(ProblemError, match="best known score of 7000.0 but problem.yaml instances.known_best.berlin52"):
        load_problem("tsp", tmp_path, "berlin52")
    (tmp_path / "tsp" / "mine.tsp").write_text("NAME: mine\nTYPE: TSP\nDIMENSION: 4\nEDGE_WEIGHT_TYPE: EUC_2D\n"
                                               "NODE_COORD_SECTION\n1 0 0\n2 0 3\n3 4 3\n4 4 0\nEOF\n")
    with pytest.raises(ProblemError, match="instance 'mine' of problem 'tsp' has no known best score"):
        load_problem("tsp", tmp_path, "mine")
    (tmp_path / "tsp" / "mine.tsp").write_text((tmp_path / "tsp" / "mine.tsp").read_text().replace(
        "DIMENSION: 4\n", "DIMENSION: 4\nOPTIMUM: 14\n"))
    problem = load_problem("tsp", tmp_path, "mine")
    assert (problem.known_best, problem.title) == (14.0, "Travelling salesman (TSPLIB mine, 4 cities)")


def test_problem_yaml_instances_are_checked(tmp_path):
    import shutil

    folder = tmp_path / "tsp2"
    shutil.copytree(load_problem("tsp", SHARED_DATA).directory, folder)
    spec = yaml.safe_load((folder / "problem.yaml").read_text())
    spec["instances"]["data_file"] = "tsp/fixed.tsp"
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ProblemError, match=r"instances.data_file: .*must contain \{instance\} exactly once"):
        load_problem(folder, SHARED_DATA)
    spec["instances"]["data_file"] = "tsp/{instance}.tsp"
    spec["instances"]["typo"] = 1
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ProblemError, match="unknown key 'instances.typo' \\(allowed: data_file, default"):
        load_problem(folder, SHARED_DATA)
    del spec["instances"]["typo"]
    spec["score"]["known_best"] = 7542
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ProblemError, match="with instances put it under instances.known_best"):
        load_problem(folder, SHARED_DATA)
    del spec["score"]["known_best"]
    (folder / "description.md").write_text("{{ no_such_fact }}")
    (folder / "problem.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ProblemError, match="description.md: cannot render .*'no_such_fact' is undefined.*num_cities"):
        load_problem(folder, SHARED_DATA)


def test_config_key_problem_instance(tmp_path):
    from swarm_evo.config import ConfigError, RunConfig, load_config
    from swarm_evo.objective.load import load_objective

    config = RunConfig().with_overrides({"problem.instance": "a280"})
    assert config.problem.instance == "a280" and RunConfig().problem.instance is None
    objective = load_objective(None, "tsp", SHARED_DATA, None, config.problem.instance)
    assert objective.instance == "a280" and objective.prompt_view()["name"].startswith("Travelling salesman (TSPLIB a280")
    with pytest.raises(ConfigError, match="applies to problems such as tsp, not to competition 'sklearn-wine'"):
        load_objective("sklearn-wine", None, SHARED_DATA, None, "a280")
    path = tmp_path / "config.yaml"
    path.write_text("problem:\n  instance: ch150\n")
    assert load_config(path).problem.instance == "ch150"
    path.write_text("problem:\n  instances: ch150\n")
    with pytest.raises(ConfigError, match="unknown key 'problem.instances'"):
        load_config(path)


# ---------------------------------------------------------------------------------------------
# The command line


@pytest.mark.parametrize(("argv", "words"), [
    (["--problem", "tsp", "--instance", "nope"], ["unknown instance 'nope' of problem 'tsp'", "available instances: "]),
    (["--problem", "circle-packing", "--instance", "a280"], ["problem 'circle-packing' takes no instance"]),
    (["--competition-id", "sklearn-wine", "--data-dir", "data", "--instance", "a280"],
     ["--instance a280 applies to problems", "not to competition sklearn-wine"]),
])
def test_cli_bad_instance_is_exit_2_with_one_line(capsys, tmp_path, argv, words):
    from swarm_evo.cli.commands import main

    assert main(["run", *argv, "--data-dir", str(SHARED_DATA), "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(word in err for word in words), err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cli_run_on_kroA100(prefect_server, tmp_path, capsys):
    """``swarm-evo run --problem tsp --instance kroA100`` on 4 offline steps: the journal, the
    report and the prompts are about kroA100; the run directory refuses another instance."""
    from swarm_evo.cli.commands import main
    from swarm_evo.objective import ProblemObjective
    from swarm_evo.run.session import RunDirectoryError, check_run_dir

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 2, "phase1_target_nodes": 2,
                                                 "parallel_workers": 1}}))
    run_dir = tmp_path / "run"
    code = main(["run", "--problem", "tsp", "--instance", "kroA100", "--data-dir", str(SHARED_DATA),
                 "--max-steps", "4", "--model", "offline", "--run-dir", str(run_dir), "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "instance: kroA100" in out and "best known: 21282.0" in out
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["problem"] == "tsp" and journal["info"]["instance"] == "kroA100"
    assert journal["info"]["config"]["problem"]["instance"] == "kroA100"
    assert len(journal["nodes"]) == 4
    report = json.loads((run_dir / "problem_report.json").read_text())
    assert report["instance"] == "kroA100" and report["known_best"] == 21282
    best = json.loads((run_dir / "best_metrics.json").read_text())
    assert best["public"]["num_cities"] == 100
    assert report["raw_score"] == best["public"]["tour_length"] >= 21282
    assert report["score"] == pytest.approx(21282 / report["raw_score"])
    prompt = (run_dir / "nodes" / journal["nodes"][0]["id"] / "prompt-draft.md").read_text()
    assert "TSPLIB kroA100, 100 cities" in prompt and "Each evaluation run may take at most 60" in prompt
    assert "each evaluation run of this program may take at most 60.0 s" in prompt  # guidelines: not the 1 h step limit
    assert "may run at most 1h" not in prompt
    assert "berlin52" not in prompt and "52 cities" not in prompt
    with pytest.raises(RunDirectoryError, match="belongs to instance 'kroA100' of tsp, not 'a280'"):
        check_run_dir(run_dir, ProblemObjective(load_problem("tsp", SHARED_DATA, "a280")))


@pytest.mark.slow
def test_cli_eval_run_on_an_instance(prefect_server, tmp_path, capsys):
    """``swarm-evo eval run --problem tsp --instance kroA100``: the Eval Service flow evaluates
    on kroA100 (the tour's numpy length, the optimum's ratio); an unknown instance is exit 2
    with one line naming it, before any flow run."""
    from swarm_evo.cli.commands import main

    coords = _coords(SHARED_DATA / "tsp" / "kroA100.tsp")
    program = tmp_path / "identity.py"
    program.write_text("def solve(coords):\n    return list(range(len(coords)))\n")
    out = tmp_path / "eval"
    code = main(["eval", "run", "--problem", "tsp", "--instance", "kroA100", "--data-dir", str(SHARED_DATA),
                 str(program), "--results-dir", str(out)])
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    length = _nint_length(coords, np.arange(100))
    assert metrics["public"]["num_cities"] == 100 and metrics["public"]["tour_length"] == length
    assert metrics["combined_score"] == pytest.approx(21282 / length)
    capsys.readouterr()
    assert main(["eval", "run", "--problem", "tsp", "--instance", "nope", "--data-dir", str(SHARED_DATA),
                 str(program), "--results-dir", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown instance 'nope' of problem 'tsp'" in err, err
