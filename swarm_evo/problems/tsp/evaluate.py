"""Evaluator of the TSP problem: a TSPLIB EUC_2D instance (berlin52 by default).

The instance is a data file ``tsp/<instance>.tsp`` (problem.yaml ``instances``; chosen by
``--instance``/``problem.instance``, resolved by :func:`swarm_evo.evaluation.problem.load_problem`
into ``problem.data_path``; :func:`instance_facts` gives the texts its city count). The
candidate defines ``solve(coords)``: coords a float array of shape (n, 2) (city i = the
(i+1)-th node of the file), returning a tour, the n city indices 0-based in visiting order
(the tour closes back to its first city). Validation: a list/array of exactly n integers
(bools, floats such as 1.5 or 3.0, NaN and strings are rejected), each in [0, n), every city
exactly once (duplicates and missing cities are named).

Length: TSPLIB EUC_2D, ``d(i, j) = int(sqrt(dx² + dy²) + 0.5)`` (TSPLIB 95, Reinelt 1991,
"nint"), summed over the closed tour. combined_score = optimum / length (1.0 at the optimum,
e.g. 7542 for berlin52, 21282 for kroA100), the optimum taken from the file's ``OPTIMUM`` line
or problem.yaml's table ``instances.known_best`` (TSPLIB 95's list of optima, cited there).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from swarm_evo.evaluation.contract import EvaluationResult, MetricDefinition
from swarm_evo.evaluation.runner import RunScore, evaluate_runs

MAX_LISTED = 5
"""At most this many offending positions/cities are listed in an error message."""


class TsplibError(ValueError):
    """The instance file is not a supported TSPLIB file; the message names the file and line."""


class TourError(ValueError):
    """The program's tour is not a permutation of the cities; the message names the culprits."""


class TspInstance(NamedTuple):
    """A parsed TSPLIB instance: name, coords (n, 2) float in file order, optimum or None."""

    name: str
    coords: np.ndarray
    optimum: float | None


def parse_tsplib(path: Path) -> TspInstance:
    """Parse a TSPLIB ``TYPE: TSP`` file with ``EDGE_WEIGHT_TYPE: EUC_2D`` coordinates.

    Reads the specification lines (``KEY: value``; ``OPTIMUM`` is an optional extension some
    distributions add), then ``NODE_COORD_SECTION`` lines ``<id> <x> <y>`` until ``EOF`` or the
    end of the file. Nodes are returned in id order.

    Raises:
        TsplibError: unreadable file, an EDGE_WEIGHT_TYPE other than EUC_2D, a malformed
            coordinate line, duplicate/missing node ids or a DIMENSION mismatch.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise TsplibError(f"cannot read TSPLIB file {path}: {exc}") from exc
    spec: dict[str, str] = {}
    nodes: dict[int, tuple[float, float]] = {}
    in_coords = False
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if line.upper() == "EOF":
            break
        if in_coords:
            parts = line.split()
            if len(parts) != 3:
                if ":" in line or parts[0].isalpha() or parts[0].endswith("_SECTION"):
                    break  # another section starts
                raise TsplibError(f"{path}:{lineno}: expected '<id> <x> <y>', got {line!r}")
            try:
                node, x, y = int(parts[0]), float(parts[1]), float(parts[2])
            except ValueError as exc:
                raise TsplibError(f"{path}:{lineno}: bad coordinate line {line!r}: {exc}") from exc
            if node in nodes:
                raise TsplibError(f"{path}:{lineno}: node {node} appears twice")
            nodes[node] = (x, y)
            continue
        if line.upper().startswith("NODE_COORD_SECTION"):
            kind = spec.get("EDGE_WEIGHT_TYPE")
            if kind != "EUC_2D":
                raise TsplibError(
                    f"{path}: EDGE_WEIGHT_TYPE {kind!r} is not supported; only EUC_2D instances "
                    "(nint Euclidean distances) can be evaluated"
                )
            in_coords = True
            continue
        if line.upper().endswith("_SECTION"):
            raise TsplibError(f"{path}:{lineno}: section {line!r} is not supported (need NODE_COORD_SECTION)")
        if ":" in line:
            key, value = line.split(":", 1)
            spec[key.strip().upper()] = value.strip()
    if spec.get("EDGE_WEIGHT_TYPE") != "EUC_2D":
        raise TsplibError(
            f"{path}: EDGE_WEIGHT_TYPE {spec.get('EDGE_WEIGHT_TYPE')!r} is not supported; only EUC_2D"
        )
    if not nodes:
        raise TsplibError(f"{path}: no NODE_COORD_SECTION coordinates found")
    ids = sorted(nodes)
    if "DIMENSION" in spec:
        try:
            dimension = int(spec["DIMENSION"])
        except ValueError as exc:
            raise TsplibError(f"{path}: DIMENSION {spec['DIMENSION']!r} is not an integer") from exc
        if dimension != len(ids):
            raise TsplibError(f"{path}: DIMENSION {dimension} but {len(ids)} coordinate lines")
    optimum = None
    if "OPTIMUM" in spec:
        try:
            optimum = float(spec["OPTIMUM"])
        except ValueError as exc:
            raise TsplibError(f"{path}: OPTIMUM {spec['OPTIMUM']!r} is not a number") from exc
    coords = np.array([nodes[i] for i in ids], dtype=float)
    return TspInstance(spec.get("NAME", path.stem), coords, optimum)


def instance_facts(data_path: Path) -> dict[str, Any]:
    """Facts of one instance file for the problem's texts (problem.yaml ``instances.facts``):
    ``{"num_cities": n, "known_best": the file's OPTIMUM or None, "comment": its COMMENT line
    (or its NAME)}``.

    Raises:
        TsplibError: the file is not a supported TSPLIB file (see :func:`parse_tsplib`).
    """
    instance = parse_tsplib(data_path)
    comment = instance.name
    for line in Path(data_path).read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip().upper() == "COMMENT" and value.strip():
            comment = value.strip()
            break
    return {"num_cities": int(instance.coords.shape[0]), "known_best": instance.optimum, "comment": comment}


def euc_2d(coords: np.ndarray, i: int, j: int) -> int:
    """TSPLIB EUC_2D distance between cities i and j: ``int(sqrt(dx² + dy²) + 0.5)``."""
    dx = coords[i, 0] - coords[j, 0]
    dy = coords[i, 1] - coords[j, 1]
    return int(math.sqrt(dx * dx + dy * dy) + 0.5)


def tour_length(tour: list[int], coords: np.ndarray) -> int:
    """Length of the closed tour (sum of EUC_2D distances, last city back to the first)."""
    n = len(tour)
    return sum(euc_2d(coords, tour[k], tour[(k + 1) % n]) for k in range(n))


def _as_int(value: Any) -> int | None:
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    return None


def validate_tour(output: Any, n: int) -> list[int]:
    """Check that ``output`` is a permutation of ``range(n)`` made of integers.

    Returns:
        The tour as a list of Python ints.

    Raises:
        TourError: not a list/tuple/1-D array, wrong length, a non-integer entry (bool, float,
            NaN, string...), an index outside [0, n), repeated cities or missing cities; the
            message names positions, values and cities.
    """
    if isinstance(output, np.ndarray):
        if output.ndim != 1:
            raise TourError(f"solve must return a 1-D sequence of {n} city indices, got an array of shape {output.shape}")
        if output.dtype.kind not in "iu":
            bad = [k for k in range(output.size) if _as_int(output[k]) is None]
            shown = ", ".join(f"tour[{k}] = {output[k]!r}" for k in bad[:MAX_LISTED])
            raise TourError(f"city indices must be integers, got dtype {output.dtype}: {shown}")
        items = [int(v) for v in output]
    elif isinstance(output, (list, tuple)):
        items = []
        bad = []
        for k, value in enumerate(output):
            as_int = _as_int(value)
            if as_int is None:
                bad.append(f"tour[{k}] = {value!r} ({type(value).__name__})")
            items.append(as_int)
        if bad:
            more = f" (and {len(bad) - MAX_LISTED} more)" if len(bad) > MAX_LISTED else ""
            raise TourError("city indices must be integers: " + ", ".join(bad[:MAX_LISTED]) + more)
    else:
        raise TourError(f"solve must return a list of {n} city indices, got {type(output).__name__}")
    if len(items) != n:
        raise TourError(f"the tour must visit all {n} cities exactly once, got {len(items)} entries")
    out_of_range = [(k, c) for k, c in enumerate(items) if not 0 <= c < n]
    if out_of_range:
        shown = ", ".join(f"tour[{k}] = {c}" for k, c in out_of_range[:MAX_LISTED])
        raise TourError(f"city indices must be in [0, {n - 1}]: {shown}")
    positions: dict[int, list[int]] = {}
    for k, c in enumerate(items):
        positions.setdefault(c, []).append(k)
    repeated = [(c, ks) for c, ks in positions.items() if len(ks) > 1]
    if repeated:
        missing = sorted(set(range(n)) - set(positions))
        shown = ", ".join(f"city {c} at positions {ks}" for c, ks in repeated[:MAX_LISTED])
        raise TourError(f"cities visited more than once: {shown}; missing cities: {missing[:MAX_LISTED * 2]}")
    return items


def score_tour(output: Any, coords: np.ndarray, optimum: float, score_name: str = "tour_length") -> RunScore:
    """Validate one ``solve(coords)`` output and score it: optimum / recomputed length.

    Returns a RunScore with public ``{score_name: length, score_interpretation, optimum,
    gap_pct, num_cities}`` and output ``{"tour": int array (n,), "coords": float array (n, 2)}``,
    or an incorrect one carrying the TourError message.
    """
    n = coords.shape[0]
    try:
        tour = validate_tour(output, n)
    except TourError as exc:
        return RunScore(correct=False, error=str(exc))
    length = tour_length(tour, coords)
    if length <= 0:
        return RunScore(correct=False, error=f"degenerate instance: tour length {length}")
    public = {
        score_name: length,
        "score_interpretation": "lower_better",
        "tour_length": length,
        "optimum": optimum,
        "gap_pct": 100.0 * (length - optimum) / optimum,
        "num_cities": n,
    }
    return RunScore(
        correct=True,
        score=float(optimum / length),
        public=public,
        output={"tour": np.asarray(tour, dtype=np.int64), "coords": coords},
    )


def load_instance(problem) -> TspInstance:
    """The problem's instance (``problem.data_path``) with its optimum (file or known_best).

    Raises:
        TsplibError: no data file, an unsupported file, or no optimum anywhere.
    """
    if problem.data_path is None:
        raise TsplibError(f"problem {problem.name!r} has no data file (problem.yaml data_file, --data-dir)")
    instance = parse_tsplib(problem.data_path)
    optimum = instance.optimum if instance.optimum is not None else problem.known_best
    if optimum is None or not optimum > 0:
        raise TsplibError(
            f"{problem.data_path}: no OPTIMUM line and no positive score.known_best in problem.yaml; "
            "one of them is needed for the score optimum / length"
        )
    return instance._replace(optimum=float(optimum))


def evaluate(program_path: str, results_dir: str, *, sandbox, problem, timeout: float, num_runs: int,
             **kwargs: Any) -> EvaluationResult:
    """Run ``solve(coords)`` in the sandbox ``num_runs`` times and score each tour.

    Raises:
        TsplibError: the instance cannot be loaded (an evaluator failure, not the program's).
    """
    instance = load_instance(problem)
    definitions = {
        problem.score_name: MetricDefinition(
            name=problem.score_name,
            description=f"Length of the closed tour through the {len(instance.coords)} cities of {instance.name} "
            "(TSPLIB EUC_2D distances, recomputed by the evaluator)",
            interpretation="lower_better",
            formula="sum_k int(sqrt(dx^2 + dy^2) + 0.5); combined_score = optimum / length",
            source="primary",
        )
    }
    return evaluate_runs(
        Path(program_path),
        Path(results_dir),
        sandbox=sandbox,
        entry=problem.entry,
        calls_for_run=lambda run: [{"args": [instance.coords.copy()], "kwargs": {}}],
        score_run=lambda run, outputs, harness: score_tour(
            outputs[0], instance.coords, instance.optimum, problem.score_name
        ),
        num_runs=num_runs,
        timeout=timeout,
        definitions=definitions,
    )
