"""``RunConfig``: the whole configuration of one run, its sections, dotted overrides and the
YAML file it is read from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from swarm_evo.config.agents import AgentsConfig
from swarm_evo.config.base import ConfigError, Section
from swarm_evo.config.migrations import migrate, migrate_dotted
from swarm_evo.config.model import ModelConfig
from swarm_evo.config.problem import ProblemConfig
from swarm_evo.config.sandbox import SandboxConfig
from swarm_evo.config.search import SearchConfig
from swarm_evo.config.store import StoreConfig


class RunConfig(Section):
    """The whole configuration of one run."""

    seed: int = Field(0, description="Seed of the run's random choices (the hidden split is drawn from it too).")
    mlebench_repo: str | None = Field(
        None,
        description="An mle-bench checkout: a competition's config.yaml, description and leaderboard.csv "
        "missing under data_dir are read from its mlebench/competitions/<id>/ (default: $MLEBENCH_REPO).",
    )
    store: StoreConfig = Field(default_factory=StoreConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    problem: ProblemConfig = Field(default_factory=ProblemConfig)

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """Renamed and removed keys read as they are named now (:mod:`.migrations`), whoever
        validates: a file, overrides, or a resumed run's saved ``info.config``."""
        return migrate(data)

    def with_overrides(self, overrides: dict[str, Any]) -> "RunConfig":
        """Return a copy with dotted-key overrides applied, e.g. ``{"search.max_steps": 30}``.

        None values are skipped (an unset flag). Raises ConfigError naming the key.
        """
        data = self.model_dump()
        for given, value in overrides.items():
            if value is None:
                continue
            dotted = migrate_dotted(given)
            if dotted is None:
                continue  # a removed key (logged by migrate when a file gives it; an override is dropped)
            *parents, leaf = dotted.split(".")
            target = data
            for part in parents:
                if part not in target or not isinstance(target[part], dict):
                    raise ConfigError(f"unknown configuration key '{dotted}'")
                target = target[part]
            if leaf not in target:
                raise ConfigError(f"unknown configuration key '{dotted}'")
            target[leaf] = value
        return _validate(data, source="overrides")


def _validate(data: Any, source: str) -> RunConfig:
    data = migrate(data, source=source)
    try:
        return RunConfig.model_validate(data or {})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key '{key}' (remove it; see docs/cli.md or swarm_evo/config/ for the keys)")
            elif isinstance(err.get("input"), dict):  # a rule across keys of a section
                problems.append(f"'{key}': {err['msg'].removeprefix('Value error, ')}")
            else:
                problems.append(f"'{key}': {err['msg']} (got {err.get('input')!r})")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def read_config_file(path: Path) -> dict:
    """The mapping a YAML config file holds (``{}`` for an empty file), not yet validated: what
    a sweep on a deployment sends to runs on other machines instead of the file's path
    (``two_phase_evo(config_data=...)``), since those machines need not see the file.

    Raises:
        ConfigError: unreadable file, invalid YAML, or a top level that is not a mapping; the
            message names the file.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (search, model, sandbox, agents, problem)")
    return data or {}


def config_from_mapping(data: dict, source: str) -> RunConfig:
    """Validate a config mapping (a config file's contents, :func:`read_config_file`).

    Raises:
        ConfigError: unknown key or wrong type; the message starts with ``source`` and names the key.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a config must be a mapping of sections (search, model, sandbox, agents, problem)")
    return _validate(data, source=source)


def load_config(path: Path | None = None) -> RunConfig:
    """Read and validate a YAML config file; None gives the defaults.

    Raises:
        ConfigError: unreadable file, invalid YAML, unknown key or wrong type; the message
            names the file and the key.
    """
    if path is None:
        return RunConfig()
    return _validate(read_config_file(path), source=str(path))
