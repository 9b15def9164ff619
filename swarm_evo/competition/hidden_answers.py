"""The hidden rows' answers in the grader's own form, checked before a run relies on them (issue 53, items 6 and 10).

A hidden split's answers come from the public training table, whose labels need not be
spelled as the competition's private answers are: a binary AUC competition can train on
``no``/``yes`` while its answers and submissions are 0/1 probabilities. Before issue 53 every
step's hidden grading then raised ``CompetitionError`` and the run crashed in its first epoch.

* :func:`answer_column` writes one target column of the answers: for a ``probability``
  grader (auc-roc, binary log-loss: answers must be 0/1 or booleans,
  :func:`swarm_evo.competition.graders._binary_truth`) two labels whose spellings fix the
  positive class (:data:`POSITIVE_SPELLINGS`, :data:`NEGATIVE_SPELLINGS`: ``yes``/``no``,
  ``y``/``n``, ``pos``/``neg`` ...) become 1/0; labels that are already binary stay as they are;
  any other pair leaves the positive class unknown and the split unavailable.
* :func:`check_gradable` grades the split once at start, before any program runs: the view's
  sample-submission rows of the hidden ids (what a program is asked to write) against the
  answers, with the competition's own grader. A grader that refuses the answers, or a score
  that is not a finite number (a hidden-row set holding a single class of a target: AUC is
  undefined), makes the split unavailable with the reason, so ``search.fitness: auto`` falls
  back to the printed metric in one line (:func:`swarm_evo.objective.fitness.apply_fitness`)
  instead of a run whose every node's grading fails.

Errors: :class:`~swarm_evo.competition.hidden_layout.HiddenSplitUnavailable`.
"""

from __future__ import annotations

import math
import warnings

import pandas as pd

from .checks import normalise_label
from .errors import CompetitionError, InvalidSubmissionError
from .graders import Grader
from .hidden_layout import HiddenSplitUnavailable

POSITIVE_SPELLINGS = frozenset({"1", "true", "yes", "y", "t", "positive", "pos"})
"""Label spellings (case-insensitive, stripped) read as the positive class of a binary target."""
NEGATIVE_SPELLINGS = frozenset({"0", "false", "no", "n", "f", "negative", "neg"})
"""Label spellings read as the negative class."""
_BINARY = {"True", "False", "1", "0"}


def answer_column(values: pd.Series, grader: Grader, column: str, train_values: pd.Series) -> pd.Series:
    """Column ``column`` of the hidden answers from the hidden rows' training ``values``.

    ``train_values``: the whole training column (the positive class is read from all its
    labels, not only the hidden rows'). Graders other than positive-class probability ones
    (``KindTraits.positive_class``) take the labels as the training table spells them.

    Raises:
        HiddenSplitUnavailable: a positive-class probability grader's training labels are neither binary
            nor a pair whose spelling fixes the positive class (the message names them).
    """
    if not grader.traits.positive_class:
        return values
    labels = set(train_values.map(normalise_label))
    if labels <= _BINARY:
        return values
    folded = {label: label.strip().lower() for label in labels}
    positive = [label for label, text in folded.items() if text in POSITIVE_SPELLINGS]
    negative = [label for label, text in folded.items() if text in NEGATIVE_SPELLINGS]
    if len(labels) == 2 and len(positive) == 1 and len(negative) == 1:
        return values.map(normalise_label).map({positive[0]: 1, negative[0]: 0})
    shown = sorted(labels)[:5]
    raise HiddenSplitUnavailable(
        f"the training labels of column {column!r} ({shown}) are not the 0/1 answers the {grader.name} grader "
        "takes, and no positive class can be read from them")


def check_gradable(grader: Grader, sample_rows: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                   target_columns: list[str]) -> None:
    """Grade ``sample_rows`` (the view's sample-submission rows of the hidden ids) against the
    hidden ``answers`` with ``grader``; return when that gives a finite score.

    A sample submission that the grader's own value checks refuse (rows of a multi-class sample
    that do not sum to 1, say) tells nothing of the answers and passes: the answers are only
    judged by a failure that is theirs (``CompetitionError``, scikit-learn's ``ValueError`` on the
    labels) or a score that is not finite.

    Raises:
        HiddenSplitUnavailable: the grader cannot grade the hidden rows; the message says why.
    """
    try:
        grader.check_format(sample_rows, sample_rows, id_column, target_columns)
    except InvalidSubmissionError:
        return
    try:
        with warnings.catch_warnings():  # an undefined metric is judged below, by its value
            warnings.simplefilter("ignore")
            score = grader.score(sample_rows, answers, id_column, target_columns)
    except CompetitionError as exc:
        raise HiddenSplitUnavailable(f"the {grader.name} grader cannot grade the hidden rows' answers ({exc})") from None
    except ValueError as exc:  # scikit-learn on the answers' labels
        raise HiddenSplitUnavailable(f"the {grader.name} grader fails on the hidden rows ({exc})") from None
    if not math.isfinite(score):
        raise HiddenSplitUnavailable(
            f"the {grader.name} grader gives no finite score on the {len(answers)} hidden rows (a target column "
            "with a single class among them?)")
