"""``store``: the run store a run directory is mirrored to (issue 34)."""

from __future__ import annotations

from pydantic import Field, model_validator

from swarm_evo.config.base import Section


DEFAULT_MAX_FILE_MB = 1024
"""Default ``store.max_file_mb``: files larger than this (MiB) are neither mirrored nor fetched."""


class StoreConfig(Section):
    """The run store (issue 34; docs/many-machines.md): where the run directory is mirrored, and
    the largest file that goes there. A config file may give ``store: URL`` for ``store.url``."""

    url: str | None = Field(
        None,
        description="Run store: a directory or an fsspec URL (s3://bucket/prefix, gs://..., sftp://...) that the "
        "run directory is mirrored to, as STORE/runs/<run name>/, so any machine can read or resume the run "
        "(default: $SWARM_EVO_STORE; none: the run directory only). Credentials never go in the URL.",
    )
    max_file_mb: int = Field(
        DEFAULT_MAX_FILE_MB, ge=1,
        description="Files larger than this (MiB) are neither mirrored to the store nor fetched from it; each is "
        "recorded in the run report (issue 40, item 7).",
    )

    @model_validator(mode="before")
    @classmethod
    def _url_alone(cls, value: object) -> object:
        return {"url": value} if value is None or isinstance(value, str) else value

