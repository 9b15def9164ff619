"""``prepare_competition``: write a built-in competition in MLE-bench's layout.

Output under ``<data_dir>/<id>/``::

    prepared/public/{train.csv, test.csv, sample_submission.csv, description.md}
    prepared/private/test.csv        # answers, never shown to the agent
    config.yaml                      # MLE-bench format, so the folder also loads generically

Image competitions (``BuiltinSpec.sklearn_images``, e.g. ``sklearn-digits-images``) follow
MLE-bench's image layout instead::

    prepared/public/{train/<id>.png, test/<id>.png, train.csv (id,label),
                     sample_submission.csv (id,label), description.md}
    prepared/private/test.csv        # id,label answers

Recipes follow MLE-bench's ``mlebench/competitions/<id>/prepare.py`` and
``../shared/data/README.md``: read CSVs with ``pd.read_csv(..., float_precision=
"round_trip")``, split with ``train_test_split(raw, test_size=0.1, random_state=0)``, write
with ``to_csv(index=False)`` (``"\\n"`` line endings). Done so, spaceship-titanic
reproduces MLE-bench's md5 sums. Re-running overwrites the files (idempotent).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import yaml

from .builtins import BUILTIN_COMPETITIONS, BuiltinSpec
from .errors import CompetitionError
from .loader import embedded_description, load_competition
from .model import Competition

TEST_SIZE = 0.1
RANDOM_STATE = 0
SPOOKY_CLASSES = ["EAP", "HPL", "MWS"]

# A recipe returns (public train, public test, sample submission, private answers).
Split = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]


def read_csv(path: Path) -> pd.DataFrame:
    """``pd.read_csv`` as MLE-bench does (``float_precision="round_trip"``)."""
    return pd.read_csv(path, float_precision="round_trip")


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``to_csv(index=False)`` with ``"\\n"`` line endings (byte-identical to MLE-bench)."""
    frame.to_csv(path, index=False, lineterminator="\n")


def split(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MLE-bench's split: ``train_test_split(raw, test_size=0.1, random_state=0)``."""
    from sklearn.model_selection import train_test_split  # on use: module docstring of graders.py

    train, test = train_test_split(raw, test_size=TEST_SIZE, random_state=RANDOM_STATE)
    return train, test


def _spaceship_titanic(raw_dir: Path | None) -> Split:
    train, test = split(read_csv(raw_dir / "train.csv"))
    sample = test[["PassengerId", "Transported"]].copy()
    sample["Transported"] = False
    return train, test.drop(columns="Transported"), sample, test


def _spooky(raw_dir: Path | None) -> Split:
    train, test = split(read_csv(raw_dir / "train.csv"))
    answers = test[["id"]].copy()
    for cls in SPOOKY_CLASSES:
        answers[cls] = (test["author"] == cls).astype(int)
    sample = test[["id"]].copy()
    for cls in SPOOKY_CLASSES:
        sample[cls] = 1.0 / len(SPOOKY_CLASSES)
    return train, test.drop(columns="author"), sample, answers


def _house_prices(raw_dir: Path | None) -> Split:
    train, test = split(read_csv(raw_dir / "train.csv"))
    sample = test[["Id"]].copy()
    sample["SalePrice"] = float(train["SalePrice"].mean())
    return train, test.drop(columns="SalePrice"), sample, test[["Id", "SalePrice"]]


def _sklearn_recipe(spec: BuiltinSpec) -> Callable[[Path | None], Split]:
    def recipe(_raw_dir: Path | None) -> Split:
        from sklearn import datasets

        loader = getattr(datasets, spec.sklearn_loader)
        kwargs = {"scaled": False} if spec.sklearn_loader == "load_diabetes" else {}
        bunch = loader(**kwargs)
        features = pd.DataFrame(
            bunch.data, columns=[str(c).replace(" ", "_") for c in bunch.feature_names]
        )
        raw = pd.concat([pd.DataFrame({"id": np.arange(len(features))}), features], axis=1)
        if spec.sklearn_task == "multiclass":
            raw["target"] = np.asarray(bunch.target_names)[bunch.target]
        else:
            raw["target"] = bunch.target
        train, test = split(raw)
        public_test = test.drop(columns="target")
        sample = test[["id"]].copy()
        if spec.sklearn_task == "multiclass":
            classes = [str(c) for c in bunch.target_names]
            answers = test[["id"]].copy()
            for cls in classes:
                answers[cls] = (test["target"] == cls).astype(int)
                sample[cls] = 1.0 / len(classes)
            return train, public_test, sample, answers
        if spec.sklearn_task == "binary":
            sample["target"] = 0.5
        elif spec.sklearn_task == "regression":
            sample["target"] = float(train["target"].mean())
        else:  # label
            sample["target"] = train["target"].mode().iloc[0]
        return train, public_test, sample, test[["id", "target"]]

    return recipe


def image_pixels(image: np.ndarray, size: int, max_value: float) -> np.ndarray:
    """One grayscale image (h, w) of values 0..``max_value`` as a (size, size) uint8 array.

    Values are scaled to 0..255, then resized with pillow's bilinear filter (8x8 digits become
    smooth 32x32 strokes, as a photographed digit would look).
    """
    from PIL import Image

    scaled = np.clip(np.rint(np.asarray(image, dtype=float) * (255.0 / max_value)), 0, 255).astype(np.uint8)
    resized = Image.fromarray(scaled).resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(resized, dtype=np.uint8)


def _write_pngs(images: np.ndarray, ids: pd.Series, folder: Path, size: int, max_value: float) -> None:
    """``folder/<id>.png`` for each row (grayscale "L", size x size); the folder is emptied first."""
    from PIL import Image

    if folder.is_dir():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for ident, image in zip(ids, images):
        Image.fromarray(image_pixels(image, size, max_value)).save(folder / f"{ident}.png")


def _prepare_images(spec: BuiltinSpec, public: Path, private: Path) -> None:
    """Write an image competition: PNG folders, ``train.csv``, sample submission, answers.

    The split is MLE-bench's (``train_test_split(..., test_size=0.1, random_state=0)`` on the
    rows ``id = 0..n-1``), so the test ids are those of the tabular ``sklearn-digits``.
    """
    from sklearn import datasets

    bunch = getattr(datasets, spec.sklearn_images)()
    images = np.asarray(bunch.images)
    max_value = float(images.max()) or 1.0  # load_digits: 16
    raw = pd.DataFrame({"id": np.arange(len(images)), "label": bunch.target})
    train, test = split(raw)
    _write_pngs(images[train["id"].to_numpy()], train["id"], public / "train", spec.image_size, max_value)
    _write_pngs(images[test["id"].to_numpy()], test["id"], public / "test", spec.image_size, max_value)
    write_csv(train, public / "train.csv")
    sample = test[["id"]].copy()
    sample["label"] = train["label"].mode().iloc[0]
    write_csv(sample, public / "sample_submission.csv")
    write_csv(test[["id", "label"]], private / "test.csv")
    stale = public / "test.csv"  # an image competition lists its test ids in the sample submission
    if stale.is_file():
        stale.unlink()


RECIPES: dict[str, Callable[[Path | None], Split]] = {
    "spaceship-titanic": _spaceship_titanic,
    "spooky-author-identification": _spooky,
    "house-prices": _house_prices,
    **{
        cid: _sklearn_recipe(spec)
        for cid, spec in BUILTIN_COMPETITIONS.items()
        if spec.sklearn_loader is not None
    },
}

# Raw files copied verbatim into prepared/public when present (extra documentation).
EXTRA_PUBLIC_FILES = {"house-prices": ("data_description.txt",)}


def _check_raw_dir(spec: BuiltinSpec, raw_dir: Path | None) -> Path | None:
    if not spec.needs_raw_dir:
        return Path(raw_dir) if raw_dir is not None else None
    if raw_dir is None:
        raise CompetitionError(
            f"{spec.id} is prepared from Kaggle's raw files: pass --raw-dir, the folder "
            f"holding {list(spec.raw_files)} (e.g. ../shared/data/{spec.id}/raw)"
        )
    raw_dir = Path(raw_dir).expanduser()
    if not raw_dir.is_dir():
        raise CompetitionError(
            f"raw dir {raw_dir} not found: pass --raw-dir, the folder holding "
            f"{list(spec.raw_files)} for {spec.id}"
        )
    for name in spec.raw_files:
        if not (raw_dir / name).is_file():
            raise CompetitionError(f"{raw_dir / name} not found: {spec.id} needs raw {name}")
    return raw_dir


def mlebench_config(spec: BuiltinSpec) -> dict:
    """MLE-bench ``config.yaml`` content for a built-in (paths relative to data_dir)."""
    cid = spec.id
    return {
        "id": cid,
        "name": spec.name,
        "competition_type": spec.competition_type,
        "awards_medals": spec.awards_medals,
        "prizes": None,
        "description": f"{cid}/prepared/public/description.md",
        "dataset": {
            "answers": f"{cid}/prepared/private/test.csv",
            "sample_submission": f"{cid}/prepared/public/sample_submission.csv",
        },
        "grader": {"name": spec.grader_name},
    }


def prepare_competition(
    competition_id: str, raw_dir: Path | None, data_dir: Path
) -> Competition:
    """Prepare built-in ``competition_id`` from ``raw_dir`` into ``data_dir``; return it loaded.

    ``raw_dir`` is required for Kaggle competitions (spaceship-titanic,
    spooky-author-identification, house-prices) and ignored for ``sklearn-*`` ones (image
    competitions write their PNG folders with pillow). The
    description is ``raw_dir.parent / "description.md"`` if it exists, else the embedded
    ``descriptions/<id>.md``. Raises ``CompetitionError`` for an unknown id or a missing
    raw dir/file (naming the path). Overwrites earlier output.
    """
    spec = BUILTIN_COMPETITIONS.get(competition_id)
    if spec is None:
        raise CompetitionError(
            f"no prepare recipe for {competition_id!r}: built-ins are "
            f"{sorted(BUILTIN_COMPETITIONS)}; prepare other competitions with MLE-bench "
            f"(`mlebench prepare -c {competition_id}`) and copy its config.yaml beside them"
        )
    raw_dir = _check_raw_dir(spec, raw_dir)
    data_dir = Path(data_dir).expanduser()
    comp_dir = data_dir / competition_id
    public = comp_dir / "prepared" / "public"
    private = comp_dir / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)

    if spec.sklearn_images is not None:
        _prepare_images(spec, public, private)
    else:
        train, test, sample, answers = RECIPES[competition_id](raw_dir)
        write_csv(sample, public / "sample_submission.csv")
        write_csv(answers, private / "test.csv")
        write_csv(train, public / "train.csv")
        write_csv(test, public / "test.csv")
    if raw_dir is not None:
        for name in EXTRA_PUBLIC_FILES.get(competition_id, ()):
            if (raw_dir / name).is_file():
                (public / name).write_bytes((raw_dir / name).read_bytes())

    description_src = raw_dir.parent / "description.md" if raw_dir is not None else None
    if spec.needs_raw_dir and description_src is not None and description_src.is_file():
        description = description_src.read_text(encoding="utf-8")
    else:
        description = embedded_description(competition_id)
    (public / "description.md").write_text(description, encoding="utf-8")
    (comp_dir / "config.yaml").write_text(
        yaml.safe_dump(mlebench_config(spec), sort_keys=False), encoding="utf-8"
    )
    return load_competition(competition_id, data_dir)
