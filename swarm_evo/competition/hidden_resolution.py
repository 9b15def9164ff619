"""What a hidden split can tell apart, and the hidden score the model is shown (issue 53, item 8).

The same hidden rows, under the same ids, are graded for every node; a model shown each node's
exact hidden score could flip chosen rows of its submission and read the change (one row of
accuracy on 1,300 hidden rows moves the score by 0.0008). Prompts therefore show the score
rounded to what the split can tell apart; the journal keeps the exact value
(``Node.hidden_score``), and every ranking uses it.

* :func:`score_resolution` — once per split, when it is written: the bootstrap standard error of
  the competition's own grader on the hidden rows, for a reference submission built from the
  answers (a model right on most rows: :func:`reference_submission`). At most
  :data:`RESOLUTION_ROWS` rows are resampled; the error is scaled to the split's rows by
  √(m/n).
* What a prompt shows from it (the rounding, a node's ``hidden_shown``) is
  :mod:`swarm_evo.population.hidden_display`, below every layer that renders prompts.
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pandas as pd

from .graders import Grader

log = logging.getLogger(__name__)

RESOLUTION_ROWS = 2000
"""At most this many hidden rows are resampled (the error is scaled to the split's size)."""
BOOTSTRAPS = 20
"""Bootstrap resamples of the hidden rows."""
WRONG_SHARE = 0.3
"""The reference submission takes another hidden row's answer on this share of the rows."""
SHRINK = 0.2
"""Probability answers of the reference submission: this share of the way to the column mean
(never a 0 or 1 that a log-loss would punish without bound)."""


def reference_submission(answers: pd.DataFrame, grader: Grader, id_column: str, target_columns: list[str],
                         rng: np.random.Generator) -> pd.DataFrame:
    """A submission of the hidden rows that a fair model might write: each row's answer, but on
    :data:`WRONG_SHARE` of the rows another row's; for probability graders shrunk towards the
    column means (:data:`SHRINK`). Same ids, same columns as ``answers``."""
    wrong = rng.random(len(answers)) < WRONG_SHARE
    donors = rng.integers(0, len(answers), len(answers))
    take = np.where(wrong, donors, np.arange(len(answers)))
    submission = answers[[id_column]].copy()
    for column in target_columns:
        values = answers[column].to_numpy()[take]
        if grader.traits.probabilities:
            numbers = pd.to_numeric(pd.Series(values), errors="coerce").astype(float)
            values = ((1 - SHRINK) * numbers + SHRINK * numbers.mean()).to_numpy()
        submission[column] = values
    if grader.traits.one_column_per_class:
        total = submission[target_columns].sum(axis=1)
        submission[target_columns] = submission[target_columns].div(total.where(total > 0, 1.0), axis=0)
    return submission


def score_resolution(grader: Grader, answers: pd.DataFrame, id_column: str, target_columns: list[str],
                     seed: int) -> float | None:
    """The bootstrap standard error of ``grader``'s score on the hidden rows (module docstring),
    in the metric's units; None when the grader cannot score a resample (logged: the prompts then
    show exact scores, as before issue 53) or the error is not a positive finite number.

    Deterministic for the same answers and ``seed``.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 53, 8]))
    answers = answers.reset_index(drop=True)
    n = len(answers)
    if n < 2:
        return None
    rows = answers if n <= RESOLUTION_ROWS else answers.iloc[np.sort(rng.choice(n, RESOLUTION_ROWS, replace=False))]
    rows = rows.reset_index(drop=True)
    submission = reference_submission(rows, grader, id_column, target_columns, rng)
    m = len(rows)
    scores = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(BOOTSTRAPS):
                pick = rng.integers(0, m, m)
                keys = pd.Series([f"r{k}" for k in range(m)])
                truth = rows.iloc[pick].reset_index(drop=True).assign(**{id_column: keys})
                guess = submission.iloc[pick].reset_index(drop=True).assign(**{id_column: keys})
                scores.append(float(grader.score(guess, truth, id_column, target_columns)))
    except Exception as exc:  # noqa: BLE001 - a resolution is a nicety; the exact score still ranks
        log.warning("hidden split: no resolution for the prompts (%s: %s); they show exact hidden scores",
                    type(exc).__name__, exc)
        return None
    finite = [s for s in scores if math.isfinite(s)]
    if len(finite) < BOOTSTRAPS // 2:
        return None
    error = float(np.std(finite, ddof=1)) * math.sqrt(m / n)
    return error if math.isfinite(error) and error > 0 else None
