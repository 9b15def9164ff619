"""Call a candidate program's entry function inside the sandbox (SPEC §10-§11).

ShinkaEvolve's evaluators import the candidate into the evaluator process and call
``experiment_fn_name`` (``run_shinka_eval``); that gives untrusted code the evaluator's
memory and credentials. Here the candidate never runs on the host: :func:`call_entry`

1. writes ``workdir/program.py`` (the candidate, unchanged), ``workdir/calls.json`` (the
   calls, tagged JSON from :mod:`~swarm_evo.evaluation.codec`) and ``workdir/harness.json``
   (``{"entry": name}``);
2. runs the fixed :data:`HARNESS_PROGRAM` as the sandbox's ``solution.py`` (one execution,
   one timeout, an empty read-only ``input/``): it imports ``program.py`` by path (so an
   ``if __name__ == "__main__":`` block does not run), calls ``entry(*args, **kwargs)`` for
   each call and writes ``workdir/outputs.json`` = ``{"outputs": [encoded...], "seconds":
   [...]}``;
3. reads ``outputs.json`` back with :func:`codec.decode` (never pickle).

Failures surface the way the sandbox classifies them: a missing entry is an
``AttributeError`` ("program defines no function 'run_packing'"), an exception in the
program keeps its class as ``exc_type``, a return value the codec cannot encode is a
``TypeError`` naming the type, a timeout is ``TimeoutError`` with the limit in the message.
Everything in ``outputs.json`` is untrusted data: evaluators validate it and recompute scores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from swarm_evo.evaluation import codec
from swarm_evo.sandbox.base import ExecutionResult, Sandbox
from swarm_evo.sandbox.output import write_output_file
from swarm_evo.sandbox.workdir import remove_entry
from swarm_evo.sandbox.safe_read import ProgramFileError, read_program_text

PROGRAM_FILE = "program.py"
CALLS_FILE = "calls.json"
OUTPUTS_FILE = "outputs.json"
HARNESS_CONFIG_FILE = "harness.json"

MAX_OUTPUTS_BYTES = 256 * 1024 * 1024
"""Largest ``outputs.json`` the host reads (bytes); a bigger file is an error of the run."""

_HARNESS_MAIN = r'''

# ---------------------------------------------------------------- swarm-evo harness main
import importlib.util as _importlib_util
import json as _json
import os as _os
import sys as _sys
import time as _time


def _harness_main():
    with open("harness.json", encoding="utf-8") as fh:
        entry = _json.load(fh)["entry"]
    with open("calls.json", encoding="utf-8") as fh:
        calls = decode(_json.load(fh))
    if _os.path.exists("outputs.json"):
        _os.unlink("outputs.json")
    spec = _importlib_util.spec_from_file_location("program", _os.path.abspath("program.py"))
    module = _importlib_util.module_from_spec(spec)
    _sys.modules["program"] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        raise RuntimeError(f"program called exit({exc.code!r}) while being imported") from None
    fn = getattr(module, entry, None)
    if fn is None:
        raise AttributeError(f"program defines no function {entry!r}")
    if not callable(fn):
        raise AttributeError(
            f"program defines no function {entry!r} ({entry} is a {type(fn).__name__})"
        )
    outputs, seconds = [], []
    for i, call in enumerate(calls):
        start = _time.perf_counter()
        try:
            value = fn(*call.get("args", []), **call.get("kwargs", {}))
        except SystemExit as exc:
            raise RuntimeError(f"{entry}() called exit({exc.code!r}) instead of returning") from None
        seconds.append(_time.perf_counter() - start)
        try:
            outputs.append(encode(value, f"output[{i}]"))
        except RecursionError:
            raise TypeError(
                f"the return value of {entry}() cannot be encoded: nested too deeply"
            ) from None
        except TypeError as exc:
            raise TypeError(f"the return value of {entry}() cannot be encoded: {exc}") from None
    text = _json.dumps({"outputs": outputs, "seconds": seconds})
    with open("outputs.json.tmp", "w", encoding="utf-8") as fh:
        fh.write(text)
    _os.replace("outputs.json.tmp", "outputs.json")


if __name__ == "__main__":
    _harness_main()
'''

HARNESS_PROGRAM: str = Path(codec.__file__).read_text(encoding="utf-8") + _HARNESS_MAIN
"""The fixed program run as the sandbox's ``solution.py``: the codec's source (encode/decode)
followed by the harness main. Only the files next to it vary between executions."""


class HarnessRun(BaseModel):
    """The result of one :func:`call_entry` (one sandbox execution).

    Fields:
        outputs: the decoded return value of each call (numpy arrays restored, tuples as
            lists), in call order; None when the run failed.
        seconds: in-process wall seconds per call, as the harness measured them inside the
            program's process (informational only: the program could tamper with them; use
            ``execution.exec_time`` for anything that matters).
        execution: the sandbox's :class:`ExecutionResult` (``exc_type`` set on crash/timeout).
        error: None on success, else one line: ``"TimeoutError: Execution exceeded the time
            limit of 2 s ..."``, ``"AttributeError: program defines no function 'f'"``, the
            program's exception line, ``"TypeError: the return value of f() cannot be encoded:
            ..."``, or a problem with ``outputs.json``.
    """

    outputs: list[Any] | None = None
    seconds: list[float] = Field(default_factory=list)
    execution: ExecutionResult
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when every call returned and its output came back."""
        return self.error is None and self.outputs is not None


def execution_error(execution: ExecutionResult) -> str | None:
    """One-line error of a failed execution: ``"<exc_type>: <exc_info>"`` (None when it succeeded).

    The exception name is not repeated when ``exc_info`` already starts with it (a traceback
    line such as ``"ZeroDivisionError: division by zero"``).
    """
    if execution.exc_type is None:
        return None
    info = (execution.exc_info or "").strip()
    if not info:
        return execution.exc_type
    head = info.split(":", 1)[0].rsplit(".", 1)[-1]
    if head == execution.exc_type:
        return info
    return f"{execution.exc_type}: {info}"


def empty_input_dir(workdir: Path) -> Path:
    """An empty directory next to ``workdir`` (``<workdir>-input``) to serve as the sandbox's
    read-only ``input/``; emptied if a previous run left something in it."""
    path = Path(workdir).parent / f"{Path(workdir).name}-input"
    if path.exists() and any(path.iterdir()):
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def call_entry(
    sandbox: Sandbox,
    program_code: str,
    entry: str,
    calls: list[dict],
    workdir: Path,
    timeout: float,
    *,
    public_dir: Path | None = None,
) -> HarnessRun:
    """Run ``program_code`` in ``sandbox`` and call its function ``entry`` once per call.

    Args:
        sandbox: the execution backend (local process or Docker container).
        program_code: the candidate program's source (written as ``workdir/program.py``).
        entry: name of the top-level function to call.
        calls: ``[{"args": [...], "kwargs": {...}}]``; values must be encodable by
            :func:`codec.encode` (numbers, strings, lists, dicts, numpy arrays).
        workdir: the run's directory (created; see the module docstring for its files).
        timeout: seconds for the whole execution (import plus every call).
        public_dir: directory the program sees read-only as ``input/``; default an empty
            ``<workdir>-input`` next to ``workdir``.

    Returns:
        A :class:`HarnessRun`; program failures are reported in it, never raised.

    Raises:
        TypeError: ``calls`` cannot be encoded (an evaluator bug).
        SandboxError: the sandbox itself failed.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    encoded_calls = [
        {"args": codec.encode(list(c.get("args", [])), f"calls[{i}].args"),
         "kwargs": codec.encode(dict(c.get("kwargs", {})), f"calls[{i}].kwargs")}
        for i, c in enumerate(calls)
    ]
    # An earlier execution in this directory may have left FIFOs or links at these names:
    # write_output_file replaces them, never writes through them.
    write_output_file(workdir, PROGRAM_FILE, program_code.encode("utf-8"))
    write_output_file(workdir, CALLS_FILE, json.dumps(encoded_calls).encode("utf-8"))
    write_output_file(workdir, HARNESS_CONFIG_FILE, json.dumps({"entry": entry}).encode("utf-8"))
    outputs_path = workdir / OUTPUTS_FILE
    remove_entry(outputs_path)
    public = Path(public_dir) if public_dir is not None else empty_input_dir(workdir)
    execution = sandbox.execute(HARNESS_PROGRAM, workdir, public, timeout)
    error = execution_error(execution)
    if error is not None:
        return HarnessRun(execution=execution, error=error)
    outputs, seconds, error = _read_outputs(outputs_path, len(calls))
    return HarnessRun(outputs=outputs, seconds=seconds, execution=execution, error=error)


def _read_outputs(path: Path, expected: int) -> tuple[list[Any] | None, list[float], str | None]:
    """Parse ``outputs.json``; every problem becomes an error string (the file is untrusted:
    a FIFO, directory or oversized file there is a ``ProgramFileError`` of the run)."""
    try:
        text = read_program_text(path, MAX_OUTPUTS_BYTES)
    except FileNotFoundError:
        return None, [], (
            f"ProcessError: the program exited before returning ({OUTPUTS_FILE} was not written; "
            "did it call os._exit?)"
        )
    except ProgramFileError as exc:
        return None, [], (
            f"ProgramFileError: {OUTPUTS_FILE} {exc.reason} (the harness writes it; the program must not replace it)"
        )
    try:
        data = json.loads(text)
        outputs = codec.decode(data["outputs"])
        seconds = [float(s) for s in data.get("seconds", [])]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        return None, [], f"ValueError: {OUTPUTS_FILE} is unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(outputs, list) or len(outputs) != expected:
        got = len(outputs) if isinstance(outputs, list) else type(outputs).__name__
        return None, [], f"ValueError: {OUTPUTS_FILE} holds {got} outputs for {expected} calls"
    return outputs, seconds, None
