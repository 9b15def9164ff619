"""Problems: the task-agnostic side of the Eval Service (SPEC §11; seed 002 "任务无关").

A problem is a folder::

    problem.yaml           name, title, entry, loci, required_loci, timeout, num_runs, score,
                           data_file or instances, directions (see ProblemSpec)
    description.md         the task statement shown to the LLM
    initial.py             the seed program: a `# [SECTION: NAME]` marker per locus, defines `entry`
    evaluate.py            `evaluate(program_path, results_dir, *, sandbox, problem, timeout,
                           num_runs, **kwargs) -> EvaluationResult` (primary metrics)
    auxiliary_metrics.py   optional static auxiliary metrics (swarm_evo.evaluation.auxiliary)
    alleles/<LOCUS>/*.py   optional alternative section texts (the offline model swaps them in)

:func:`load_problem` reads and checks a folder (a built-in name or a path) and returns a
:class:`Problem`; every defect is a :class:`ProblemError` naming the file, the field and the fix.
``evaluate.py`` is trusted code (it ships with the problem) and is imported on the host.
Data directories, data files and instances: :mod:`swarm_evo.evaluation.problem_data`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from swarm_evo.evaluation.contract import EvaluationResult, Interpretation
from swarm_evo.evaluation.problem_data import (  # noqa: F401 (DATA_DIR_ENV, data_search_dirs: re-exported)
    DATA_DIR_ENV,
    ProblemError,
    data_search_dirs,
    instance_known_best,
    render_text,
    resolve_data_file,
    resolve_instance,
)
from swarm_evo.evaluation.problem_spec import ProblemSpec, ScoreSpec, read_spec  # noqa: F401 (ScoreSpec: re-exported)
from swarm_evo.population.genes import parse_genes
from swarm_evo.population.source import parse_program

PROBLEM_FILE = "problem.yaml"
DESCRIPTION_FILE = "description.md"
INITIAL_FILE = "initial.py"
EVALUATOR_FILE = "evaluate.py"
STATIC_AUXILIARY_FILE = "auxiliary_metrics.py"
ALLELES_DIR = "alleles"
EVALUATE_FUNCTION = "evaluate"

BUILTIN_PROBLEMS: tuple[str, ...] = ("circle-packing", "tsp", "count-primes")
"""Names of the problems shipped in :data:`PROBLEMS_DIR` (folder = name with ``-`` -> ``_``)."""

PROBLEMS_DIR = Path(__file__).resolve().parents[1] / "problems"
"""``swarm_evo/problems``: the built-in problem folders (circle_packing/, tsp/, count_primes/)."""

class Problem(BaseModel):
    """A loaded, checked problem (see the module docstring for the folder layout).

    Fields: ``name``, ``title``, ``directory`` (absolute), ``description`` (description.md),
    ``initial_program`` (initial.py), ``entry``, ``loci``/``required_loci`` (section names in
    program order), ``timeout`` (seconds per run), ``num_runs``, ``score_name``,
    ``score_interpretation``, ``score_unit``, ``known_best``, ``data_path`` (resolved, existing
    data file or None), ``directions``, ``static_auxiliary`` (``directory/auxiliary_metrics.py``
    or None), ``alleles`` (``{locus: {allele_name: gene text}}``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str
    directory: Path
    description: str
    initial_program: str
    entry: str
    loci: tuple[str, ...]
    required_loci: tuple[str, ...]
    timeout: float
    num_runs: int
    score_name: str
    score_interpretation: Interpretation
    score_unit: str = ""
    known_best: float | None = None
    data_path: Path | None = None
    instance: str | None = None
    instance_facts: dict[str, Any] = Field(default_factory=dict)
    directions: tuple[str, ...] = ()
    static_auxiliary: Path | None = None
    alleles: dict[str, dict[str, str]] = Field(default_factory=dict)

    _evaluate: Callable[..., EvaluationResult] | None = PrivateAttr(default=None)

    def evaluator(self) -> Callable[..., EvaluationResult]:
        """``evaluate`` of the problem's ``evaluate.py`` (imported once, then cached).

        The file is imported as module ``evaluate`` of a synthetic package whose path is the
        problem folder, so it may import its siblings relatively (``from .reference import
        count_primes``); absolute imports of ``swarm_evo`` work as usual.

        Raises:
            ProblemError: evaluate.py fails to import or defines no ``evaluate`` function.
        """
        if self._evaluate is None:
            self._evaluate = _import_evaluator(self.directory, self.name)
        return self._evaluate

    @property
    def label(self) -> str:
        """``name`` or ``name-instance``: a file-name-safe label for run directories."""
        return f"{self.name}-{self.instance}" if self.instance else self.name


def _import_evaluator(directory: Path, name: str, function: str = EVALUATE_FUNCTION) -> Callable[..., Any]:
    """``function`` of ``directory/evaluate.py`` (imported as described in Problem.evaluator)."""
    path = directory / EVALUATOR_FILE
    digest = hashlib.sha1(str(directory).encode()).hexdigest()[:10]
    package = f"_swarm_evo_problem_{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{digest}"
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(directory)]
        pkg.__file__ = None
        sys.modules[package] = pkg
    module_name = f"{package}.evaluate"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ProblemError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, function, None)
    if not callable(fn) and function != EVALUATE_FUNCTION:
        raise ProblemError(f"{path}: defines no function '{function}' (named by problem.yaml instances.facts)")
    if not callable(fn):
        raise ProblemError(
            f"{path}: defines no function '{EVALUATE_FUNCTION}': add `def evaluate(program_path, "
            "results_dir, *, sandbox, problem, timeout, num_runs, **kwargs) -> EvaluationResult`"
        )
    return fn


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def problem_directory(name_or_path: str | Path) -> Path:
    """The folder of a built-in problem name or of a path (a folder or its problem.yaml).

    Raises:
        ProblemError: neither a built-in name nor a folder with problem.yaml.
    """
    text = str(name_or_path)
    if text in BUILTIN_PROBLEMS:
        return PROBLEMS_DIR / text.replace("-", "_")
    path = Path(text).expanduser()
    if path.is_file() and path.name == PROBLEM_FILE:
        path = path.parent
    if path.is_dir() and (path / PROBLEM_FILE).is_file():
        return path.resolve()
    if path.is_dir():
        raise ProblemError(f"{path}: no {PROBLEM_FILE} in this folder (a problem folder needs one)")
    raise ProblemError(
        f"unknown problem {text!r}: use a built-in ({', '.join(BUILTIN_PROBLEMS)}) or the path "
        f"of a folder holding {PROBLEM_FILE}"
    )


def _read_required(directory: Path, name: str, role: str) -> str:
    path = directory / name
    if not path.is_file():
        raise ProblemError(f"{directory}: missing {name} ({role}): add {path}")
    return path.read_text(encoding="utf-8")


def _check_initial(path: Path, code: str, spec: ProblemSpec) -> None:
    try:
        tree = parse_program(code, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path}: syntax error at line {exc.lineno}: {exc.msg}") from None
    missing = [locus for locus in spec.loci if locus not in parse_genes(code)]
    if missing:
        markers = ", ".join(f"'# [SECTION: {locus}]'" for locus in missing)
        raise ProblemError(f"{path}: missing section marker(s) {markers} for loci {missing}: add them")
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if spec.entry not in defined:
        raise ProblemError(
            f"{path}: defines no top-level function '{spec.entry}' (the entry named in {PROBLEM_FILE})"
        )


def _load_alleles(directory: Path, loci: list[str]) -> dict[str, dict[str, str]]:
    root = directory / ALLELES_DIR
    if not root.is_dir():
        return {}
    alleles: dict[str, dict[str, str]] = {}
    for locus_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        if locus_dir.name not in loci:
            raise ProblemError(
                f"{locus_dir}: '{locus_dir.name}' is not a locus of this problem (loci: {loci}): "
                "rename or remove the folder"
            )
        texts = {p.stem: p.read_text(encoding="utf-8") for p in sorted(locus_dir.glob("*.py"))}
        if texts:
            alleles[locus_dir.name] = texts
    return alleles


def load_problem(name_or_path: str | Path, data_dir: Path | None = None, instance: str | None = None) -> Problem:
    """Load and check a problem: a built-in name (:data:`BUILTIN_PROBLEMS`) or a folder path,
    on ``instance`` (problems with ``instances`` in problem.yaml; None = their default).

    Checks: problem.yaml is valid (unknown keys, missing keys and bad values are errors);
    description.md, initial.py and evaluate.py exist; initial.py parses, carries the marker
    of every locus (:func:`swarm_evo.population.genes.parse_genes`) and defines the entry function
    (:mod:`ast`, nothing is executed); ``alleles/<LOCUS>/`` folders name loci of the problem;
    the data file (if any) exists (:func:`resolve_data_file`), or the instance's file
    (:func:`~swarm_evo.evaluation.problem_data.resolve_instance`), whose title and description
    are then rendered for it. evaluate.py is imported later, by :meth:`Problem.evaluator`
    (earlier only when ``instances.facts`` names one of its functions).

    Raises:
        ProblemError: any of the above, naming the file/field and the fix; an ``instance``
            given to a problem without instances; an unknown instance (names the directories
            searched and the available instances).
    """
    directory = problem_directory(name_or_path)
    spec_path = directory / PROBLEM_FILE
    spec = read_spec(spec_path)
    description = _read_required(directory, DESCRIPTION_FILE, "the task statement shown to the LLM")
    initial_path = directory / INITIAL_FILE
    initial = _read_required(directory, INITIAL_FILE, f"the seed program with the loci markers and {spec.entry}()")
    if not (directory / EVALUATOR_FILE).is_file():
        raise ProblemError(
            f"{directory}: missing {EVALUATOR_FILE} (the primary evaluator): add {directory / EVALUATOR_FILE} "
            f"defining {EVALUATE_FUNCTION}(program_path, results_dir, *, sandbox, problem, timeout, num_runs)"
        )
    _check_initial(initial_path, initial, spec)
    alleles = _load_alleles(directory, spec.loci)
    data_path = resolve_data_file(spec.data_file, data_dir, source=spec_path) if spec.data_file else None
    title, known_best, facts = spec.title or spec.name, spec.score.known_best, {}
    if spec.instances is None and instance is not None:
        raise ProblemError(
            f"problem {spec.name!r} takes no instance (got {instance!r}): drop --instance / problem.instance "
            f"({spec_path} has no instances)"
        )
    if spec.instances is not None:
        instance, data_path = resolve_instance(spec.instances, spec.name, instance, data_dir)
        if spec.instances.facts:
            facts = dict(_import_evaluator(directory, spec.name, spec.instances.facts)(data_path))
        known_best = instance_known_best(spec.instances, spec.name, instance, facts, data_path)
        variables = {**facts, "instance": instance, "known_best": known_best, "timeout": spec.timeout,
                     "num_runs": spec.num_runs}
        title = render_text(title, variables, source=f"{spec_path} title")
        description = render_text(description, variables, source=str(directory / DESCRIPTION_FILE))
    static_aux = directory / STATIC_AUXILIARY_FILE
    return Problem(
        name=spec.name,
        title=title,
        directory=directory,
        description=description,
        initial_program=initial,
        entry=spec.entry,
        loci=tuple(spec.loci),
        required_loci=tuple(spec.required_loci),
        timeout=spec.timeout,
        num_runs=spec.num_runs,
        score_name=spec.score.name,
        score_interpretation=spec.score.interpretation,
        score_unit=spec.score.unit,
        known_best=known_best,
        data_path=data_path,
        instance=instance,
        instance_facts=facts,
        directions=tuple(spec.directions),
        static_auxiliary=static_aux if static_aux.is_file() else None,
        alleles=alleles,
    )


def problem_summary(problem: Problem) -> dict[str, Any]:
    """JSON-able facts about a problem for logs and reports (no program texts)."""
    return {
        "name": problem.name,
        "title": problem.title,
        "directory": str(problem.directory),
        "entry": problem.entry,
        "loci": list(problem.loci),
        "score_name": problem.score_name,
        "score_interpretation": problem.score_interpretation,
        "known_best": problem.known_best,
        "instance": problem.instance,
        "data_path": str(problem.data_path) if problem.data_path else None,
    }
