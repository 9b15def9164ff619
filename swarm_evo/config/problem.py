"""``problem``: an optimisation problem's own choices (SPEC §11)."""

from __future__ import annotations

from pydantic import Field

from swarm_evo.config.base import Section


class ProblemConfig(Section):
    """The optimisation problem's own choices (SPEC §11); ignored by competition runs."""

    instance: str | None = Field(
        None,
        description="Instance of a problem that has several (problem.yaml instances), e.g. kroA100 for tsp: "
        "the data file tsp/kroA100.tsp under the data directory; None = the problem's default instance. "
        "An error for a problem without instances and for competitions.",
    )
