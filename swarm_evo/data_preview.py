"""A bounded, prompt-ready preview of a competition's public data (SPEC §6, seed 003).

``preview_data(public_dir)`` gives the draft and merge prompts what a person would look at
first: the file listing, each CSV's shape, columns, dtypes, missing rates, numeric ranges and
a few rows, the likely target and its distribution, image folders (count, the CSV column naming
the files, sizes, modes, value range and the ToTensor warning: ``data_preview_images``),
text/TSV files (delimiter, columns, first lines), ``.npy`` arrays and ``.zip`` archives. ``description.md`` is excluded: the prompt carries it elsewhere.
The result never exceeds ``max_chars``.
"""

from __future__ import annotations

import csv
import os
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from swarm_evo.data_preview_images import IMAGE_EXTS, TOTENSOR_WARNING, describe_image_folder, image_dirs

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


def preview_data(public_dir: Path, max_chars: int = 8000) -> str:
    """Preview the public data of a competition for an LLM prompt (SPEC §6 "Data preview").

    Args:
        public_dir: the competition's public directory (``.../prepared/public``).
        max_chars: hard upper bound on the length of the returned text (default 8,000).

    Returns:
        Markdown-ish text, at most ``max_chars`` characters; when it had to be cut it ends
        with a ``[... preview truncated ...]`` note. Unreadable files are reported inline,
        never raised.

    Raises:
        FileNotFoundError: ``public_dir`` is not a directory.
    """
    public_dir = Path(public_dir)
    if not public_dir.is_dir():
        raise FileNotFoundError(f"public data directory not found: {public_dir}")
    files = _walk(public_dir)
    sections: list[str] = [_listing(public_dir, files)]

    table_paths = [p for p in files if p.name.lower().endswith(TABLE_SUFFIXES)]
    table_paths.sort(key=_table_order)
    tables: dict[Path, _Table] = {}
    for path in table_paths[:MAX_TABLES]:
        tables[path] = _Table.load(path)

    target = _target_section(public_dir, tables)
    if target:
        sections.append(target)
    described: list[tuple[Path, _Table]] = []
    for path, table in tables.items():
        sections.append(table.describe(public_dir, described))
        described.append((path, table))
    if len(table_paths) > MAX_TABLES:
        sections.append(f"({len(table_paths) - MAX_TABLES} more CSV files not previewed)")

    folders = image_dirs(public_dir, files)
    loaded = {p: t.df for p, t in tables.items() if t.df is not None}
    sections += [describe_image_folder(public_dir, d, loaded) for d in folders[:MAX_IMAGE_DIRS]]
    if folders:
        sections.append(TOTENSOR_WARNING)

    texts = [p for p in files if p.suffix.lower() in TEXT_EXTS]
    for path in texts[:MAX_TEXT_FILES]:
        sections.append(_describe_text(public_dir, path))
    for path in [p for p in files if p.suffix.lower() == ".npy"][:MAX_TEXT_FILES]:
        sections.append(_describe_npy(public_dir, path))
    for path in [p for p in files if p.suffix.lower() == ".zip" and not p.name.lower().endswith(".csv.zip")][:MAX_TEXT_FILES]:
        sections.append(_describe_zip(public_dir, path))

    return _assemble(sections, max_chars)


# --------------------------------------------------------------------------------------
# Assembly and small helpers
# --------------------------------------------------------------------------------------

_CUT_NOTE = "\n[... preview truncated to fit {n} characters ...]"


def _assemble(sections: list[str], max_chars: int) -> str:
    """Join sections within ``max_chars``: short sections are kept whole, the budget they leave
    is shared among the long ones (water-filling), which are cut with a note; then a final
    hard cut guarantees the bound."""
    sections = [s.strip() for s in sections if s and s.strip()]
    if not sections:
        return ""
    budget = max_chars - 2 * (len(sections) - 1)
    caps = [0] * len(sections)
    remaining = budget
    # The listing and the target (first two sections) come first, up to a quarter each.
    for i in range(min(2, len(sections))):
        caps[i] = min(len(sections[i]), max(0, budget // 4))
        remaining -= caps[i]
    rest = list(range(min(2, len(sections)), len(sections)))
    order = sorted(rest, key=lambda i: len(sections[i]))
    for k, i in enumerate(order):
        caps[i] = max(0, min(len(sections[i]), remaining // (len(order) - k)))
        remaining -= caps[i]
    out = []
    for sec, cap in zip(sections, caps):
        if len(sec) > cap:
            note = "\n[... section truncated ...]"
            sec = (sec[: max(0, cap - len(note))].rstrip() + note) if cap > len(note) + 20 else ""
        if sec:
            out.append(sec)
    text = "\n\n".join(out)
    if len(text) > max_chars:
        note = _CUT_NOTE.format(n=max_chars)
        if max_chars <= len(note):
            return text[:max_chars]
        text = text[: max_chars - len(note)] + note
    return text


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _cell(value: object, width: int = CELL_CHARS) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", "\\n").replace("\r", "")
    return text if len(text) <= width else text[: width - 3] + "..."


def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "nan"
    x = float(x)
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


def _pct(x: float) -> str:
    return "<1%" if 0 < x < 0.01 else f"{x:.0%}"


def _walk(root: Path) -> list[Path]:
    """All files under ``root`` (symlinks followed, depth ≤ 4), ``description.md`` excluded."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames.sort()
        if depth >= 4:
            dirnames[:] = []
        for name in sorted(filenames):
            if depth == 0 and name in EXCLUDED_FILES:
                continue
            if name.startswith("."):
                continue
            found.append(Path(dirpath) / name)
            if len(found) >= MAX_WALK_FILES:
                return found
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _listing(root: Path, files: list[Path]) -> str:
    """Top-level files with sizes; folders summarised (file count, size, extensions)."""
    lines = [f"## Files in ./input ({len(files)} files, {_human(sum(_size(p) for p in files))})"]
    top_files = [p for p in files if p.parent == root]
    by_dir: dict[str, list[Path]] = {}
    for p in files:
        if p.parent != root:
            by_dir.setdefault(_rel(root, p).split("/", 1)[0], []).append(p)
    for p in top_files[:40]:
        lines.append(f"- {p.name} ({_human(_size(p))})")
    if len(top_files) > 40:
        lines.append(f"- ... {len(top_files) - 40} more files")
    for name, members in sorted(by_dir.items())[:20]:
        exts = Counter(m.suffix.lower() or "(none)" for m in members)
        ext_text = ", ".join(f"{e} ×{c}" for e, c in exts.most_common(4))
        lines.append(f"- {name}/ ({len(members)} files, {_human(sum(_size(m) for m in members))}; {ext_text})")
        if len(members) <= 5:
            for m in members:
                lines.append(f"  - {_rel(root, m)} ({_human(_size(m))})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


def _table_order(path: Path) -> tuple[int, str]:
    name = path.name.lower()
    rank = 0 if "train" in name else 1 if "test" in name else 2 if "sample" in name else 3
    return rank, path.as_posix()


def _count_rows(path: Path) -> int | None:
    """Approximate data rows of a plain CSV by counting newlines (header excluded)."""
    if not path.name.lower().endswith(".csv"):
        return None
    n = 0
    last = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    if last and last != b"\n":
        n += 1
    return max(0, n - 1)


class _Table:
    """A loaded (or sampled) CSV and how to describe it."""

    def __init__(self, path: Path, df: pd.DataFrame | None, rows: int | None, sampled: bool, error: str | None):
        self.path, self.df, self.rows, self.sampled, self.error = path, df, rows, sampled, error

    @classmethod
    def load(cls, path: Path) -> "_Table":
        try:
            size = _size(path)
            if size <= FULL_READ_BYTES:
                df = pd.read_csv(path, low_memory=False)
                return cls(path, df, len(df), False, None)
            df = pd.read_csv(path, nrows=SAMPLE_ROWS, low_memory=False)
            return cls(path, df, _count_rows(path), True, None)
        except Exception as exc:  # noqa: BLE001 - reported in the preview
            return cls(path, None, None, False, f"{type(exc).__name__}: {str(exc)[:200]}")

    def describe(self, root: Path, earlier: list[tuple[Path, "_Table"]]) -> str:
        name = _rel(root, self.path)
        if self.df is None:
            return f"### {name}\ncould not be read: {self.error}"
        df = self.df
        rows = f"{self.rows:,}" if self.rows is not None else "?"
        note = f" (statistics from the first {len(df):,} rows)" if self.sampled else ""
        lines = [f"### {name}: {rows} rows × {df.shape[1]} columns{note}"]
        same = None
        for other_path, other in earlier:
            if other.df is not None and df.shape[1] >= 3 and set(df.columns) <= set(other.df.columns):
                same = (other_path, other)
                break
        if same is not None:
            other_path, other = same
            dropped = [c for c in other.df.columns if c not in df.columns]
            extra = f" without {', '.join(map(str, dropped[:10]))}" if dropped else ""
            lines.append(f"Columns: same as {_rel(root, other_path)}{extra}.")
            miss = df.isna().mean()
            miss = miss[miss > 0].sort_values(ascending=False)
            if len(miss):
                lines.append("Missing: " + ", ".join(f"{c} {v:.1%}" for c, v in miss.head(15).items()))
        elif df.shape[1] > WIDE_TABLE:
            lines.extend(self._columns_compact(df))
        else:
            lines.extend(self._columns_detailed(df))
        lines.append(self._rows(df))
        return "\n".join(lines)

    @staticmethod
    def _column_summary(s: pd.Series) -> str:
        parts: list[str] = []
        miss = s.isna().mean()
        if pd.api.types.is_bool_dtype(s):
            vc = s.value_counts(normalize=True)
            parts.append(", ".join(f"{k}: {v:.1%}" for k, v in vc.items()))
        elif pd.api.types.is_numeric_dtype(s):
            nn = s.dropna()
            if len(nn):
                parts.append(f"range [{_num(nn.min())}, {_num(nn.max())}], mean {_num(nn.mean())}")
            parts.append(f"{s.nunique()} unique")
        else:
            nun = s.nunique()
            nn = s.dropna().astype(str)
            avg = nn.str.len().mean() if len(nn) else 0
            if avg > 50:
                parts.append(f"free text, mean length {avg:.0f} chars, {nun} unique")
            else:
                top = s.value_counts().head(4)
                ex = ", ".join(f"{_cell(k, 20)!s}" for k in top.index)
                parts.append(f"{nun} unique, e.g. {ex}")
        if miss > 0:
            parts.append(f"missing {miss:.1%}")
        return "; ".join(parts)

    def _columns_detailed(self, df: pd.DataFrame) -> list[str]:
        out = ["Columns:"]
        for c in df.columns:
            out.append(f"- {c} ({df[c].dtype}): {self._column_summary(df[c])}")
        return out

    @staticmethod
    def _columns_compact(df: pd.DataFrame) -> list[str]:
        num = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
        other = [c for c in df.columns if c not in num]
        miss = df.isna().mean()
        out = []
        items = []
        for c in num:
            nn = df[c].dropna()
            rng = f"[{_num(nn.min())}, {_num(nn.max())}]" if len(nn) else "[empty]"
            m = f" {_pct(miss[c])} missing" if miss[c] > 0 else ""
            items.append(f"{c} {rng}{m}")
        out.append(f"Numeric columns ({len(num)}): " + "; ".join(items))
        items = []
        for c in other:
            m = f", {_pct(miss[c])} missing" if miss[c] > 0 else ""
            items.append(f"{c} ({df[c].nunique()} uniq{m})")
        if other:
            out.append(f"Other columns ({len(other)}, object/bool/categorical): " + "; ".join(items))
        return out

    @staticmethod
    def _rows(df: pd.DataFrame, n: int = 3, max_cols: int = 15) -> str:
        cols = list(df.columns[:max_cols])
        more = f" (+{df.shape[1] - max_cols} more columns)" if df.shape[1] > max_cols else ""
        lines = [f"First rows{more}:", ",".join(_cell(c, 25) for c in cols)]
        for row in df[cols].head(n).astype(object).itertuples(index=False):
            lines.append(",".join(_cell(v) for v in row))
        return "\n".join(lines)


def _distribution(s: pd.Series) -> str:
    s = s.dropna()
    if len(s) == 0:
        return "all values missing"
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and s.nunique() > 20:
        q = s.quantile([0, 0.25, 0.5, 0.75, 1.0]).tolist()
        skew = float(s.skew()) if len(s) > 2 else 0.0
        text = (
            f"numeric: min {_num(q[0])}, p25 {_num(q[1])}, median {_num(q[2])}, p75 {_num(q[3])}, "
            f"max {_num(q[4])}; mean {_num(s.mean())}, std {_num(s.std())}, skew {skew:.2f}"
        )
        if skew > 1 and q[0] >= 0:
            text += " (right-skewed, non-negative: a log1p transform may help)"
        return text
    vc = s.value_counts()
    shown = ", ".join(f"{_cell(k, 25)}: {v} ({v / len(s):.1%})" for k, v in vc.head(10).items())
    more = f", ... {len(vc) - 10} more classes" if len(vc) > 10 else ""
    return f"{len(vc)} classes: {shown}{more}"


def _target_section(root: Path, tables: dict[Path, _Table]) -> str:
    """Likely target columns (in train, not in test) and their distribution."""
    loaded = {p: t for p, t in tables.items() if t.df is not None}
    train = next((p for p in loaded if "train" in p.name.lower()), None)
    test = next((p for p in loaded if "test" in p.name.lower()), None)
    sample = next((p for p in loaded if "sample" in p.name.lower() or "submission" in p.name.lower()), None)
    lines = ["## Likely target"]
    if sample is not None:
        cols = list(loaded[sample].df.columns)
        shown = ", ".join(map(str, cols[:20])) + (f", ... ({len(cols)} columns)" if len(cols) > 20 else "")
        lines.append(f"Submission format ({_rel(root, sample)}): columns {shown}; {loaded[sample].rows:,} rows.")
    if train is None:
        return "\n".join(lines) if len(lines) > 1 else ""
    tdf = loaded[train].df
    targets: list[str] = []
    if test is not None:
        targets = [c for c in tdf.columns if c not in set(loaded[test].df.columns)]
    if not targets and sample is not None:
        scols = list(loaded[sample].df.columns)
        targets = [c for c in scols[1:] if c in tdf.columns]
        if not targets:  # e.g. one probability column per class: find the label column
            wanted = {str(c) for c in scols[1:]}
            for c in tdf.columns:
                if tdf[c].dtype == object and tdf[c].nunique() <= 200 and wanted <= set(tdf[c].dropna().astype(str).unique()):
                    targets = [c]
                    lines.append(f"The submission has one column per class of `{c}` (predict class probabilities).")
                    break
    if not targets:
        last = tdf.columns[-1]
        lines.append(
            f"No test file or sample submission to compare with {_rel(root, train)}; guess: the "
            f"last column `{last}` (check the description)."
        )
        lines.append(f"- {last} ({tdf[last].dtype}): {_distribution(tdf[last])}")
        return "\n".join(lines)
    where = f"columns of {_rel(root, train)} that are not in {_rel(root, test)}" if test is not None else "from the sample submission"
    lines.append(f"Target candidate(s) ({where}): {', '.join(map(str, targets[:10]))}")
    for c in targets[:5]:
        lines.append(f"- {c} ({tdf[c].dtype}): {_distribution(tdf[c])}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Text, npy, zip
# --------------------------------------------------------------------------------------


def _guess_delimiter(lines: list[str]) -> str | None:
    """A delimiter that splits the first lines into the same number (≥ 2) of fields, or None."""
    sample = [l for l in lines if l.strip()][:20]
    if len(sample) < 2:
        return None
    try:
        d = csv.Sniffer().sniff("\n".join(sample), delimiters=",\t;|").delimiter
        candidates = [d] + [c for c in "\t,;|" if c != d]
    except csv.Error:
        candidates = list("\t,;|")
    for d in candidates:
        counts = {len(next(csv.reader([l], delimiter=d))) for l in sample}
        if len(counts) == 1 and counts.pop() >= 2:
            return d
    return None


def _describe_text(root: Path, path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(64 * 1024)
    except OSError as exc:
        return f"### {_rel(root, path)}\ncould not be read: {exc}"
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()[:-1] if len(raw) == 64 * 1024 else text.splitlines()
    n_lines = None
    if _size(path) <= FULL_READ_BYTES:
        with open(path, "rb") as fh:
            n_lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 22), b""))
    head = f"### {_rel(root, path)} ({_human(_size(path))}" + (f", {n_lines:,} lines)" if n_lines is not None else ")")
    out = [head]
    delim = _guess_delimiter(lines)
    if delim is not None:
        shown = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}[delim]
        cols = next(csv.reader([lines[0]], delimiter=delim))
        out.append(f"Delimited text, delimiter: {shown}; {len(cols)} fields; first line (header?): "
                   + ", ".join(_cell(c, 25) for c in cols[:20]))
    else:
        out.append("Free text (no consistent delimiter).")
    out.append("First lines:")
    out.extend(_cell(l, 160) for l in [l for l in lines if l.strip()][:6])
    return "\n".join(out)


def _describe_npy(root: Path, path: Path) -> str:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        text = f"shape {arr.shape}, dtype {arr.dtype}"
        if arr.size and arr.size <= 10_000_000 and np.issubdtype(arr.dtype, np.number):
            text += f", values {_num(arr.min())}..{_num(arr.max())}"
    except Exception as exc:  # noqa: BLE001
        text = f"could not be read: {type(exc).__name__}: {exc}"
    return f"### {_rel(root, path)}: {text}"


def _describe_zip(root: Path, path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/")]
    except Exception as exc:  # noqa: BLE001
        return f"### {_rel(root, path)}: could not be read: {exc}"
    exts = Counter(Path(n).suffix.lower() or "(none)" for n in names)
    return (
        f"### {_rel(root, path)}: zip archive with {len(names):,} files "
        f"({', '.join(f'{e} ×{c}' for e, c in exts.most_common(5))}); first: {', '.join(names[:3])}"
        + ("\n" + TOTENSOR_WARNING if any(e in IMAGE_EXTS for e in exts) else "")
    )
