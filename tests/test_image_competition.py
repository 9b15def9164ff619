"""A second modality (issue 15): the built-in image competition ``sklearn-digits-images``.

scikit-learn's digits (8x8, values 0..16) as 32x32 grayscale PNG files in MLE-bench's image
layout (``train/``, ``test/``, ``train.csv`` id,label, sample submission, private answers):
prepared with no download, validated (folders included), graded by accuracy, described by the
data preview, solved by the offline model's image DATA gene, and run end to end with the
local backend (the program environment's interpreter, ``--python``) and the Docker backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

from swarm_evo.cli.commands import main
from swarm_evo.competition import CompetitionError, grade_submission, load_competition, prepare_competition
from swarm_evo.competition.prepare import image_pixels
from swarm_evo.prompting.data_preview import preview_data
from swarm_evo.prompting.data_preview_images import TOTENSOR_WARNING
from swarm_evo.llm.offline import data_gene, programs
from swarm_evo.llm.offline.dataset import infer_dataset

CID = "sklearn-digits-images"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A data folder with sklearn-digits-images prepared by the CLI (no raw dir)."""
    root = tmp_path_factory.mktemp("images")
    assert main(["prepare", CID, "--data-dir", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def comp(prepared):
    return load_competition(CID, prepared)


def _ctx_competition(comp) -> dict:
    return {"id": comp.id, **comp.grader.facts(), "public_dir": str(comp.public_dir),
            "id_column": comp.id_column, "target_columns": list(comp.target_columns),
            "sample_submission": str(comp.sample_submission_path)}


# ----------------------------------------------------------------------------- prepare
def test_prepare_writes_mlebench_image_layout(prepared, comp):
    public = prepared / CID / "prepared" / "public"
    assert sorted(p.name for p in public.iterdir()) == [
        "description.md", "sample_submission.csv", "test", "train", "train.csv"]
    assert (prepared / CID / "config.yaml").is_file()
    assert comp.id_column == "id" and comp.target_columns == ["label"] and comp.grader.name == "accuracy"
    assert not comp.is_lower_better and "32x32" in comp.description

    digits = load_digits()
    train_ids, test_ids = train_test_split(np.arange(len(digits.target)), test_size=0.1, random_state=0)
    train = pd.read_csv(public / "train.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    answers = pd.read_csv(comp.answers_path)
    assert list(train.columns) == ["id", "label"] and list(sample.columns) == ["id", "label"]
    assert list(answers.columns) == ["id", "label"]
    assert list(train["id"]) == list(train_ids) and list(sample["id"]) == list(test_ids)  # MLE-bench's split
    assert list(answers["id"]) == list(sample["id"])
    assert (train["label"].to_numpy() == digits.target[train_ids]).all()
    assert (answers["label"].to_numpy() == digits.target[test_ids]).all()

    train_pngs = sorted(public.joinpath("train").iterdir())
    test_pngs = sorted(public.joinpath("test").iterdir())
    assert (len(train_pngs), len(test_pngs)) == (1617, 180)
    assert {p.name for p in train_pngs} == {f"{i}.png" for i in train["id"]}
    assert {p.name for p in test_pngs} == {f"{i}.png" for i in sample["id"]}
    for ident in (int(train["id"].iloc[0]), int(sample["id"].iloc[0])):
        folder = "train" if ident in set(train["id"]) else "test"
        with Image.open(public / folder / f"{ident}.png") as im:
            assert (im.format, im.mode, im.size) == ("PNG", "L", (32, 32))
            pixels = np.asarray(im)
        assert pixels.dtype == np.uint8 and pixels.max() > 200 and pixels.min() == 0
        assert (pixels == image_pixels(digits.images[ident], 32, 16.0)).all()
        # the 32x32 image is the 8x8 digit upscaled: block means track the original pixels
        blocks = pixels.reshape(8, 4, 8, 4).mean(axis=(1, 3))
        assert np.corrcoef(blocks.ravel(), digits.images[ident].ravel())[0, 1] > 0.9


def test_answers_never_reach_the_public_folder(prepared, comp):
    public = comp.public_dir
    answers = pd.read_csv(comp.answers_path)
    train = pd.read_csv(public / "train.csv")
    sample = pd.read_csv(public / "sample_submission.csv")
    assert set(train["id"]).isdisjoint(answers["id"])
    assert sample["label"].nunique() == 1  # a constant guess, not the answers
    assert not (public / "test.csv").exists()
    public_names = {p.relative_to(public).as_posix() for p in public.rglob("*")}
    assert not any("private" in name or "answer" in name for name in public_names)


def test_prepare_is_idempotent(prepared, comp, tmp_path):
    png = comp.public_dir / "test" / f"{int(pd.read_csv(comp.answers_path)['id'].iloc[0])}.png"
    before = png.read_bytes()
    (comp.public_dir / "train" / "stale.png").write_bytes(before)
    again = prepare_competition(CID, None, prepared)
    assert again == comp and png.read_bytes() == before
    assert not (comp.public_dir / "train" / "stale.png").exists()
    assert len(list((comp.public_dir / "train").iterdir())) == 1617


def test_missing_or_empty_image_folder_is_bad_input(prepared, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(prepared, data)
    test_dir = data / CID / "prepared" / "public" / "test"
    for png in test_dir.iterdir():
        png.unlink()
    with pytest.raises(CompetitionError) as err:
        load_competition(CID, data)
    assert f"{test_dir}/ (empty)" in str(err.value) and "public test/ folder" in str(err.value)
    assert f"swarm-evo prepare {CID} --data-dir {data}" in str(err.value)
    test_dir.rmdir()
    with pytest.raises(CompetitionError, match=f"{test_dir}/ not found"):
        load_competition(CID, data)


# ----------------------------------------------------------------------------- grading
def test_accuracy_grade_equals_sklearn(comp, tmp_path):
    answers = pd.read_csv(comp.answers_path)
    perfect = tmp_path / "perfect.csv"
    answers.to_csv(perfect, index=False)
    report = grade_submission(perfect, comp)
    assert report.valid_submission and report.score == pytest.approx(1.0)

    constant = answers.copy()
    constant["label"] = 3
    path = tmp_path / "constant.csv"
    constant.sample(frac=1.0, random_state=1).to_csv(path, index=False)  # row order is free
    expected = accuracy_score(answers["label"], constant["label"])
    assert 0.0 < expected < 0.2
    assert grade_submission(path, comp).score == round(expected, 5)  # MLE-bench rounds to 5 decimals

    sample_report = grade_submission(comp.sample_submission_path, comp)
    assert sample_report.valid_submission and sample_report.score == round(
        accuracy_score(answers["label"], pd.read_csv(comp.sample_submission_path)["label"]), 5)


# ----------------------------------------------------------------------------- data preview
def test_data_preview_describes_the_image_folders(comp):
    text = preview_data(comp.public_dir)
    assert len(text) <= 8000
    assert "- train/ (1617 files" in text and "- test/ (180 files" in text
    assert "### Image folder train/: 1,617 images (.png ×1617)" in text
    assert "### Image folder test/: 180 images (.png ×180)" in text
    assert "Named by train.csv column `id`: train/<id>.png (1,617 of 1,617 rows have an image)." in text
    assert "Named by sample_submission.csv column `id`: test/<id>.png (180 of 180 rows have an image)." in text
    assert "sizes (W×H) 32×32 ×20; modes L ×20" in text
    assert "Pixel values: 0..255 (uint8)" in text and "scaled to [0, 1]: mean 0." in text
    assert "Target candidate(s) (from the sample submission): label" in text and "10 classes" in text
    assert text.count(TOTENSOR_WARNING) == 1
    assert "column `label`" not in text, "a constant label column names no image"


# ----------------------------------------------------------------------------- offline model
def test_offline_model_infers_the_image_layout(comp):
    bare = infer_dataset(_ctx_competition(comp))
    assert bare.is_image and not bare.is_text
    assert (bare.image_train_dir, bare.image_test_dir, bare.image_name) == ("train", "test", "{}.png")
    assert (bare.image_mode, bare.image_shape) == ("L", (32, 32))
    assert (bare.target_col, bare.task, bare.output, bare.test_file) == (
        "label", "classification", "label", "sample_submission.csv")
    assert data_gene.feature_sets(bare) == ("pixels", "pixels_stats")
    rich = infer_dataset(_ctx_competition(comp), {"pillow": "13.0.0", "scikit-image": "0.26.0"})
    assert data_gene.feature_sets(rich) == ("pixels", "pixels_hog", "pixels_stats")
    hog_gene = data_gene.render_data_gene(rich, "pixels_hog")
    assert "from PIL import Image" in hog_gene and "from skimage.feature import hog" in hog_gene
    # pillow is written even when the runtime does not list it (the debug chain reports it)
    assert "from PIL import Image" in data_gene.render_data_gene(bare, "pixels")
    assert "skimage" not in data_gene.render_data_gene(bare, "pixels_stats")


def _run_draft(comp, tmp_path: Path, python: str, packages: dict, family: str, feature_set: str) -> float:
    """Render one offline draft, run it with ``python`` in ``tmp_path`` (./input -> public dir);
    returns its validation accuracy after checking the submission grades as valid."""
    info = infer_dataset(_ctx_competition(comp), packages)
    spec = {"family": family, "feature_set": feature_set, "loss": None, "optimizer": None,
            "regularization": {"REG_STRENGTH": 1.0, "MAX_DEPTH": None, "MIN_SAMPLES_LEAF": 20},
            "init": None, "tricks": {}}
    code = programs.render_program_from_spec(info, spec, "Solution for sklearn-digits-images")
    (tmp_path / "solution.py").write_text(code)
    os.symlink(comp.public_dir, tmp_path / "input")
    proc = subprocess.run([python, "solution.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "train (1617, " in proc.stdout and "test (180, " in proc.stdout
    report = grade_submission(tmp_path / "submission" / "submission.csv", comp)
    assert report.valid_submission and report.score > 0.9, report.error
    return float(proc.stdout.split("Validation metric:")[1].split()[0])


def test_offline_image_program_runs_in_the_project_interpreter(comp, tmp_path):
    """KNeighbors on pixels + intensity profiles: pillow (a project dependency) and scikit-learn."""
    assert _run_draft(comp, tmp_path, sys.executable, {"pillow": "13.0.0"}, "knn", "pixels_stats") > 0.9


def test_offline_image_program_with_hog_in_the_program_environment(comp, tmp_path, programs_python):
    """SGD on pixels + HOG (scikit-image) in the program environment."""
    packages = {"pillow": "13.0.0", "scikit-image": "0.26.0"}
    assert _run_draft(comp, tmp_path, programs_python, packages, "sgd", "pixels_hog") > 0.95


# ----------------------------------------------------------------------------- end to end
def _check_run(run_dir: Path, comp) -> dict:
    grade = json.loads((run_dir / "grade_report.json").read_text())
    assert grade["valid_submission"] is True and grade["competition_id"] == CID
    assert grade["score"] >= 0.9, grade
    submission = pd.read_csv(run_dir / "submission" / "submission.csv")
    assert list(submission.columns) == ["id", "label"] and len(submission) == 180
    assert set(submission["id"]) == set(pd.read_csv(comp.sample_submission_path)["id"])
    best = (run_dir / "best_solution.py").read_text()
    assert "from PIL import Image" in best and "load_images(" in best
    prompt = next((run_dir / "nodes").glob("*/prompt-draft.md")).read_text()
    assert "Image folder train/" in prompt and "Named by train.csv column `id`" in prompt
    return grade


def test_run_end_to_end_local(prefect_server, prepared, comp, tmp_path, capsys):
    """swarm-evo run on the image competition as on a fresh machine: programs run in the
    interpreter given by --python, here the project's own (pillow and scikit-learn only, so the
    drafts are scikit-learn families on pixels and intensity profiles). Two drafts, one per worker,
    as in the Docker run below: what is checked is the image path end to end, not the search."""
    run_dir = tmp_path / "run"
    code = main(["run", "--competition-id", CID, "--data-dir", str(prepared), "--max-steps", "2",
                 "--parallel-workers", "2", "--seed", "0", "--run-dir", str(run_dir),
                 "--python", sys.executable])
    out = capsys.readouterr().out
    assert code == 0, out
    grade = _check_run(run_dir, comp)
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["runtime"]["packages"].get("pillow"), journal["info"]["runtime"]
    print(f"best accuracy (local): {grade['score']}")


def test_run_end_to_end_docker(prefect_server, docker_client, prepared, comp, tmp_path, capsys):
    """The same run in containers of the default sandbox image (which must have pillow)."""
    run_dir = tmp_path / "docker-run"
    # The image has the Kaggle stack: a LightGBM/XGBoost/CatBoost draft on one CPU per container
    # takes 30-100 s here, so two drafts (one per worker); the time limit ends the run (and cuts
    # such programs) with the drafts that finished.
    code = main(["run", "--competition-id", CID, "--data-dir", str(prepared), "--executor", "docker",
                 "--max-steps", "2", "--parallel-workers", "2", "--seed", "0", "--time-limit", "300",
                 "--run-dir", str(run_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sandbox: docker" in out
    journal = json.loads((run_dir / "journal.json").read_text())
    assert journal["info"]["config"]["sandbox"]["backend"] == "docker"
    assert journal["info"]["runtime"]["packages"].get("pillow"), "the sandbox image lacks pillow"
    grade = _check_run(run_dir, comp)
    print(f"best accuracy (docker): {grade['score']}")
