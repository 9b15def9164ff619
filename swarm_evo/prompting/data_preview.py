"""A bounded, prompt-ready preview of a competition's public data (SPEC §6, seed 003).

``preview_data(public_dir)`` gives the draft and merge prompts what a person would look at
first: the file listing, each CSV's shape, columns, dtypes, missing rates, numeric ranges and
a few rows, the likely target and its distribution, image folders (count, the CSV column naming
the files, sizes, modes, value range and the ToTensor warning: ``data_preview_images``; tables:
``data_preview_tables``),
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

from swarm_evo.prompting.data_preview_format import (
    EXCLUDED_FILES,
    FULL_READ_BYTES,
    MAX_IMAGE_DIRS,
    MAX_TABLES,
    MAX_TEXT_FILES,
    MAX_WALK_FILES,
    TABLE_SUFFIXES,
    TEXT_EXTS,
    file_size,
    fmt_cell,
    fmt_num,
    human_size,
    rel_path,
)
from swarm_evo.prompting.data_preview_images import IMAGE_EXTS, TOTENSOR_WARNING, describe_image_folder, image_dirs
from swarm_evo.prompting.data_preview_tables import Table, table_order, target_section


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
    table_paths.sort(key=table_order)
    tables: dict[Path, Table] = {}
    for path in table_paths[:MAX_TABLES]:
        tables[path] = Table.load(path)

    target = target_section(public_dir, tables)
    if target:
        sections.append(target)
    described: list[tuple[Path, Table]] = []
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


def _listing(root: Path, files: list[Path]) -> str:
    """Top-level files with sizes; folders summarised (file count, size, extensions)."""
    lines = [f"## Files in ./input ({len(files)} files, {human_size(sum(file_size(p) for p in files))})"]
    top_files = [p for p in files if p.parent == root]
    by_dir: dict[str, list[Path]] = {}
    for p in files:
        if p.parent != root:
            by_dir.setdefault(rel_path(root, p).split("/", 1)[0], []).append(p)
    for p in top_files[:40]:
        lines.append(f"- {p.name} ({human_size(file_size(p))})")
    if len(top_files) > 40:
        lines.append(f"- ... {len(top_files) - 40} more files")
    for name, members in sorted(by_dir.items())[:20]:
        exts = Counter(m.suffix.lower() or "(none)" for m in members)
        ext_text = ", ".join(f"{e} ×{c}" for e, c in exts.most_common(4))
        lines.append(f"- {name}/ ({len(members)} files, {human_size(sum(file_size(m) for m in members))}; {ext_text})")
        if len(members) <= 5:
            for m in members:
                lines.append(f"  - {rel_path(root, m)} ({human_size(file_size(m))})")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------


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
        return f"### {rel_path(root, path)}\ncould not be read: {exc}"
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()[:-1] if len(raw) == 64 * 1024 else text.splitlines()
    n_lines = None
    if file_size(path) <= FULL_READ_BYTES:
        with open(path, "rb") as fh:
            n_lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 22), b""))
    head = f"### {rel_path(root, path)} ({human_size(file_size(path))}" + (f", {n_lines:,} lines)" if n_lines is not None else ")")
    out = [head]
    delim = _guess_delimiter(lines)
    if delim is not None:
        shown = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}[delim]
        cols = next(csv.reader([lines[0]], delimiter=delim))
        out.append(f"Delimited text, delimiter: {shown}; {len(cols)} fields; first line (header?): "
                   + ", ".join(fmt_cell(c, 25) for c in cols[:20]))
    else:
        out.append("Free text (no consistent delimiter).")
    out.append("First lines:")
    out.extend(fmt_cell(l, 160) for l in [l for l in lines if l.strip()][:6])
    return "\n".join(out)


def _describe_npy(root: Path, path: Path) -> str:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        text = f"shape {arr.shape}, dtype {arr.dtype}"
        if arr.size and arr.size <= 10_000_000 and np.issubdtype(arr.dtype, np.number):
            text += f", values {fmt_num(arr.min())}..{fmt_num(arr.max())}"
    except Exception as exc:  # noqa: BLE001
        text = f"could not be read: {type(exc).__name__}: {exc}"
    return f"### {rel_path(root, path)}: {text}"


def _describe_zip(root: Path, path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if not n.endswith("/")]
    except Exception as exc:  # noqa: BLE001
        return f"### {rel_path(root, path)}: could not be read: {exc}"
    exts = Counter(Path(n).suffix.lower() or "(none)" for n in names)
    return (
        f"### {rel_path(root, path)}: zip archive with {len(names):,} files "
        f"({', '.join(f'{e} ×{c}' for e, c in exts.most_common(5))}); first: {', '.join(names[:3])}"
        + ("\n" + TOTENSOR_WARNING if any(e in IMAGE_EXTS for e in exts) else "")
    )
