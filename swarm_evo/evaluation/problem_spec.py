"""The schema of a problem folder's ``problem.yaml`` and reading it (SPEC §11; seed 002).

:class:`ProblemSpec` lists the keys (unknown keys are errors), :class:`ScoreSpec` the
``score:`` mapping; ``instances:`` is :class:`~swarm_evo.evaluation.problem_data.InstancesSpec`.
:func:`read_spec` turns every defect into a :class:`ProblemError` naming the file and key.
Loading the whole folder: :func:`swarm_evo.evaluation.problem.load_problem`.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swarm_evo.evaluation.contract import Interpretation
from swarm_evo.evaluation.problem_data import InstancesSpec, ProblemError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ScoreSpec(BaseModel):
    """``score:`` of problem.yaml: the primary metric (its raw value goes to public metrics).

    ``name`` (e.g. ``sum_of_radii``), ``interpretation`` of the raw value, ``unit``,
    ``known_best`` (best known raw value, for gap metrics; None if unknown).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    interpretation: Interpretation = "higher_better"
    unit: str = ""
    known_best: float | None = None


class ProblemSpec(BaseModel):
    """The schema of ``problem.yaml`` (unknown keys are errors).

    ``timeout`` is seconds per run; ``data_file`` a path relative to the data directory
    (absolute paths are used as they are); ``instances`` a family of data files instead
    (:class:`~swarm_evo.evaluation.problem_data.InstancesSpec`); ``directions`` ideas the
    Evolution Log may offer.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    title: str = ""
    entry: str
    loci: list[str] = Field(min_length=1)
    required_loci: list[str] = Field(default_factory=list)
    timeout: float = Field(60.0, gt=0)
    num_runs: int = Field(1, ge=1)
    score: ScoreSpec
    data_file: str | None = None
    instances: InstancesSpec | None = None
    directions: list[str] = Field(default_factory=list)

    @field_validator("entry")
    @classmethod
    def _entry_identifier(cls, value: str) -> str:
        if not _IDENTIFIER.match(value):
            raise ValueError(f"entry must be a Python function name, got {value!r}")
        return value

    @field_validator("loci", "required_loci")
    @classmethod
    def _locus_names(cls, value: list[str]) -> list[str]:
        for locus in value:
            if not _IDENTIFIER.match(locus):
                raise ValueError(f"locus names are identifiers like LAYOUT, got {locus!r}")
        if len(set(value)) != len(value):
            raise ValueError(f"loci repeat: {value}")
        return value

    @model_validator(mode="after")
    def _required_subset(self) -> "ProblemSpec":
        unknown = [locus for locus in self.required_loci if locus not in self.loci]
        if unknown:
            raise ValueError(f"required_loci {unknown} are not in loci {self.loci}")
        if self.instances is not None and self.data_file is not None:
            raise ValueError("give data_file or instances.data_file, not both")
        if self.instances is not None and self.score.known_best is not None:
            raise ValueError("score.known_best names one instance's best: with instances put it under "
                             "instances.known_best.<instance>")
        return self


def read_spec(path: Path) -> ProblemSpec:
    """Read and validate ``path`` (a problem.yaml).

    Raises:
        ProblemError: not YAML, not a mapping, unknown or missing keys, bad values; one message
            naming the file and every key at fault (unknown keys list the allowed ones).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ProblemError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ProblemError(f"{path}: must be a mapping of keys (name, entry, loci, score, ...)")
    try:
        return ProblemSpec.model_validate(data)
    except ValidationError as exc:
        messages = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                parents = {"score": ScoreSpec, "instances": InstancesSpec}
                parent = parents.get(str(err["loc"][0]), ProblemSpec) if len(err["loc"]) > 1 else ProblemSpec
                messages.append(
                    f"unknown key '{loc}' (allowed: {', '.join(parent.model_fields)})"
                )
            elif err["type"] == "missing":
                messages.append(f"missing key '{loc}'")
            else:
                messages.append(f"{loc}: {err['msg']}")
        raise ProblemError(f"{path}: " + "; ".join(messages)) from None
