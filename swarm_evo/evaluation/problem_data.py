"""Where a problem's data comes from: data directories, data files and instances (SPEC §11).

A problem may read one data file (problem.yaml ``data_file``), or one of several *instances*
of the same kind (problem.yaml ``instances``), e.g. the TSPLIB files of the tsp problem::

    instances:
      data_file: tsp/{instance}.tsp      # {instance} = the instance name; relative to the data directory
      default: berlin52                  # used when no instance is given
      facts: instance_facts              # optional: a function of evaluate.py, facts(path) -> dict
      known_best: {kroA100: 21282, ...}  # optional: best known raw score per instance
      known_best_source: "..."           # where those numbers come from (cited in reports)
      known_best_required: true          # an instance without a known best is an error

The instance is chosen by ``swarm-evo run --instance NAME``, the config key
``problem.instance`` or the ``instance`` parameter of the two-phase-evo flow. Its file is
looked up in the data directories (:func:`data_search_dirs`); the available instances are the
files matching the pattern there. With instances, the problem's ``title`` and
``description.md`` are Jinja2 templates (:func:`render_text`) that can name the instance and
its facts, so prompts describe the instance actually evaluated.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field, field_validator

DATA_DIR_ENV = "SWARM_EVO_DATA_DIR"
"""Environment variable naming the data directory when ``--data-dir`` is not given."""

INSTANCE_PLACEHOLDER = "{instance}"
_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ProblemError(ValueError):
    """A problem folder that cannot be used; the message names the file/field and the fix."""


class InstancesSpec(BaseModel):
    """``instances:`` of problem.yaml (see the module docstring; unknown keys are errors).

    ``data_file``: a path relative to the data directory containing ``{instance}`` once;
    ``default``: the instance used when none is given; ``facts``: name of an optional function
    of the problem's evaluate.py, ``facts(data_path: Path) -> dict`` of JSON values for the
    texts (a ``known_best`` key there, e.g. from a file's OPTIMUM line, wins over the table);
    ``known_best``: ``{instance: best known raw score}``; ``known_best_source``: the citation
    of that table; ``known_best_required``: refuse instances without a known best.
    """

    model_config = ConfigDict(extra="forbid")

    data_file: str
    default: str
    facts: str | None = None
    known_best: dict[str, float] = Field(default_factory=dict)
    known_best_source: str = ""
    known_best_required: bool = False

    @field_validator("data_file")
    @classmethod
    def _has_placeholder(cls, value: str) -> str:
        if value.count(INSTANCE_PLACEHOLDER) != 1:
            raise ValueError(f"must contain {INSTANCE_PLACEHOLDER} exactly once, e.g. tsp/{{instance}}.tsp; got {value!r}")
        return value


def data_search_dirs(data_dir: Path | None = None) -> list[Path]:
    """Directories searched for a problem's data file, in order.

    ``data_dir`` if given; else ``$SWARM_EVO_DATA_DIR`` if set; else ``./data`` then
    ``../shared/data`` (relative to the current directory).
    """
    if data_dir is not None:
        return [Path(data_dir)]
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return [Path(env)]
    return [Path("data"), Path("..") / "shared" / "data"]


def resolve_data_file(data_file: str, data_dir: Path | None = None, *, source: Path | None = None) -> Path:
    """The absolute path of ``data_file`` (relative to the data directory; see data_search_dirs).

    Raises:
        ProblemError: the file exists in none of the directories (names them and --data-dir).
    """
    candidate = Path(data_file).expanduser()
    if candidate.is_absolute():
        if candidate.is_file():
            return candidate
        dirs: list[Path] = []
    else:
        dirs = data_search_dirs(data_dir)
        for base in dirs:
            path = base / candidate
            if path.is_file():
                return path.resolve()
    where = f"{source}: " if source else ""
    searched = ", ".join(str(d.resolve()) for d in dirs) or str(candidate)
    raise ProblemError(
        f"{where}data file '{data_file}' not found (looked in {searched}): pass --data-dir DIR "
        f"(a directory containing {data_file}) or set {DATA_DIR_ENV}"
    )


def available_instances(spec: InstancesSpec, data_dir: Path | None = None) -> list[str]:
    """Names of the instances found in the data directories (sorted, case-insensitively):
    every file matching ``spec.data_file`` with ``{instance}`` as a wildcard."""
    prefix, suffix = spec.data_file.split(INSTANCE_PLACEHOLDER)
    found: set[str] = set()
    for base in data_search_dirs(data_dir):
        for path in base.glob(prefix + "*" + suffix):
            relative = path.relative_to(base).as_posix()
            name = relative[len(prefix): len(relative) - len(suffix)]
            if path.is_file() and _INSTANCE_NAME.match(name):
                found.add(name)
    return sorted(found, key=str.lower)


def resolve_instance(spec: InstancesSpec, problem: str, instance: str | None, data_dir: Path | None = None,
                     ) -> tuple[str, Path]:
    """``(instance name, absolute data file)`` of ``instance`` (None: ``spec.default``).

    Raises:
        ProblemError: a name that is not a plain file name (letters, digits, ``_.-``), or no
            such file in the data directories; the message names the value, the directories
            searched and the available instances.
    """
    name = spec.default if instance is None else str(instance).strip()
    if not _INSTANCE_NAME.match(name):
        raise ProblemError(
            f"instance {instance!r} of problem {problem!r} is not an instance name (letters, digits, '_', '.', '-')"
        )
    relative = spec.data_file.replace(INSTANCE_PLACEHOLDER, name)
    for base in data_search_dirs(data_dir):
        path = base / relative
        if path.is_file():
            return name, path.resolve()
    searched = ", ".join(str(d.resolve()) for d in data_search_dirs(data_dir))
    available = available_instances(spec, data_dir)
    raise ProblemError(
        f"unknown instance {name!r} of problem {problem!r}: no {relative} in {searched}; available instances: "
        f"{', '.join(available) if available else 'none'} (pass --data-dir DIR, a directory holding {spec.data_file}, "
        f"or set {DATA_DIR_ENV})"
    )


def instance_known_best(spec: InstancesSpec, problem: str, instance: str, facts: dict[str, Any],
                        data_path: Path) -> float | None:
    """The best known raw score of ``instance``: ``facts["known_best"]`` (e.g. the file's own
    OPTIMUM line), else ``spec.known_best[instance]``, else None.

    Raises:
        ProblemError: the file and the table disagree, or none is known and
            ``spec.known_best_required``.
    """
    from_file = facts.get("known_best")
    from_table = spec.known_best.get(instance)
    if from_file is not None and from_table is not None and float(from_file) != float(from_table):
        raise ProblemError(
            f"{data_path} gives a best known score of {from_file} but problem.yaml instances.known_best.{instance} "
            f"is {from_table}: correct one of them"
        )
    value = from_file if from_file is not None else from_table
    if value is None and spec.known_best_required:
        raise ProblemError(
            f"instance {instance!r} of problem {problem!r} has no known best score: {data_path} states none and "
            f"problem.yaml instances.known_best has no entry {instance!r}; add one (the score needs it)"
        )
    return None if value is None else float(value)


def render_text(text: str, variables: dict[str, Any], *, source: str) -> str:
    """Render a problem text (title, description.md) as a Jinja2 template with ``variables``
    (``instance``, ``known_best``, ``timeout``, ``num_runs`` and the instance facts).

    Raises:
        ProblemError: a template error or an undefined name, naming ``source`` and the names
            that can be used.
    """
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        return env.from_string(text).render(**variables)
    except jinja2.TemplateError as exc:
        raise ProblemError(
            f"{source}: cannot render the text for this instance ({type(exc).__name__}: {exc}); names available: "
            f"{', '.join(sorted(variables))}"
        ) from None
