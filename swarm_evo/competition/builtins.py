"""Built-in competitions: their MLE-bench-style config lives here, in code.

Three come from Kaggle data (prepared from a raw folder, see ``prepare.py`` and
``../shared/data/README.md``); the ``sklearn-*`` ones are built from datasets that ship
inside scikit-learn (``sklearn.datasets.load_*``, no download), so a fresh machine can run
a competition without any raw data.

Grader choices for the sklearn competitions:
- ``sklearn-breast-cancer`` uses binary ``log-loss`` rather than ``auc-roc``: on a 57-row
  test set AUC saturates at ~0.99-1.0 for most reasonable models (many ties, little signal
  to rank candidate programs), while log-loss keeps separating calibrated from
  over-confident models and exercises the probability checks.
- ``sklearn-diabetes``: RMSE; ``sklearn-wine``: multi-class log-loss; ``sklearn-digits``:
  accuracy on a multi-class label column.
- ``sklearn-digits-images``: the same digits in MLE-bench's image layout (a second modality):
  one grayscale PNG per digit in ``train/`` and ``test/`` (``<id>.png``, 8x8 upscaled to
  ``image_size`` pixels), labels in ``train.csv`` (``id,label``); accuracy on ``label``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SklearnTask = Literal["binary", "multiclass", "regression", "label"]


class BuiltinSpec(BaseModel):
    """Config of a built-in competition (MLE-bench config.yaml fields + how to prepare it).

    ``raw_files`` are the files ``prepare`` needs in ``--raw-dir``; ``sklearn_loader`` names
    a ``sklearn.datasets.load_*`` function for competitions that need no raw dir, and
    ``sklearn_task`` how its target becomes answers/submission columns. ``sklearn_images``
    names a loader whose ``images`` array (n, h, w) becomes one PNG per row (image
    competitions, also no raw dir), square ``image_size`` pixels a side. ``id_column`` is the
    sample submission's id column and ``public_files``/``public_folders``/``private_files`` the
    files and (non-empty) folders ``prepare.py`` writes to ``prepared/public`` and
    ``prepared/private`` (a run needs them all; ``validate.py`` checks them before anything is
    written).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    name: str
    competition_type: str = "simple"
    awards_medals: bool = False
    grader_name: str
    id_column: str = "id"
    public_files: tuple[str, ...] = ("train.csv", "test.csv", "sample_submission.csv")
    private_files: tuple[str, ...] = ("test.csv",)
    raw_files: tuple[str, ...] = ()
    sklearn_loader: str | None = None
    sklearn_task: SklearnTask | None = None
    sklearn_images: str | None = None
    image_size: int = 32
    """Side in pixels of the square PNGs of an image competition (``sklearn_images``)."""
    public_folders: tuple[str, ...] = ()
    in_mlebench: bool = False
    """MLE-bench has a competition of this id (graded the same way)."""
    hidden_relation: Literal["random", "group", "time"] = "random"
    """How a run's hidden split draws its rows (issue 53, item 7:
    :mod:`swarm_evo.competition.hidden_relation`): as the competition's test rows were drawn."""
    hidden_relation_column: str | None = None
    """The group or date column of a ``group`` or ``time`` relation."""
    hidden_relation_why: str = "prepare.py draws the test rows at random, as MLE-bench's train_test_split"
    """Why, in a few words (logged at start)."""

    @property
    def needs_raw_dir(self) -> bool:
        """True for competitions prepared from a raw Kaggle folder."""
        return self.sklearn_loader is None and self.sklearn_images is None


BUILTIN_COMPETITIONS: dict[str, BuiltinSpec] = {
    s.id: s
    for s in (
        BuiltinSpec(
            id="spaceship-titanic",
            name="Spaceship Titanic",
            grader_name="accuracy",
            id_column="PassengerId",
            in_mlebench=True,
            raw_files=("train.csv",),
        ),
        BuiltinSpec(
            id="spooky-author-identification",
            name="Spooky Author Identification",
            grader_name="multi-class-log-loss",
            raw_files=("train.csv",),
            in_mlebench=True,
        ),
        BuiltinSpec(
            id="house-prices",
            name="House Prices - Advanced Regression Techniques",
            grader_name="root-mean-squared-log-error",
            id_column="Id",
            raw_files=("train.csv",),
        ),
        BuiltinSpec(
            id="sklearn-breast-cancer",
            name="Breast Cancer Wisconsin (scikit-learn)",
            grader_name="log-loss",
            sklearn_loader="load_breast_cancer",
            sklearn_task="binary",
        ),
        BuiltinSpec(
            id="sklearn-diabetes",
            name="Diabetes progression (scikit-learn)",
            grader_name="root-mean-squared-error",
            sklearn_loader="load_diabetes",
            sklearn_task="regression",
        ),
        BuiltinSpec(
            id="sklearn-wine",
            name="Wine cultivars (scikit-learn)",
            grader_name="multi-class-log-loss",
            sklearn_loader="load_wine",
            sklearn_task="multiclass",
        ),
        BuiltinSpec(
            id="sklearn-digits",
            name="Handwritten digits 8x8 (scikit-learn)",
            grader_name="accuracy",
            sklearn_loader="load_digits",
            sklearn_task="label",
        ),
        BuiltinSpec(
            id="sklearn-digits-images",
            name="Handwritten digits as images (scikit-learn)",
            grader_name="accuracy",
            sklearn_images="load_digits",
            image_size=32,
            public_files=("train.csv", "sample_submission.csv"),
            public_folders=("train", "test"),
        ),
    )
}
