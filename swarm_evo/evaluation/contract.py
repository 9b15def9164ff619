"""The evaluation result, metric definitions and the result files (seed 002; SPEC §11).

An evaluation of one candidate program produces an :class:`EvaluationResult`; the Eval Service
writes it to the results directory in ShinkaEvolve's layout so that ShinkaEvolve-style tools
can read it:

* ``metrics.json``: ``combined_score``, ``public`` (public metrics plus ``aux_<name>`` for
  every auxiliary metric, as seed 002's merge step does), ``private``, and our additions
  (``auxiliary``, ``auxiliary_definitions``, ``auxiliary_errors``, ``correct``, ``error``,
  ``execution_time_mean``, ``num_runs``, ``num_valid_runs``, ``runs``, ``timestamp``);
* ``correct.json``: ``{"correct": bool, "error": str | null}``;
* the program output: ``extra.npz`` (a dict of numpy arrays/numbers), else ``extra.json``
  (tagged JSON, :mod:`swarm_evo.evaluation.codec`), else ``extra.pkl`` (only for outputs
  neither can hold; written and read by trusted host code only).

JSON files are written atomically (:func:`swarm_evo.population.journal.atomic_write_text`). Non-finite
floats inside metric dicts are written as ``NaN``/``Infinity`` (Python's json dialect).
"""

from __future__ import annotations

import json
import math
import pickle
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from swarm_evo.evaluation import codec
from swarm_evo.population.journal import atomic_write, atomic_write_text

Interpretation = Literal["higher_better", "lower_better", "neutral"]
MetricSource = Literal["primary", "auxiliary_static", "auxiliary_dynamic"]

METRICS_FILE = "metrics.json"
CORRECT_FILE = "correct.json"
EXTRA_NPZ = "extra.npz"
EXTRA_JSON = "extra.json"
EXTRA_PKL = "extra.pkl"
EXTRA_FILES: tuple[str, ...] = (EXTRA_NPZ, EXTRA_PKL, EXTRA_JSON)
"""Program-output files in the order :func:`load_program_output` tries them (seed 002)."""

AUX_PREFIX = "aux_"
"""Prefix of auxiliary metrics copied into ``metrics.json``'s ``public`` dict (seed 002)."""

TERM_OUT_CHARS = 4000
"""Characters of a run's terminal output kept in its :class:`RunLog` (the tail)."""


def utc_now() -> str:
    """The current UTC time as ISO-8601 with seconds, e.g. ``2026-02-03T04:00:00Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class MetricDefinition(BaseModel):
    """What a metric means (seed 002 ``MetricDefinition``).

    Fields: ``name`` (human-readable name), ``description``, ``interpretation``
    (``higher_better`` / ``lower_better`` / ``neutral``), ``unit`` (free text, "" for
    dimensionless), ``formula`` (optional text), ``source`` (``primary`` for the evaluator's
    own metrics, ``auxiliary_static`` for the problem's ``auxiliary_metrics.py``,
    ``auxiliary_dynamic`` for the agent-written one).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    interpretation: Interpretation = "neutral"
    unit: str = ""
    formula: str | None = None
    source: MetricSource = "primary"


class RunLog(BaseModel):
    """One sandbox execution of the candidate within an evaluation.

    Fields: ``run`` (0-based index), ``exec_time`` (seconds, measured by the sandbox outside
    the program), ``exc_type``/``exc_info`` (the sandbox's classification, None on success),
    ``timed_out``, ``term_out`` (last :data:`TERM_OUT_CHARS` characters of stdout+stderr),
    ``error`` (why this run is not correct: crash, timeout or failed validation; None if it is).
    """

    model_config = ConfigDict(extra="forbid")

    run: int
    exec_time: float
    exc_type: str | None = None
    exc_info: str | None = None
    timed_out: bool = False
    term_out: str = ""
    error: str | None = None

    @field_validator("term_out")
    @classmethod
    def _bound_term_out(cls, value: str) -> str:
        return value[-TERM_OUT_CHARS:]


class EvaluationResult(BaseModel):
    """The outcome of evaluating one program (seed 002 ``EvaluationResult``; SPEC §11).

    Fields:
        combined_score: the score the search maximises (higher is always better; a
            lower-is-better raw value is transformed by the evaluator, which puts the raw
            value and its direction in ``public_metrics``). 0.0 whenever ``correct`` is False.
        correct: the program ran and its output passed validation in every run.
        error: the first error (crash, timeout, validation), None when correct.
        public_metrics: metrics shown to the LLM (raw score, its direction, diagnostics).
        private_metrics: metrics never shown to the LLM (held-out values, reported numbers).
        auxiliary_metrics: ``{name: finite float}`` from the static/dynamic auxiliary files.
        auxiliary_definitions: ``{name: MetricDefinition}`` of those (and of the evaluator's
            primary metrics, if it gives any, with ``source="primary"``).
        auxiliary_errors: ``{"auxiliary_static"|"auxiliary_dynamic": one-line message}``.
        program_output: the validated output the evaluator keeps (not serialised with the
            model; stored as ``extra.*`` by :func:`write_results`).
        execution_time: mean sandbox seconds per run.
        num_runs, num_valid_runs: runs executed / runs that were correct.
        runs: one :class:`RunLog` per run.
        timestamp: UTC ISO-8601 time of the evaluation.
    """

    model_config = ConfigDict(extra="forbid")

    combined_score: float = 0.0
    correct: bool = False
    error: str | None = None
    public_metrics: dict[str, Any] = Field(default_factory=dict)
    private_metrics: dict[str, Any] = Field(default_factory=dict)
    auxiliary_metrics: dict[str, float] = Field(default_factory=dict)
    auxiliary_definitions: dict[str, MetricDefinition] = Field(default_factory=dict)
    auxiliary_errors: dict[str, str] = Field(default_factory=dict)
    program_output: Any = Field(None, exclude=True)
    execution_time: float = 0.0
    num_runs: int = 0
    num_valid_runs: int = 0
    runs: list[RunLog] = Field(default_factory=list)
    timestamp: str = Field(default_factory=utc_now)

    @field_validator("combined_score", "execution_time", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        # numpy scalars (np.float32, np.int64) are not float instances; accept them.
        if isinstance(value, (np.integer, np.floating)):
            return float(value)
        return value

    def metrics_json(self) -> dict[str, Any]:
        """The ``metrics.json`` payload (ShinkaEvolve-compatible; see the module docstring).

        Values are made JSON-able: numpy scalars become numbers, arrays nested lists.
        """
        public = dict(self.public_metrics)
        for name, value in self.auxiliary_metrics.items():
            public[f"{AUX_PREFIX}{name}"] = value
        payload = {
            "combined_score": self.combined_score,
            "public": public,
            "private": dict(self.private_metrics),
            "auxiliary": dict(self.auxiliary_metrics),
            "auxiliary_definitions": {k: d.model_dump() for k, d in self.auxiliary_definitions.items()},
            "auxiliary_errors": dict(self.auxiliary_errors),
            "correct": self.correct,
            "error": self.error,
            "execution_time_mean": self.execution_time,
            "num_runs": self.num_runs,
            "num_valid_runs": self.num_valid_runs,
            "runs": [r.model_dump() for r in self.runs],
            "timestamp": self.timestamp,
        }
        return jsonable(payload)

    def summary(self) -> dict[str, Any]:
        """A small JSON-able dict for prompts and the journal.

        Keys: ``combined_score``, ``correct``, ``error``, ``public_metrics``,
        ``auxiliary_metrics`` (private metrics are never included).
        """
        return jsonable(
            {
                "combined_score": self.combined_score,
                "correct": self.correct,
                "error": self.error,
                "public_metrics": dict(self.public_metrics),
                "auxiliary_metrics": dict(self.auxiliary_metrics),
            }
        )


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars/arrays turned into Python numbers/lists, tuples into lists.

    Dict keys become strings; objects JSON cannot hold become their ``repr``. Used for metric
    dicts written by trusted evaluators (not for program outputs: see :mod:`codec`).
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump())
    if isinstance(value, Path):
        return str(value)
    return repr(value)


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def write_results(result: EvaluationResult, results_dir: Path) -> None:
    """Write ``metrics.json``, ``correct.json`` and the program output into ``results_dir``.

    The program output (``result.program_output``, when not None) goes to ``extra.npz`` when
    it is a dict of str keys to numpy arrays (numeric/bool/str dtypes) or numbers
    (``np.savez``), else to ``extra.json`` when :func:`codec.encode` accepts it, else to
    ``extra.pkl``; the other two ``extra.*`` files are removed so that
    :func:`load_program_output` finds the current one. With no output, existing ``extra.*``
    files (e.g. written by the evaluator itself) are left alone. All writes are atomic.

    Raises:
        OSError: the directory is not writable.
    """
    results_dir = Path(results_dir)
    write_metrics_files(result, results_dir)
    if result.program_output is not None:
        _write_program_output(result.program_output, results_dir)


def write_metrics_files(result: EvaluationResult, results_dir: Path) -> None:
    """Write only ``metrics.json`` and ``correct.json`` (atomically) into ``results_dir``."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(results_dir / METRICS_FILE, json.dumps(result.metrics_json(), indent=2) + "\n")
    atomic_write_text(
        results_dir / CORRECT_FILE,
        json.dumps({"correct": result.correct, "error": result.error}, indent=2) + "\n",
    )


def _npz_compatible(output: Any) -> bool:
    if not isinstance(output, dict) or not output:
        return False
    for key, value in output.items():
        if not isinstance(key, str) or not key or "/" in key or key.startswith("."):
            return False
        if isinstance(value, bool) or isinstance(value, np.bool_):
            continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biufU":
                return False
        elif not isinstance(value, (int, float, np.integer, np.floating)):
            return False
    return True


def _write_program_output(output: Any, results_dir: Path) -> None:
    if _npz_compatible(output):
        arrays = {k: np.asarray(v) for k, v in output.items()}
        atomic_write(results_dir / EXTRA_NPZ, lambda fh: np.savez(fh, **arrays))
        kept = EXTRA_NPZ
    else:
        try:
            text = json.dumps(codec.encode(output, "program_output"))
        except (TypeError, ValueError):
            atomic_write(results_dir / EXTRA_PKL, lambda fh: pickle.dump(output, fh, protocol=4))
            kept = EXTRA_PKL
        else:
            atomic_write_text(results_dir / EXTRA_JSON, text)
            kept = EXTRA_JSON
    for name in EXTRA_FILES:
        if name != kept:
            try:
                (results_dir / name).unlink()
            except FileNotFoundError:
                pass


def load_program_output(results_dir: Path) -> Any:
    """The program output stored in ``results_dir`` (seed 002 ``load_program_output``).

    Tries, in order: ``extra.npz`` (``np.load(allow_pickle=False)`` -> ``{key: ndarray}``,
    numbers as 0-d arrays), ``extra.pkl`` (pickle; only ever written by trusted host code,
    never by the candidate program), ``extra.json`` (tagged JSON decoded with
    :func:`codec.decode`). Returns None when none exists.

    Raises:
        ValueError: a file exists but cannot be read (the message names it).
    """
    results_dir = Path(results_dir)
    npz = results_dir / EXTRA_NPZ
    if npz.exists():
        try:
            with np.load(npz, allow_pickle=False) as data:
                return {key: data[key] for key in data.files}
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {npz}: {exc}") from exc
    pkl = results_dir / EXTRA_PKL
    if pkl.exists():
        try:
            with open(pkl, "rb") as fh:
                return pickle.load(fh)
        except Exception as exc:
            raise ValueError(f"cannot read {pkl}: {type(exc).__name__}: {exc}") from exc
    path = results_dir / EXTRA_JSON
    if path.exists():
        try:
            return codec.decode(json.loads(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise ValueError(f"cannot read {path}: {exc}") from exc
    return None


def read_results(results_dir: Path) -> EvaluationResult:
    """Read an :class:`EvaluationResult` back from ``metrics.json`` and ``correct.json``.

    Inverse of :func:`write_results`: the ``aux_<name>`` copies in ``public`` are removed
    again, ``correct``/``error`` come from ``correct.json`` and ``program_output`` from
    :func:`load_program_output`.

    Raises:
        FileNotFoundError: ``metrics.json`` or ``correct.json`` is missing (message names it).
        ValueError: a file is not valid JSON or does not fit the model.
    """
    results_dir = Path(results_dir)
    data = _read_json(results_dir / METRICS_FILE)
    correct = _read_json(results_dir / CORRECT_FILE)
    auxiliary = data.get("auxiliary") or {}
    public = {
        k: v
        for k, v in (data.get("public") or {}).items()
        if not (k.startswith(AUX_PREFIX) and k[len(AUX_PREFIX):] in auxiliary and auxiliary[k[len(AUX_PREFIX):]] == v)
    }
    score = data.get("combined_score", 0.0)
    return EvaluationResult(
        combined_score=score if score is not None else math.nan,
        correct=bool(correct.get("correct", False)),
        error=correct.get("error"),
        public_metrics=public,
        private_metrics=data.get("private") or {},
        auxiliary_metrics=auxiliary,
        auxiliary_definitions=data.get("auxiliary_definitions") or {},
        auxiliary_errors=data.get("auxiliary_errors") or {},
        program_output=load_program_output(results_dir),
        execution_time=data.get("execution_time_mean", 0.0),
        num_runs=data.get("num_runs", 0),
        num_valid_runs=data.get("num_valid_runs", 0),
        runs=data.get("runs") or [],
        timestamp=data.get("timestamp") or utc_now(),
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found (no evaluation results in {path.parent})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data
