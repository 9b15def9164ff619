"""Where the run store is: an fsspec URL, its file system, and the check that it answers.

A store is any place fsspec reaches: a local or NFS path, ``s3://bucket/prefix`` (AWS or any
S3-compatible service: MinIO, SeaweedFS, GCS's interoperability), ``gs://``, ``sftp://``. Its
credentials and endpoint are configured the standard way of its fsspec package (for s3fs:
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``~/.aws/config``), never
by options of ours. Layout (issue 34)::

    STORE/runs/<run name>/   a run directory, mirrored (swarm_evo/store/mirror.py)
    STORE/data/<competition>/prepared/{public,private}/   prepared competitions
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit, urlunsplit

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

STORE_ENV = "SWARM_EVO_STORE"
"""Environment variable that gives the store when ``--store`` / the ``store`` key is not set."""

RUNS_DIR = "runs"
"""``STORE/runs/<run name>/``: the mirrored run directories."""

CHECK_TIMEOUT = 30.0
"""Seconds :func:`check_store` waits for the store to answer its write-read-delete probe."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_MISTYPED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)(?::/?(?!/)|//)(.*)$")
"""``s3:/bucket/x``, ``s3:bucket/x``, ``s3//bucket/x``: a scheme without its ``://`` (issue 40, item 8)."""

# s3fs builds of some package indexes report __version__ 0.4.2 whatever their release, and fsspec
# then warns that s3fs is "very old" on every import; the release is the one pip installed.
warnings.filterwarnings("ignore", message="Your installed version of s3fs is very old")


class StoreError(ValueError):
    """A store URL that cannot be used: an unknown scheme, a missing fsspec package, a store that
    cannot be reached or written, a run that is not in it. The message is one line naming the
    URL and the fix."""


def is_url(text: str | Path) -> bool:
    """Whether ``text`` starts with ``scheme://`` (``s3://b/p``, ``file:///p``); a plain path is not."""
    return bool(_SCHEME.match(str(text)))


def redact_url(text: str | Path) -> str:
    """``text`` with the password of a URL's user part replaced by ``***``
    (``sftp://alice:secret@host/p`` -> ``sftp://alice:***@host/p``); anything else unchanged."""
    text = str(text)
    if not is_url(text):
        return text
    parts = urlsplit(text)
    if parts.password is None:
        return text
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def check_url(text: str | Path) -> str:
    """``text`` stripped, after the checks every store and data URL passes (issue 40, item 8).

    Raises:
        StoreError: a scheme whose ``://`` is mistyped (``s3:/b/x``, ``s3:b/x``, ``s3//b/x``:
            these would silently be local folders, so every machine would write its own disk),
            or a URL with a password in it (``sftp://user:secret@host/p``: a URL is kept in the
            journal, the flow run's parameters shown by the UI, the sweep's rows and the logs).
            The message names the fix and never the password.
    """
    text = str(text).strip()
    mistyped = _MISTYPED.match(text)
    if mistyped and not is_url(text) and mistyped.group(1).lower() in _known_protocols():
        scheme, rest = mistyped.group(1), mistyped.group(2).lstrip("/")
        if scheme.lower() == "file":  # file://a/b would be the relative folder a/b: the path is absolute
            given = text[len(scheme):].lstrip(":")
            path = "/" + given.lstrip("/") if given.startswith("/") else os.path.abspath(given)
            raise StoreError(f"{text}: not a URL ('{scheme}' needs '://'): write file://{path} "
                             f"(or the path itself, {path})")
        raise StoreError(f"{text}: not a URL ('{scheme}' needs '://'): write {scheme}://{rest} "
                         f"(or ./{text} for a local folder of that name)")
    if is_url(text) and urlsplit(text).password is not None:
        raise StoreError(
            f"{redact_url(text)}: a password in the URL would be kept in the journal, the flow run's parameters "
            "(shown in the Prefect UI), the sweep's rows and the logs; leave it out and give the credentials the "
            "file system's own way: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or ~/.aws) for s3://, an ssh key "
            "or ~/.ssh/config for sftp://, GOOGLE_APPLICATION_CREDENTIALS for gs:// (docs/many-machines.md)")
    return text


def _known_protocols() -> set[str]:
    return {p.lower() for p in fsspec.available_protocols() if len(p) > 1}


@dataclass(frozen=True)
class Store:
    """An opened store location: ``url`` (as the user gave it, without a trailing ``/``; a local
    path made absolute), the fsspec file system ``fs`` and the location's path ``root`` in it."""

    url: str
    fs: AbstractFileSystem
    root: str

    @property
    def is_local(self) -> bool:
        """True for a local (or mounted, e.g. NFS) directory: writes then go through a
        temporary file and a rename, as S3's whole-object puts are atomic by themselves."""
        return isinstance(self.fs, LocalFileSystem)

    def path(self, *parts: str) -> str:
        """The fs path of ``parts`` (``/``-joined relative parts) under this location."""
        return "/".join([self.root.rstrip("/"), *(p.strip("/") for p in parts if p)])

    def child(self, *parts: str) -> Store:
        """The location ``URL/parts...`` on the same file system."""
        rel = "/".join(p.strip("/") for p in parts if p)
        return Store(url=f"{self.url}/{rel}", fs=self.fs, root=self.path(rel))

    def run(self, name: str) -> Store:
        """``STORE/runs/<name>``: where the run directory called ``name`` is mirrored."""
        return self.child(RUNS_DIR, name)


def open_store(url: str | Path) -> Store:
    """Open the store at ``url``: an fsspec URL or a local path (made absolute), on a file system
    of its own (not fsspec's cached instance: see the comment below). Nothing is read or written
    (:func:`check_store` does that).

    Raises:
        StoreError: an unknown scheme (names the schemes fsspec knows), the scheme's fsspec
            package is not installed (names it: ``pip install s3fs`` for ``s3://``), or
            :func:`check_url` refuses the URL (a mistyped scheme, a password in it).
    """
    text = check_url(url)
    if not text:
        raise StoreError("an empty store URL: give a directory or an fsspec URL such as s3://bucket/prefix")
    if not is_url(text):
        text = str(Path(text).expanduser().resolve())
    text = text.rstrip("/") or "/"
    try:
        # a fresh file system per store: its package reads the standard variables (AWS_ENDPOINT_URL,
        # keys) when it is made, and fsspec's instance cache would hand a process whose
        # environment changed a client for the old endpoint
        fs, root = fsspec.core.url_to_fs(text, skip_instance_cache=True)
    except ImportError as exc:  # fsspec names the package: "Please install gcsfs to access Google Storage"
        raise StoreError(f"{text}: {exc} (the store's scheme needs that fsspec package: pip install it)") from None
    except ValueError as exc:
        scheme = _SCHEME.match(text).group(1) if _SCHEME.match(text) else text
        known = ", ".join(sorted(p for p in fsspec.available_protocols() if len(p) > 1)[:30])
        raise StoreError(f"{text}: unknown scheme '{scheme}' ({exc}); fsspec knows {known}") from None
    return Store(url=text, fs=fs, root=root)


def check_store(store: Store, timeout: float = CHECK_TIMEOUT) -> None:
    """Write, read back and delete a small probe object under ``store`` within ``timeout`` seconds:
    a store that cannot be reached or written stops a command at its start, not after hours.

    Raises:
        StoreError: the probe failed or did not finish in time; the message names the URL, the
            error and the standard settings to check.
    """
    probe = store.path(f".swarm-evo-probe-{uuid.uuid4().hex}")
    payload = b"swarm-evo store probe\n"

    def round_trip() -> None:
        store.fs.makedirs(store.root, exist_ok=True)
        store.fs.pipe_file(probe, payload)
        try:
            if store.fs.cat_file(probe) != payload:
                raise OSError("the probe object read back differs from what was written")
        finally:
            store.fs.rm(probe)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-check")
    try:
        pool.submit(round_trip).result(timeout=timeout)
    except FutureTimeout:
        raise StoreError(f"{store.url}: no answer in {timeout:.0f} s; {_hint(store)}") from None
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise StoreError(f"{store.url}: cannot write ({message}); {_hint(store)}") from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _hint(store: Store) -> str:
    protocol = store.fs.protocol if isinstance(store.fs.protocol, str) else store.fs.protocol[0]
    if protocol in ("s3", "s3a"):
        return ("check that the bucket exists and AWS_ENDPOINT_URL (for a service other than AWS), "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are right")
    if store.is_local:
        return "check that the directory (or its mount) exists and is writable here"
    return f"check the {protocol} server and its credentials"


def checked_store(url: str | None) -> Store | None:
    """:func:`open_store` then :func:`check_store`; None when ``url`` is None or empty.

    Raises:
        StoreError: see both.
    """
    if not url:
        return None
    store = open_store(url)
    check_store(store)
    return store


OBJECT_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"})
"""File systems whose put of one object is whole or nothing (an object store's PUT): written in
place. Every other one (a local or NFS directory, SFTP, ...) gets a temporary name and a rename."""


def put_object(target: Store, rel: str, source: bytes | BinaryIO, made_dirs: set[str] | None = None,
               limit: int | None = None) -> int:
    """Write ``source`` (bytes or a binary file) to ``target/rel`` so that a reader never sees half
    of it: through a temporary name and a rename on a local store (``os.replace``) and on any file
    system that is not an object store (its ``mv``), as one object on an object store (an S3 put
    is whole or nothing: :data:`OBJECT_PROTOCOLS`). ``made_dirs`` remembers the folders already
    made. ``limit``: copy at most that many bytes of a file (the size the caller checked: a file
    that grew since is cut there, never sent whole). Returns the bytes written.

    Raises:
        OSError and the store's own errors: the write failed (no temporary file is left behind
            on a local store).
    """
    fs, path = target.fs, target.path(rel)
    parent = path.rsplit("/", 1)[0]
    if made_dirs is None or parent not in made_dirs:
        fs.makedirs(parent, exist_ok=True)
        if made_dirs is not None:
            made_dirs.add(parent)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    in_place = not target.is_local and protocol in OBJECT_PROTOCOLS
    # a short temporary name: a name near the 255-byte limit must still fit with its suffix
    write_path = path if in_place else f"{parent}/.{rel.rsplit('/', 1)[-1][:64]}.{uuid.uuid4().hex}.tmp"
    try:
        with fs.open(write_path, "wb") as out:
            written = _copy(source, out, limit)
        if write_path != path:
            os.replace(write_path, path) if target.is_local else fs.mv(write_path, path)
    except BaseException:
        if write_path != path and target.is_local and os.path.exists(write_path):
            os.unlink(write_path)
        raise
    return written


def _copy(source: bytes | BinaryIO, out: BinaryIO, limit: int | None) -> int:
    if isinstance(source, bytes):
        data = source if limit is None else source[:limit]
        out.write(data)
        return len(data)
    if limit is None:
        shutil.copyfileobj(source, out)
        return out.tell()
    left = limit
    while left > 0:
        chunk = source.read(min(left, 1 << 20))
        if not chunk:
            break
        out.write(chunk)
        left -= len(chunk)
    return limit - left
