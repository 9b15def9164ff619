"""Other copies of the labels in a competition's public folder (issue 53, item 5).

A hidden split is only hidden when no other public file holds the training rows' answers: a
nested ``extra/meta.csv``, a ``train.json``, ``train.tsv`` or ``train.csv.gz`` holding ids and
labels would be linked into the programs' input unchanged, hidden rows included.
:func:`holds_id_table` reads the head of any file (decompressed, or each member of an archive)
and says whether it is a table with the id column; the layout check
(:func:`swarm_evo.competition.hidden_layout.hidden_layout`) refuses the split when one is.
"""

from __future__ import annotations

import io
import re
from pathlib import Path


HEAD_BYTES = 64 * 1024
"""How much of a file (decompressed) :func:`holds_id_table` reads: a table's header, a record's keys."""
DELIMITERS = (",", "\t", ";", "|")
_COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz", b"(\xb5/\xfd": "zstd"}
_MEDIA_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"RIFF", b"II*\x00", b"MM\x00*", b"BM", b"ID3", b"fLaC",
                b"OggS", b"\x93NUMPY")
"""Images, audio, arrays: never a table of rows."""
_BINARY_TABLES = (b"PAR1", b"ARROW1", b"\x89HDF", b"SQLite format 3", b"FEA1")
"""Parquet, Arrow/Feather, HDF5, SQLite, Feather v1: their column names are stored as plain bytes."""


def _decompressed_head(raw, limit: int = HEAD_BYTES) -> bytes:
    """The first ``limit`` bytes of a binary stream, decompressed when its magic says gzip, bz2,
    xz or zstd (up to three layers); what cannot be decompressed is returned as read."""
    import bz2
    import lzma
    import zlib

    head = raw.read(limit)
    for _ in range(3):
        kind = next((k for m, k in _COMPRESSED.items() if head.startswith(m)), None)
        try:
            if kind == "gzip":
                head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, limit)
            elif kind == "bz2":
                head = bz2.BZ2Decompressor().decompress(head, max_length=limit)
            elif kind == "xz":
                head = lzma.LZMADecompressor().decompress(head, max_length=limit)
            elif kind == "zstd":
                import zstandard

                head = zstandard.ZstdDecompressor().decompressobj().decompress(head)[:limit]
            else:
                return head
        except (ImportError, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
            return head
    return head


def _text_names_id(head: bytes, id_col: str) -> bool:
    """A delimited table whose header has ``id_col``, or JSON records with ``id_col`` as a key."""
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if re.search(r'"%s"\s*:' % re.escape(id_col), text):  # JSON / JSON lines / column-oriented JSON
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    header = lines[0]
    for delimiter in DELIMITERS:
        fields = [f.strip().strip('"').strip("'").strip() for f in header.split(delimiter)]
        if len(fields) > 1 and id_col in fields:
            return True
    return header.strip().strip('"') == id_col and len(lines) > 1  # one column: the ids alone


def holds_id_table(path: Path, id_col: str) -> bool:
    """Whether the file at ``path`` holds a table with the column ``id_col``, whatever its name
    says: delimited text (``,`` tab ``;`` ``|``; the header's fields), JSON or JSON lines (a
    record key), Parquet/Arrow/HDF5/SQLite (the name among the file's bytes), each possibly
    compressed (gzip, bz2, xz, zstd) or packed in a zip or tar archive (every member is read).
    Images, audio and NumPy arrays are not tables. Reads at most :data:`HEAD_BYTES` of a member
    (issue 53, item 5: ``extra/meta.csv``, ``train.json``, ``train.tsv``, ``train.csv.gz``).

    Raises:
        OSError: the file cannot be read.
    """
    import tarfile
    import zipfile

    needle = id_col.encode("utf-8")
    with open(path, "rb") as fh:
        magic = fh.read(8)
        fh.seek(0)
        if magic.startswith(_MEDIA_MAGIC):
            return False
        if any(magic.startswith(m) for m in _BINARY_TABLES):
            data = fh.read()
            return needle in data
        if zipfile.is_zipfile(fh):
            with zipfile.ZipFile(fh) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        with archive.open(info) as member:
                            start = member.read(8)  # an image among thousands: its magic suffices
                            if start.startswith(_MEDIA_MAGIC):
                                continue
                            if _head_names_id(_decompressed_head(io.BufferedReader(_Prefixed(start, member))),
                                              id_col):
                                return True
            return False
        fh.seek(0)
        head = _decompressed_head(fh)
    if len(head) > 262 and head[257:262] == b"ustar":
        try:
            with tarfile.open(path, mode="r:*") as archive:
                for member in archive:
                    if member.isfile():
                        stream = archive.extractfile(member)
                        if stream is not None and _head_names_id(_decompressed_head(stream), id_col):
                            return True
        except (tarfile.TarError, OSError, EOFError):
            pass
        return False
    return _head_names_id(head, id_col)


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were read already (``prefix``), then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream) -> None:
        self._prefix, self._stream = prefix, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n], self._prefix = self._prefix[:n], self._prefix[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _head_names_id(head: bytes, id_col: str) -> bool:
    if head.startswith(_MEDIA_MAGIC):
        return False
    if any(head.startswith(m) for m in _BINARY_TABLES):
        return id_col.encode("utf-8") in head
    return _text_names_id(head, id_col)
