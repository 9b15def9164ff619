"""Tests for the data preview (SPEC §6 "Data preview", seed 003)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA as DATA

import swarm_evo.prompting.data_preview_tables as dp_tables
from swarm_evo.prompting.data_preview import preview_data
from swarm_evo.prompting.data_preview_images import TOTENSOR_WARNING


def write_png(path: Path, arr: np.ndarray) -> None:
    """A minimal PNG writer (8-bit gray or RGB), so the test needs no PIL."""
    h, w = arr.shape[:2]
    ctype = 2 if arr.ndim == 3 else 0
    raw = b"".join(b"\x00" + arr[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_house_prices_real():
    text = preview_data(DATA / "house-prices" / "raw")
    assert len(text) <= 8000
    for name in ("train.csv", "test.csv", "sample_submission.csv", "data_description.txt"):
        assert name in text
    assert "1,460 rows × 81 columns" in text
    assert "Target candidate(s)" in text and "SalePrice" in text and "skew" in text
    assert "LotFrontage" in text and "missing" in text
    assert "same as train.csv without SalePrice" in text
    assert "First rows" in text


def test_spaceship_and_spooky_real():
    text = preview_data(DATA / "spaceship-titanic" / "raw")
    assert "8,693 rows × 14 columns" in text and "Transported" in text and "50.4%" in text
    assert "HomePlanet (object)" in text and "Age (float64)" in text
    assert "description.md" not in text
    text = preview_data(DATA / "spooky-author-identification" / "raw")
    assert "free text" in text and "author" in text
    # long text cells are cut in the sample rows
    assert all(len(line) < 400 for line in text.splitlines())


@pytest.mark.parametrize("limit", [300, 1000, 3000])
def test_bounded_real(limit):
    text = preview_data(DATA / "house-prices" / "raw", max_chars=limit)
    assert len(text) <= limit
    assert text.startswith("## Files")


def test_classification_target_from_sample_submission(tmp_path):
    pd.DataFrame({"id": ["a", "b", "c", "d"], "text": ["x " * 60] * 4, "author": ["EAP", "HPL", "MWS", "EAP"]}).to_csv(
        tmp_path / "train.csv", index=False
    )
    pd.DataFrame({"id": ["e"], "EAP": [0.4], "HPL": [0.3], "MWS": [0.3]}).to_csv(tmp_path / "sample_submission.csv", index=False)
    (tmp_path / "description.md").write_text("SECRET DESCRIPTION")
    text = preview_data(tmp_path)
    assert "SECRET DESCRIPTION" not in text and "description.md" not in text
    assert "one column per class of `author`" in text
    assert "EAP: 2 (50.0%)" in text


def test_large_csv_is_sampled(tmp_path, monkeypatch):
    monkeypatch.setattr(dp_tables, "FULL_READ_BYTES", 1000)
    monkeypatch.setattr(dp_tables, "SAMPLE_ROWS", 50)
    pd.DataFrame({"id": range(500), "y": np.arange(500) % 3}).to_csv(tmp_path / "train.csv", index=False)
    text = preview_data(tmp_path)
    assert "500 rows × 2 columns (statistics from the first 50 rows)" in text


def test_image_folder_and_other_files(tmp_path):
    img_dir = tmp_path / "train"
    img_dir.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        write_png(img_dir / f"img{i}.png", rng.integers(0, 256, (32, 48, 3)))
    write_png(img_dir / "gray.png", rng.integers(0, 256, (16, 16)))
    (tmp_path / "labels.tsv").write_text("image\tlabel\nimg0.png\tcat\nimg1.png\tdog\nimg2.png\tcat\n")
    (tmp_path / "notes.txt").write_text("Some free text about the data.\nSecond line here.\n")
    np.save(tmp_path / "features.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    with zipfile.ZipFile(tmp_path / "test.zip", "w") as zf:
        zf.writestr("test/a.jpg", b"x")
        zf.writestr("test/b.jpg", b"x")
    text = preview_data(tmp_path)
    assert len(text) <= 8000
    assert "Image folder train/: 4 images" in text
    assert "48×32 ×3" in text and "16×16 ×1" in text
    assert "RGB" in text and "L ×1" in text
    assert TOTENSOR_WARNING in text
    assert "delimiter: tab" in text and "image, label" in text
    assert "Free text" in text and "Some free text" in text
    assert "features.npy: shape (3, 4), dtype float32, values 0..11" in text
    assert "zip archive with 2 files" in text


def test_many_images_counts_fast(tmp_path):
    d = tmp_path / "images"
    d.mkdir()
    arr = np.zeros((8, 8), dtype=np.uint8)
    for i in range(300):
        write_png(d / f"{i:04d}.png", arr)
    text = preview_data(tmp_path, max_chars=2000)
    assert "300 images" in text and len(text) <= 2000


def test_tiny_budget_and_missing_dir(tmp_path):
    pd.DataFrame({"a": range(10)}).to_csv(tmp_path / "train.csv", index=False)
    assert len(preview_data(tmp_path, max_chars=10)) <= 10
    assert len(preview_data(tmp_path, max_chars=120)) <= 120
    with pytest.raises(FileNotFoundError):
        preview_data(tmp_path / "nope")


def test_unreadable_csv_reported(tmp_path):
    (tmp_path / "train.csv").write_bytes(b"")
    text = preview_data(tmp_path)
    assert "could not be read" in text
