"""A model family of the offline model's MODEL gene: the scikit-learn ones (:mod:`.models`) and
the gradient-boosting library ones (:mod:`.boosters`) share it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
    """One model family: display name, preprocessing kind, estimator source, priors.

    ``package``: the distribution the family needs (None: scikit-learn, always there);
    ``imports``: import lines written at the top of the MODEL gene (a library family's gene
    imports its own estimator, so it can replace the MODEL gene of any program).
    """

    key: str
    name: str
    kind: str
    estimator: str
    constants: dict = field(default_factory=dict)
    tabular: bool = True
    text: bool = False
    prior: float = 1.0
    text_constants: dict = field(default_factory=dict)
    package: str | None = None
    imports: tuple[str, ...] = ()
