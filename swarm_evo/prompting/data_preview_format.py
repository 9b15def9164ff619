"""The data preview's limits and number formatting, shared by :mod:`swarm_evo.prompting.data_preview` and
:mod:`swarm_evo.prompting.data_preview_tables`."""

from __future__ import annotations

from pathlib import Path

import numpy as np


EXCLUDED_FILES = {"description.md"}
TABLE_SUFFIXES = (".csv", ".csv.gz", ".csv.zip")
TEXT_EXTS = {".txt", ".tsv"}
FULL_READ_BYTES = 50_000_000
"""CSVs up to this size are read whole; larger ones are sampled (``SAMPLE_ROWS``)."""
SAMPLE_ROWS = 20_000
MAX_TABLES = 8
MAX_TEXT_FILES = 5
MAX_IMAGE_DIRS = 4
CELL_CHARS = 40
WIDE_TABLE = 25
MAX_WALK_FILES = 200_000


def human_size(n: float) -> str:
    """A byte count for people: ``512 B``, ``1.5 MB``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def rel_path(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` (POSIX), or as given when it lies outside."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def fmt_cell(value: object, width: int = CELL_CHARS) -> str:
    """A table cell on one line, cut to ``width`` characters."""
    text = "" if value is None else str(value)
    text = text.replace("\n", "\\n").replace("\r", "")
    return text if len(text) <= width else text[: width - 3] + "..."


def fmt_num(x: float) -> str:
    """A number in 4 significant digits (integers whole; ``nan`` for missing)."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "nan"
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


def fmt_pct(x: float) -> str:
    """A share as a whole percentage (``<1%`` for small non-zero shares)."""
    return "<1%" if 0 < x < 0.01 else f"{x:.0%}"


def file_size(path: Path) -> int:
    """Size of a file in bytes, 0 when it cannot be read."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
