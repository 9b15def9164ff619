"""Reading runs back from the store: a run's files into a local run directory (resume on any
machine), and one small file of a run (a sweep's rows).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from swarm_evo.config import DEFAULT_MAX_FILE_MB
from swarm_evo.population.journal import JOURNAL_FILE
from swarm_evo.store.lease import LEASE_FILE, is_extension, node_ids
from swarm_evo.store.location import RUNS_DIR, Store, StoreError, is_url, open_store, redact_url
from swarm_evo.store.run_lock import LOCK_FILE, RunDirectoryBusyError, check_free

logger = logging.getLogger(__name__)


def split_run_url(url: str) -> tuple[str, str]:
    """``STORE/runs/<name>`` -> ``(STORE, name)``.

    Raises:
        StoreError: ``url`` does not end in ``/runs/<name>`` (the layout the mirror writes).
    """
    text = str(url).rstrip("/")
    head, _, name = text.rpartition("/")
    store, _, runs = head.rpartition("/")
    if runs != RUNS_DIR or not name or not store:
        raise StoreError(f"{redact_url(url)}: not a run in a store; give STORE/{RUNS_DIR}/<run name>, "
                         f"e.g. s3://bucket/prefix/{RUNS_DIR}/spaceship-titanic-two_phase-s0")
    return store, name


@dataclass
class Fetched:
    """What :func:`fetch_run` did: ``files`` downloaded, ``skipped`` (relative path -> why: over
    ``store.max_file_mb``)."""

    files: int = 0
    skipped: dict[str, str] = field(default_factory=dict)


def fetch_run(run: Store, run_dir: Path, max_file_mb: int = DEFAULT_MAX_FILE_MB) -> Fetched:
    """Rebuild the run directory ``run_dir`` from the store location ``run`` (``STORE/runs/<name>``).

    A ``run_dir`` that already holds a journal is left as it is (nothing fetched): the caller
    (:func:`resolve_run`) decided it holds this run at least as far as the store. Otherwise every
    file is downloaded, the journal last, so an interrupted fetch leaves no journal and is simply
    done again; files over ``max_file_mb`` MiB (``store.max_file_mb``; a file of that size in the
    store was put there by something else than the mirror, which refuses them) are skipped and
    recorded, as are the lease and temporary files.

    Raises:
        StoreError: the store has no ``journal.json`` at ``run`` (no such run), or cannot be read.
    """
    run_dir = Path(run_dir)
    fetched = Fetched()
    if (run_dir / JOURNAL_FILE).exists():
        return fetched
    journal = run.path(JOURNAL_FILE)
    try:
        if not run.fs.exists(journal):
            raise StoreError(f"{run.url}: no {JOURNAL_FILE} there, so no run to resume; check the run name "
                             f"(a store keeps its runs in STORE/{RUNS_DIR}/<run name>)")
        listing = run.fs.find(run.root, detail=True)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{run.url}: cannot read the run ({type(exc).__name__}: {exc})") from None
    prefix = run.root.rstrip("/") + "/"
    limit = max_file_mb * 1024 * 1024
    for path in sorted((p for p in listing if not p.endswith("/")), key=lambda p: (p == journal, p)):
        rel = path[len(prefix):] if path.startswith(prefix) else None
        name = Path(rel).name if rel else ""
        if (not rel or rel.startswith("..") or "/../" in f"/{rel}/" or name.startswith(".swarm-evo-probe")
                or rel in (LEASE_FILE, LOCK_FILE) or (name.startswith(".") and name.endswith(".tmp"))):
            continue
        size = listing[path].get("size") or 0
        if size > limit:
            fetched.skipped[rel] = f"{size / 2**20:,.0f} MiB, over store.max_file_mb = {max_file_mb}"
            logger.warning("not fetched from %s: %s (%s)", run.url, rel, fetched.skipped[rel])
            continue
        _download(run, path, run_dir / rel)
        fetched.files += 1
    return fetched


def _download(store: Store, path: str, target: Path) -> None:
    """``store``'s file ``path`` to the local ``target``, through a temporary file and a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        store.fs.get_file(path, tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch_files(run: Store, run_dir: Path, names: Iterable[str]) -> list[str]:
    """Copy the files ``names`` of the run at ``run`` into ``run_dir``, replacing local copies; a
    name the store lacks is removed locally, so nothing stale is read. Returns the names fetched.

    Raises:
        OSError and the store's own errors: the store cannot be read.
    """
    run_dir = Path(run_dir)
    fetched = []
    for name in names:
        try:
            _download(run, run.path(name), run_dir / name)
            fetched.append(name)
        except FileNotFoundError:
            (run_dir / name).unlink(missing_ok=True)
    return fetched


def resolve_run(location: str | Path, scratch: Path = Path(RUNS_DIR),
                max_file_mb: int = DEFAULT_MAX_FILE_MB) -> tuple[Path, str | None]:
    """Where to resume ``location``: a local run directory as it is, or a run in a store
    (``STORE/runs/<name>``, any fsspec URL) in ``scratch/<name>`` (or ``scratch/<hash of the
    URL>/<name>`` when ``scratch/<name>`` holds another run).

    The store's journal only grows (issue 40, item 3): a local copy of the same run (the same
    ``run_id``) is used as it is only when its journal extends the store's; a copy the store has
    moved past is moved aside to ``<dir>.stale-<UTC time>`` (kept, never deleted) and the run
    is fetched again (:func:`fetch_run`).

    Returns:
        ``(local run directory, store URL or None)``.

    A ``scratch/<name>`` still open in another process (issue 53, item 2: a run on this machine that
    was declared dead while its process lives, frozen) is never touched: the run is fetched into
    ``scratch/<hash of the URL>/<name>`` instead.

    Raises:
        StoreError: a URL that is not ``STORE/runs/<name>``, or a run the store does not hold.
        RunDirectoryBusyError: that place too is open in another process.
    """
    if not is_url(location):
        return Path(location), None
    store_url, name = split_run_url(str(location))
    store = open_store(store_url)
    run = store.run(name)
    stored = _stored_journal(run)
    run_dir = Path(scratch) / name
    if not _same_run(stored, run_dir):  # another run of that name here (another sweep's): a place of its own
        run_dir = Path(scratch) / hashlib.sha256(run.url.encode()).hexdigest()[:10] / name
    else:
        try:
            check_free(run_dir)
        except RunDirectoryBusyError as exc:  # still open in a process declared dead (frozen): never touched
            run_dir = Path(scratch) / hashlib.sha256(run.url.encode()).hexdigest()[:10] / name
            logger.warning("%s; fetching %s into %s instead", exc, run.url, run_dir)
    check_free(run_dir)  # a run still open here (another process) is never moved aside nor fetched into
    local = _local_journal(run_dir)
    if local is not None and not is_extension(node_ids(local), node_ids(stored)):
        aside = run_dir.with_name(f"{run_dir.name}.stale-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}")
        run_dir.rename(aside)
        logger.warning("%s is behind %s (%s nodes there, %s here): moved it to %s and fetched the store's copy",
                       run_dir, run.url, len(node_ids(stored)), len(node_ids(local)), aside)
    fetch_run(run, run_dir, max_file_mb)
    return run_dir, store.url


def _stored_journal(run: Store) -> dict:
    try:
        data = json.loads(run.fs.cat_file(run.path(JOURNAL_FILE)))
    except FileNotFoundError:
        raise StoreError(f"{run.url}: no {JOURNAL_FILE} there, so no run to resume; check the run name "
                         f"(a store keeps its runs in STORE/{RUNS_DIR}/<run name>)") from None
    except ValueError:
        raise StoreError(f"{run.url}: its {JOURNAL_FILE} is not JSON; the run cannot be resumed from there") from None
    except Exception as exc:
        raise StoreError(f"{run.url}: cannot read the run ({type(exc).__name__}: {exc})") from None
    return data if isinstance(data, dict) else {}


def _local_journal(run_dir: Path) -> dict | None:
    try:
        data = json.loads((run_dir / JOURNAL_FILE).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"info": {}, "nodes": []}
    return data if isinstance(data, dict) else {"info": {}, "nodes": []}


def _same_run(stored: dict, run_dir: Path) -> bool:
    """Whether ``run_dir`` is free or holds the run whose journal the store holds: the same
    ``run_id``; for journals from before run ids, nodes that start with the store's (and, with
    no nodes on either side, nothing to tell them apart: not the same)."""
    local = _local_journal(run_dir)
    if local is None:
        return True
    ours, theirs = (local.get("info") or {}).get("run_id"), (stored.get("info") or {}).get("run_id")
    if ours or theirs:
        return ours == theirs
    mine, stored_nodes = node_ids(local), node_ids(stored)
    return bool(stored_nodes) and is_extension(mine, stored_nodes)


def read_run_json(store: Store, name: str, filename: str) -> dict | None:
    """``STORE/runs/<name>/<filename>`` parsed as a JSON object, or None when it is not there or
    not a JSON object (a run that did not write it yet)."""
    try:
        data = json.loads(store.fs.cat_file(store.run(name).path(filename)))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None
