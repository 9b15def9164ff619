"""Run configuration: one YAML file validated by pydantic, overridable by flags (SPEC §13).

Every key is read somewhere and unknown keys are errors, so a typo in a config file fails
before any work with the file, the key and the fix. Defaults are the seeds' values
(seed 000 decisions A–M; SPEC §13).

One module per section (issue 55): ``search.py``, ``model.py``, ``sandbox.py``, ``agents.py``,
``problem.py``, ``store.py``; ``run.py`` holds :class:`RunConfig`, the one entry, and the file
readers. Everything a caller needs is importable from here
(``from swarm_evo.config import RunConfig, ConfigError``).

May import: sandbox (the backends' registry, defaults and limits).
"""

from __future__ import annotations

from swarm_evo.config.agents import AgentsConfig
from swarm_evo.config.base import ConfigError
from swarm_evo.config.model import ModelConfig
from swarm_evo.config.problem import ProblemConfig
from swarm_evo.config.run import RunConfig, config_from_mapping, load_config, read_config_file
from swarm_evo.config.sandbox import BackendName, SandboxConfig
from swarm_evo.config.search import FitnessSource, SearchConfig, SearchPolicy
from swarm_evo.config.store import DEFAULT_MAX_FILE_MB, StoreConfig

__all__ = [
    "AgentsConfig", "BackendName", "ConfigError", "DEFAULT_MAX_FILE_MB", "FitnessSource", "ModelConfig",
    "ProblemConfig", "RunConfig", "SandboxConfig", "SearchConfig", "SearchPolicy", "StoreConfig",
    "config_from_mapping", "load_config", "read_config_file",
]
