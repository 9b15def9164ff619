"""What every section of the run configuration shares: its error and its base model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A configuration file or override that cannot be used; the message names file, key and fix."""


class Section(BaseModel):
    """A configuration section: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
