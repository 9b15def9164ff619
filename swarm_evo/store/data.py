"""Prepared competitions in the store (issue 34, item 2): ``swarm-evo prepare … --data-dir URL``
uploads one; ``run``/``grade --data-dir URL`` read it through a local cache, one download per
machine and file version.

Layout in the store (MLE-bench's, as a local data directory)::

    URL/<id>/config.yaml, leaderboard.csv          read with the public part
    URL/<id>/prepared/public/**                    what programs see (``workdir/input``)
    URL/<id>/prepared/private/**                   the answers: fetched only to grade

Layout of the cache (``$SWARM_EVO_DATA_CACHE``, default ``$XDG_CACHE_HOME/swarm-evo/data`` or
``~/.cache/swarm-evo/data``), one folder per store URL (``<sha>``: the first 16 hex digits of
the URL's SHA-256)::

    <sha>/url.txt                                  the URL, for people
    <sha>/public/<id>/...                          the public part: a data directory
    <sha>/private/<id>/prepared/private/**         the answers, a separate tree
    <sha>/versions/<id>.<part>.json                each file's version (size + ETag or mtime)

fsspec's own ``filecache`` keeps each file under a hash of its path (or its base name), not as
a directory tree, so it cannot be the program's ``input/``; the versions file does its job here:
a file is downloaded again only when its size or ETag (S3), generation (GCS) or mtime (a
directory) changed in the store. A file gone from the store is removed from the cache. Files go
in by rename, so a reader sees a whole old or a whole new file; a lock file serialises the
processes of one machine that fill the same folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from swarm_evo.store.location import Store, StoreError, _hint, open_store

DATA_CACHE_ENV = "SWARM_EVO_DATA_CACHE"
"""Environment variable naming the data cache's folder (default ``$XDG_CACHE_HOME/swarm-evo/data``)."""

PUBLIC_FILES = ("config.yaml", "leaderboard.csv", "description.md")
"""Files of ``URL/<id>/`` itself read with the public part (never ``raw/``: MLE-bench keeps the
raw Kaggle files there, whose training set holds the answers of the prepared test set)."""

PARTS = ("public", "private")
LIST_TIMEOUT = 60.0
"""Seconds the store has to list a competition's files before the load fails with StoreError."""

_T = TypeVar("_T")


class DataNotFoundError(StoreError):
    """The store answers but holds no ``URL/<id>/prepared/<part>/``: the competition was not
    prepared there."""


@dataclass(frozen=True)
class SyncReport:
    """What :func:`sync_competition` did: ``data_dir`` is the local folder holding ``<id>/``
    (the public part's data directory, or the private part's root), ``downloaded`` the files
    fetched (``bytes`` their size), ``kept`` the files already current, ``removed`` the files
    deleted because the store no longer has them."""

    data_dir: Path
    downloaded: int
    kept: int
    removed: int
    bytes: int


def data_cache_root() -> Path:
    """The data cache's folder: ``$SWARM_EVO_DATA_CACHE``, else ``$XDG_CACHE_HOME/swarm-evo/data``,
    else ``~/.cache/swarm-evo/data``."""
    if os.environ.get(DATA_CACHE_ENV):
        return Path(os.environ[DATA_CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "swarm-evo" / "data"


def cache_dir(url: str, cache_root: Path | None = None) -> Path:
    """The cache folder of the store location ``url`` (``<cache_root>/<sha>``); nothing is created."""
    store = open_store(url)
    digest = hashlib.sha256(store.url.encode()).hexdigest()[:16]
    return Path(cache_root or data_cache_root()) / digest


def part_root(url: str, part: str, cache_root: Path | None = None) -> Path:
    """The local folder that holds ``<id>/`` of ``part`` (``public``: a data directory for
    ``load_competition``; ``private``: its ``private_root``) once :func:`sync_competition` ran."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    return cache_dir(url, cache_root) / part


def _timed(store: Store, what: str, call: Callable[[], _T], timeout: float, verb: str = "read") -> _T:
    """``call()`` within ``timeout`` seconds; StoreError naming the URL and the error otherwise."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-data")
    try:
        return pool.submit(call).result(timeout=timeout)
    except FutureTimeout:
        raise StoreError(f"{store.url}: no answer in {timeout:.0f} s while {what}") from None
    except StoreError:
        raise
    except Exception as exc:
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        hint = "" if store.is_local else f"; {_hint(store)}"
        raise StoreError(f"{store.url}: cannot {verb} ({message}) while {what}{hint}") from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _version(info: dict) -> str:
    """A file's version as the store reports it: size plus the first of ETag (S3), generation or
    md5 (GCS), modification time (a directory, SFTP)."""
    for key in ("ETag", "etag", "generation", "md5Hash", "LastModified", "mtime", "modified", "created"):
        if info.get(key) not in (None, ""):
            return f"{info.get('size')}:{info[key]}"
    return f"{info.get('size')}:"


def _remote_files(store: Store, competition_id: str, part: str) -> dict[str, dict]:
    """``{path relative to URL/<id>/: fsspec info}`` of ``part``'s files in the store.

    Raises:
        DataNotFoundError: no ``URL/<id>/prepared/<part>/`` there.
        StoreError: the store cannot be read.
    """
    comp = store.child(competition_id)
    folder = comp.path("prepared", part)

    def listing() -> dict[str, dict]:
        store.fs.invalidate_cache()  # s3fs caches listings per process: a changed file must show
        found = store.fs.find(folder, detail=True)
        if part == "public":
            for name in PUBLIC_FILES:
                try:
                    found[comp.path(name)] = store.fs.info(comp.path(name))
                except FileNotFoundError:
                    pass
        return found

    found = _timed(store, f"listing {comp.url}/prepared/{part}", listing, LIST_TIMEOUT)
    prefix = comp.root.rstrip("/") + "/"
    files = {}
    for path, info in found.items():
        rel = path[len(prefix):] if path.startswith(prefix) else ""
        if info.get("type") == "directory" or not rel or rel.endswith("/") or ".." in rel.split("/"):
            continue
        files[rel] = info
    if not any(rel.startswith(f"prepared/{part}/") for rel in files):
        raise DataNotFoundError(f"{comp.url}/prepared/{part} not found")
    return files


def sync_competition(url: str, competition_id: str, part: str = "public",
                     cache_root: Path | None = None) -> SyncReport:
    """Bring ``part`` (``public`` or ``private``) of competition ``competition_id`` in the store
    location ``url`` into the local cache, downloading only the files whose version changed.

    ``public``: ``URL/<id>/prepared/public/**`` plus ``config.yaml``, ``leaderboard.csv`` and
    ``description.md`` of ``URL/<id>/``, into ``<cache>/<sha>/public/<id>/``; ``private``:
    ``URL/<id>/prepared/private/**`` into ``<cache>/<sha>/private/<id>/prepared/private/``,
    readable by this user only. Returns what was done (``data_dir``: ``<cache>/<sha>/<part>``).

    Raises:
        ValueError: ``part`` is neither ``public`` nor ``private``.
        DataNotFoundError: the store holds no ``URL/<id>/prepared/<part>/``.
        StoreError: an unknown scheme, a missing fsspec package, or a store that cannot be read.
    """
    store = open_store(url)
    root = part_root(url, part, cache_root)
    base = root.parent
    remote = _remote_files(store, competition_id, part)
    base.mkdir(parents=True, exist_ok=True)
    (base / "url.txt").write_text(store.url + "\n", encoding="utf-8")
    with open(base / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _sync_locked(store, competition_id, part, remote, root, base)


def _sync_locked(store: Store, competition_id: str, part: str, remote: dict[str, dict],
                 root: Path, base: Path) -> SyncReport:
    versions_path = base / "versions" / f"{competition_id}.{part}.json"
    try:
        known = json.loads(versions_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    local_dir = root / competition_id
    root.mkdir(parents=True, exist_ok=True)
    if part == "private":
        os.chmod(root, 0o700)  # the answers: this user only, whatever a program's uid
    wanted = {rel: _version(info) for rel, info in remote.items()}
    stale = [rel for rel, version in wanted.items()
             if known.get(rel) != version or not _same_size(local_dir / rel, remote[rel])]
    comp_root = store.child(competition_id)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=base))
    try:
        if stale:
            sources = [comp_root.path(rel) for rel in stale]
            targets = [str(staging / f"{i}") for i in range(len(stale))]
            _timed(store, f"downloading {len(stale)} file(s) of {comp_root.url}",
                   lambda: store.fs.get(sources, targets), 3600.0)
        size = 0
        for i, rel in enumerate(stale):
            target = local_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(staging / f"{i}", 0o644 if part == "public" else 0o600)  # public: programs run as nobody
            size += (staging / f"{i}").stat().st_size
            os.replace(staging / f"{i}", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    removed = 0
    for rel in set(known) - set(wanted):
        path = local_dir / rel
        if path.is_file():
            path.unlink()
            removed += 1
    versions_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".versions-", suffix=".tmp", dir=versions_path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(wanted, out, indent=1, sort_keys=True)
    os.replace(tmp, versions_path)
    return SyncReport(data_dir=root, downloaded=len(stale), kept=len(wanted) - len(stale), removed=removed,
                      bytes=size)


def _same_size(path: Path, info: dict) -> bool:
    """Whether the cached ``path`` exists with the store's size (a cache file cut short is fetched again)."""
    try:
        return info.get("size") is None or path.stat().st_size == info["size"]
    except OSError:
        return False


def local_competition_dir(url: str, competition_id: str, part: str = "public",
                          cache_root: Path | None = None) -> Path:
    """:func:`sync_competition`, returning only the local folder that holds ``<id>/`` of ``part``
    (for ``public``, the ``data_dir`` to load the competition from).

    Raises:
        DataNotFoundError, StoreError: see :func:`sync_competition`.
    """
    return sync_competition(url, competition_id, part, cache_root).data_dir


def upload_competition(data_dir: Path, competition_id: str, url: str) -> int:
    """Copy the prepared competition ``data_dir/<id>/`` (its ``prepared/`` tree and the files of
    :data:`PUBLIC_FILES`) to ``URL/<id>/``, then delete the files of ``URL/<id>/prepared/`` that
    the new preparation no longer has. Returns the number of files uploaded.

    Raises:
        StoreError: the store cannot be written (names the URL and the error).
    """
    store = open_store(url)
    comp = store.child(competition_id)
    local = Path(data_dir) / competition_id
    files = sorted(p for p in (local / "prepared").rglob("*") if p.is_file())
    files += [local / name for name in PUBLIC_FILES if (local / name).is_file()]
    rels = [p.relative_to(local).as_posix() for p in files]

    def upload() -> None:
        if store.is_local:  # a directory: each file through a temporary name and a rename
            for path, rel in zip(files, rels):
                target = comp.path(rel)
                store.fs.makedirs(target.rpartition("/")[0], exist_ok=True)
                tmp = f"{target.rpartition('/')[0]}/.{target.rpartition('/')[2]}.uploading"
                store.fs.put_file(str(path), tmp)
                store.fs.mv(tmp, target)
        else:  # an object store: whole-object puts are atomic; fsspec sends them concurrently
            store.fs.put([str(p) for p in files], [comp.path(rel) for rel in rels])
        store.fs.invalidate_cache()
        old = store.fs.find(comp.path("prepared")) if store.fs.exists(comp.path("prepared")) else []
        prefix = comp.root.rstrip("/") + "/"
        gone = [path for path in old if path.startswith(prefix) and path[len(prefix):] not in set(rels)]
        if gone:
            store.fs.rm(gone)

    _timed(store, f"uploading {len(files)} file(s) to {comp.url}", upload, 3600.0, "write")
    return len(files)
