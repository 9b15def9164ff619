"""Image folders in the data preview (:mod:`swarm_evo.prompting.data_preview`).

For each folder whose files are mostly images: how many and of which types, the sizes (W×H)
and modes of up to ``IMAGE_SAMPLE`` evenly spaced files, the stored pixel range and, for the
first ``STATS_IMAGES`` of them, the mean and standard deviation of the pixels scaled to [0, 1]
(÷ the dtype's maximum, 255 for 8-bit); and which CSV column names the folder's files (e.g.
``train.csv`` column ``id`` → ``train/<id>.png``), with how many rows have a file. Pillow is
optional: without it sizes, modes and bit depths come from PNG/JPEG headers.
"""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

try:  # optional: richer image statistics
    from PIL import Image  # type: ignore[import-not-found]
except Exception:  # pragma: no cover - depends on the environment
    Image = None

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}
IMAGE_SAMPLE = 20
"""Images opened per folder for sizes and modes."""
STATS_IMAGES = 5
"""Images (of the sample) whose pixels give the value range, mean and std."""
LINK_COLUMNS = 5
"""Leading columns of each table tried as image names."""
LINK_ROWS = 5000
"""Rows of a table compared with a folder's file names."""
TOTENSOR_WARNING = (
    "Note: torchvision `ToTensor()` already scales uint8 images to [0, 1]; do not divide by 255 again."
)


def image_dirs(root: Path, files: list[Path]) -> list[Path]:
    """Folders whose files are mostly images, largest first."""
    per_dir: dict[Path, list[int]] = {}
    for p in files:
        counts = per_dir.setdefault(p.parent, [0, 0])
        counts[0] += 1
        counts[1] += p.suffix.lower() in IMAGE_EXTS
    dirs = [d for d, (total, imgs) in per_dir.items() if imgs and imgs >= total / 2]
    return sorted(dirs, key=lambda d: -per_dir[d][1])


_PNG_MODES = {0: "L", 2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}


def image_header(path: Path) -> tuple[tuple[int, int], str, int] | None:
    """``((width, height), mode, bits per channel)`` from a PNG or JPEG header, without PIL."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64 * 1024)
    except OSError:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", head[16:26])
        return (w, h), _PNG_MODES.get(ctype, f"type{ctype}"), depth
    if head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            seg_len = struct.unpack(">H", head[i + 2 : i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                bits, h, w, comps = struct.unpack(">BHHB", head[i + 4 : i + 10])
                return (w, h), {1: "L", 3: "RGB", 4: "CMYK"}.get(comps, f"{comps}ch"), bits
            i += 2 + seg_len
    return None


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _label(value: object) -> str:
    """A table cell as a file name would spell it (integral floats without ``.0``)."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def image_links(root: Path, folder: Path, images: list[Path], tables: dict[Path, pd.DataFrame]) -> list[str]:
    """Lines naming the table columns whose values are the file names of ``folder``'s images.

    A column links when its first ``LINK_ROWS`` values are mostly distinct and at least half of
    them are an image's stem
    (``<value><ext>``, e.g. ``id`` 5 → ``5.png``), its name (``<value>``) or its path relative to
    ``root`` or to the table's folder (``train/5.png``). One line per linking column, e.g.
    ``Named by train.csv column `id`: train/<id>.png (1,617 of 1,617 rows have an image).``
    """
    if not images:
        return []
    stems = {p.stem for p in images}
    names = {p.name for p in images}
    rels = {_rel(root, p) for p in images}
    exts = Counter(p.suffix for p in images)
    ext = exts.most_common(1)[0][0]
    prefix = _rel(root, folder) + "/" if folder != root else ""
    lines = []
    for path, df in tables.items():
        for col in list(df.columns)[:LINK_COLUMNS]:
            values = df[col].dropna().head(LINK_ROWS).map(_label)
            if values.empty or values.nunique() * 2 < len(values):  # names are (mostly) distinct
                continue
            patterns = [
                (values.isin(stems), f"{prefix}<{col}>{ext}"),
                (values.isin(names), f"{prefix}<{col}>"),
                (values.isin(rels), f"<{col}> (a path under ./input)"),
            ]
            hits, pattern = max(patterns, key=lambda item: int(item[0].sum()))
            if hits.sum() * 2 < len(values):
                continue
            shown = f"{int(hits.sum()):,} of {len(values):,}"
            more = f" (first {LINK_ROWS:,} rows checked)" if len(df) > LINK_ROWS else ""
            lines.append(f"Named by {_rel(root, path)} column `{col}`: {pattern} ({shown} rows have an image{more}).")
            break
    return lines


def describe_image_folder(root: Path, folder: Path, tables: dict[Path, pd.DataFrame] | None = None) -> str:
    """One preview section for an image folder: count, linking columns, sizes, modes, pixels.

    Args:
        root: the public directory (paths are shown relative to it).
        folder: a folder of ``image_dirs``.
        tables: the preview's loaded CSVs (path → frame), searched for the column naming the
            images (:func:`image_links`).
    """
    imgs = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTS)
    name = _rel(root, folder) + "/" if folder != root else "./ (top level)"
    exts = Counter(p.suffix.lower() for p in imgs)
    lines = [f"### Image folder {name}: {len(imgs):,} images ({', '.join(f'{e} ×{c}' for e, c in exts.most_common())})"]
    lines += image_links(root, folder, imgs, tables or {})
    step = max(1, len(imgs) // IMAGE_SAMPLE)
    sample = imgs[::step][:IMAGE_SAMPLE]
    sizes: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    lo, hi, dtypes, scaled = None, None, set(), []
    for i, p in enumerate(sample):
        if Image is not None:
            try:
                with Image.open(p) as im:
                    sizes[f"{im.size[0]}×{im.size[1]}"] += 1
                    modes[im.mode] += 1
                    if i < STATS_IMAGES:
                        arr = np.asarray(im)
                        dtypes.add(str(arr.dtype))
                        lo = arr.min() if lo is None else min(lo, arr.min())
                        hi = arr.max() if hi is None else max(hi, arr.max())
                        if np.issubdtype(arr.dtype, np.integer):
                            scaled.append(arr.astype(float).ravel() / np.iinfo(arr.dtype).max)
                continue
            except Exception:  # noqa: BLE001 - fall back to the header
                pass
        info = image_header(p)
        if info is not None:
            (w, h), mode, bits = info
            sizes[f"{w}×{h}"] += 1
            modes[mode] += 1
            dtypes.add(f"{bits}-bit")
    if sizes:
        lines.append(
            f"Sampled {sum(sizes.values())}: sizes (W×H) "
            + ", ".join(f"{s} ×{c}" for s, c in sizes.most_common(5))
            + ("" if len(sizes) <= 5 else f", ... {len(sizes)} distinct sizes")
            + "; modes " + ", ".join(f"{m} ×{c}" for m, c in modes.most_common())
        )
    if lo is not None:
        text = f"Pixel values: {int(lo)}..{int(hi)} ({', '.join(sorted(dtypes))}) as stored on disk"
        if scaled:
            pixels = np.concatenate(scaled)
            text += f"; scaled to [0, 1]: mean {pixels.mean():.3f}, std {pixels.std():.3f} ({len(scaled)} images)"
        lines.append(text + ".")
    elif dtypes:
        lines.append(f"Bit depth: {', '.join(sorted(dtypes))} per channel (8-bit means values 0..255 on disk).")
    lines.append(f"First files: {', '.join(p.name for p in imgs[:3])}")
    return "\n".join(lines)
