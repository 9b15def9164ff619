"""Static and dynamic auxiliary metrics (seed 002 ``run_dynamic_auxiliary``; SPEC §11).

An auxiliary metrics file (``auxiliary_metrics.py``) defines::

    def evaluate_auxiliary_metrics(program_output) -> dict[str, float]: ...
    METRIC_DEFINITIONS = {"name": {"name": ..., "description": ..., "interpretation":
                          "higher_better" | "lower_better" | "neutral", "unit": ..., "formula": ...}}

The problem may ship one (``auxiliary_static``); the evaluation agent writes another
(``auxiliary_dynamic``). Seed 002 imports the file into the service and calls it in a
thread; an agent-written file is untrusted code, so here it runs in the sandbox like a
candidate program, with its own timeout, and only sees the program output: a copy of
``extra.npz`` / ``extra.json`` in its read-only ``input/`` (never ``extra.pkl``, never the
private metrics). The fixed :data:`AUX_HARNESS_PROGRAM` loads that output, calls the
function and writes ``aux_result.json``; the host keeps only finite real numbers (bools
excluded) under string names, at most :data:`MAX_METRICS` of them.

A broken (syntax error, missing function, exception), slow (timeout) or lying (NaN, inf,
strings, a non-dict) file never raises and never fails the primary evaluation: it yields a
one-line error for ``auxiliary_errors[source]``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from swarm_evo.evaluation import codec
from swarm_evo.evaluation.contract import (
    EXTRA_JSON,
    EXTRA_NPZ,
    EXTRA_PKL,
    Interpretation,
    MetricDefinition,
)
from swarm_evo.evaluation.harness import execution_error
from swarm_evo.sandbox.base import Sandbox
from swarm_evo.sandbox.safe_read import ProgramFileError, read_program_text

AUXILIARY_FILE = "auxiliary_metrics.py"
AUX_FUNCTION = "evaluate_auxiliary_metrics"
AUX_DEFINITIONS = "METRIC_DEFINITIONS"
AUX_RESULT_FILE = "aux_result.json"
AUXILIARY_DIR = "auxiliary"

MAX_METRICS = 50
"""Most auxiliary metrics kept per source (extra ones are dropped and reported)."""
MAX_NAME_CHARS = 64
MAX_TEXT_CHARS = 500
MAX_RESULT_BYTES = 2_000_000
MAX_ERROR_CHARS = 300
SHOWN_DROPPED = 8

AuxiliarySource = Literal["auxiliary_static", "auxiliary_dynamic"]
_INTERPRETATIONS = set(get_args(Interpretation))

_AUX_MAIN = r'''

# ---------------------------------------------------------------- swarm-evo auxiliary harness
import importlib.util as _importlib_util
import json as _json
import os as _os


def _load_output():
    if _os.path.exists("input/extra.npz"):
        import numpy as np

        with np.load("input/extra.npz", allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    if _os.path.exists("input/extra.json"):
        with open("input/extra.json", encoding="utf-8") as fh:
            return decode(_json.load(fh))
    return None


def _aux_main():
    output = _load_output()
    spec = _importlib_util.spec_from_file_location(
        "auxiliary_metrics", _os.path.abspath("auxiliary_metrics.py")
    )
    module = _importlib_util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "evaluate_auxiliary_metrics", None)
    if not callable(fn):
        raise AttributeError("auxiliary_metrics.py defines no function 'evaluate_auxiliary_metrics'")
    metrics = fn(output)
    if not isinstance(metrics, dict):
        raise TypeError(
            f"evaluate_auxiliary_metrics returned {type(metrics).__name__}, expected a dict"
        )
    kept, dropped = {}, {}
    for key, value in list(metrics.items())[:1000]:
        if not isinstance(key, str):
            dropped[repr(key)[:20]] = "a name that is not a str"
            continue
        try:
            kept[str(key)] = encode(value)
        except (TypeError, RecursionError):
            dropped[str(key)] = type(value).__name__
    definitions = getattr(module, "METRIC_DEFINITIONS", None)
    try:
        definitions = encode(definitions)
    except (TypeError, RecursionError):
        definitions = None
    result = {"metrics": kept, "unencodable": dropped, "definitions": definitions,
              "num_metrics": len(metrics)}
    with open("aux_result.json", "w", encoding="utf-8") as fh:
        _json.dump(result, fh)


if __name__ == "__main__":
    _aux_main()
'''

AUX_HARNESS_PROGRAM: str = Path(codec.__file__).read_text(encoding="utf-8") + _AUX_MAIN
"""The fixed program run as ``solution.py`` for an auxiliary file: the codec's source
followed by the auxiliary main (loads ``input/extra.npz|extra.json``, calls
``evaluate_auxiliary_metrics``, writes ``aux_result.json``)."""


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


def _fail(message: str) -> tuple[dict[str, float], dict[str, MetricDefinition], str]:
    return {}, {}, _one_line(message)


def _stage_input(results_dir: Path, input_dir: Path) -> str | None:
    """Copy the program output into ``input_dir``; return an error when there is none usable."""
    if input_dir.exists():
        shutil.rmtree(input_dir)
    input_dir.mkdir(parents=True)
    for name in (EXTRA_NPZ, EXTRA_JSON):
        if (results_dir / name).is_file():
            shutil.copyfile(results_dir / name, input_dir / name)
            return None
    if (results_dir / EXTRA_PKL).is_file():
        return f"the program output is only stored as {EXTRA_PKL}, which the sandbox does not load"
    return f"no program output to analyse ({EXTRA_NPZ}/{EXTRA_JSON} missing in {results_dir})"


def run_auxiliary(
    sandbox: Sandbox,
    metrics_file: Path,
    results_dir: Path,
    *,
    source: AuxiliarySource,
    timeout: float,
) -> tuple[dict[str, float], dict[str, MetricDefinition], str | None]:
    """Compute auxiliary metrics of the program output in ``results_dir`` (seed 002).

    Copies ``metrics_file`` to ``results_dir/auxiliary/<source>/auxiliary_metrics.py`` and
    the program output (``extra.npz`` or ``extra.json``) to
    ``results_dir/auxiliary/<source>-input/``, which the sandbox shows read-only as
    ``input/``; runs :data:`AUX_HARNESS_PROGRAM` once with ``timeout`` seconds.

    Returns:
        ``(metrics, definitions, error)``: ``metrics`` = ``{name: float}`` of the finite real
        values (bools, NaN, inf, strings, arrays dropped; names are str of at most
        :data:`MAX_NAME_CHARS` chars; at most :data:`MAX_METRICS`), ``definitions`` = a
        :class:`MetricDefinition` (``source`` set) for every kept metric (a minimal one when
        ``METRIC_DEFINITIONS`` has none), ``error`` = None or one line explaining what went
        wrong or what was dropped. A total failure (syntax error, missing function,
        exception, timeout, non-dict result, no usable value) returns ``({}, {}, error)``.

    Raises:
        SandboxError: the sandbox itself failed (not the file).
    """
    results_dir = Path(results_dir).resolve()
    metrics_file = Path(metrics_file)
    workdir = results_dir / AUXILIARY_DIR / source
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    try:
        shutil.copyfile(metrics_file, workdir / AUXILIARY_FILE)
    except OSError as exc:
        return _fail(f"cannot read {metrics_file}: {exc.strerror or exc}")
    problem = _stage_input(results_dir, results_dir / AUXILIARY_DIR / f"{source}-input")
    if problem:
        return _fail(problem)
    execution = sandbox.execute(
        AUX_HARNESS_PROGRAM, workdir, results_dir / AUXILIARY_DIR / f"{source}-input", timeout
    )
    if execution.exc_type is not None:
        return _fail(execution_error(execution) or execution.exc_type)
    return _parse_result(workdir / AUX_RESULT_FILE, source)


def _parse_result(
    path: Path, source: AuxiliarySource
) -> tuple[dict[str, float], dict[str, MetricDefinition], str | None]:
    try:
        text = read_program_text(path, MAX_RESULT_BYTES)
    except FileNotFoundError:
        return _fail(f"{AUX_RESULT_FILE} was not written (the file exited early?)")
    except ProgramFileError as exc:
        return _fail(f"ProgramFileError: {AUX_RESULT_FILE} {exc.reason} (the harness writes it; "
                     "evaluate_auxiliary_metrics must not replace it)")
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"it holds {type(data).__name__}, not an object")
        raw = codec.decode(data.get("metrics"))
        raw_defs = codec.decode(data.get("definitions"))
    except (ValueError, AttributeError, RecursionError) as exc:
        return _fail(f"{AUX_RESULT_FILE} is unreadable: {exc}")
    if not isinstance(raw, dict):
        return _fail(f"{AUX_RESULT_FILE} holds no metrics dict")
    unencodable = data.get("unencodable") or {}
    dropped = [f"{name}={kind}" for name, kind in unencodable.items()]
    metrics: dict[str, float] = {}
    extra = 0
    for name, value in raw.items():
        number = _as_float(value)
        if number is None:
            dropped.append(f"{name}={_describe(value)}")
            continue
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
            dropped.append(f"name {str(name)[:20]!r} (empty or longer than {MAX_NAME_CHARS} chars)")
            continue
        if len(metrics) >= MAX_METRICS:
            extra += 1
            continue
        metrics[name] = number
    total = data.get("num_metrics")
    if isinstance(total, int) and total > len(raw) + len(unencodable):  # the harness's own cap
        extra += total - len(raw) - len(unencodable)
    notes = []
    if dropped:
        shown = ", ".join(dropped[:SHOWN_DROPPED])
        more = f" (+{len(dropped) - SHOWN_DROPPED} more)" if len(dropped) > SHOWN_DROPPED else ""
        notes.append(f"dropped non-finite or non-numeric values: {shown}{more}")
    if extra:
        notes.append(f"kept the first {MAX_METRICS} metrics, dropped {extra} more")
    if not metrics:
        return _fail("; ".join(notes) if notes else "evaluate_auxiliary_metrics returned no metrics")
    definitions = {name: _definition(name, raw_defs, source) for name in metrics}
    return metrics, definitions, _one_line("; ".join(notes)) if notes else None


def _as_float(value: Any) -> float | None:
    """The value as a finite float when it is a real number (not a bool), else None."""
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iuf":
        value = value.item()
    if codec.is_finite_number(value):
        return float(value)
    return None


def _describe(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:20])
    return type(value).__name__


def _definition(name: str, raw_defs: Any, source: AuxiliarySource) -> MetricDefinition:
    """A MetricDefinition from the file's ``METRIC_DEFINITIONS[name]`` (lenient), or a minimal one."""
    entry = raw_defs.get(name) if isinstance(raw_defs, dict) else None
    if not isinstance(entry, dict):
        return MetricDefinition(name=name, source=source)

    def text(key: str, default: str = "") -> str:
        value = entry.get(key)
        return value[:MAX_TEXT_CHARS] if isinstance(value, str) else default

    interpretation = entry.get("interpretation")
    return MetricDefinition(
        name=text("name", name) or name,
        description=text("description"),
        interpretation=interpretation if interpretation in _INTERPRETATIONS else "neutral",
        unit=text("unit"),
        formula=text("formula") or None,
        source=source,
    )
