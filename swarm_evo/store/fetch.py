"""Reading runs back from the store: a run's files into a local run directory (resume on any
machine), and one small file of a run (a sweep's rows).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from swarm_evo.population.journal import JOURNAL_FILE
from swarm_evo.store.location import RUNS_DIR, Store, StoreError, is_url, open_store


def split_run_url(url: str) -> tuple[str, str]:
    """``STORE/runs/<name>`` -> ``(STORE, name)``.

    Raises:
        StoreError: ``url`` does not end in ``/runs/<name>`` (the layout the mirror writes).
    """
    text = str(url).rstrip("/")
    head, _, name = text.rpartition("/")
    store, _, runs = head.rpartition("/")
    if runs != RUNS_DIR or not name or not store:
        raise StoreError(f"{url}: not a run in a store; give STORE/{RUNS_DIR}/<run name>, "
                         f"e.g. s3://bucket/prefix/{RUNS_DIR}/spaceship-titanic-two_phase-s0")
    return store, name


def fetch_run(run: Store, run_dir: Path) -> int:
    """Rebuild the run directory ``run_dir`` from the store location ``run`` (``STORE/runs/<name>``);
    returns the number of files downloaded.

    A ``run_dir`` that already holds a journal is left as it is (0): the local copy is at least
    as new as the store's, which the mirror fills from it. Otherwise every file is downloaded,
    the journal last, so an interrupted fetch leaves no journal and is simply done again.

    Raises:
        StoreError: the store has no ``journal.json`` at ``run`` (no such run), or cannot be read.
    """
    run_dir = Path(run_dir)
    if (run_dir / JOURNAL_FILE).exists():
        return 0
    journal = run.path(JOURNAL_FILE)
    try:
        if not run.fs.exists(journal):
            raise StoreError(f"{run.url}: no {JOURNAL_FILE} there, so no run to resume; check the run name "
                             f"(a store keeps its runs in STORE/{RUNS_DIR}/<run name>)")
        files = sorted(path for path in run.fs.find(run.root) if not path.endswith("/"))
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{run.url}: cannot read the run ({type(exc).__name__}: {exc})") from None
    prefix = run.root.rstrip("/") + "/"
    journal_last = sorted(files, key=lambda path: path == journal)
    count = 0
    for path in journal_last:
        rel = path[len(prefix):] if path.startswith(prefix) else None
        if not rel or rel.startswith("..") or "/../" in f"/{rel}/" or Path(rel).name.startswith(".swarm-evo-probe"):
            continue
        _download(run, path, run_dir / rel)
        count += 1
    return count


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


def resolve_run(location: str | Path, scratch: Path = Path(RUNS_DIR)) -> tuple[Path, str | None]:
    """Where to resume ``location``: a local run directory as it is, or a run in a store
    (``STORE/runs/<name>``, any fsspec URL) fetched into ``scratch/<name>`` (:func:`fetch_run`),
    or into ``scratch/<hash of the URL>/<name>`` when ``scratch/<name>`` holds another run.

    Returns:
        ``(local run directory, store URL or None)``.

    Raises:
        StoreError: a URL that is not ``STORE/runs/<name>``, or a run the store does not hold.
    """
    if not is_url(location):
        return Path(location), None
    store_url, name = split_run_url(str(location))
    store = open_store(store_url)
    run = store.run(name)
    run_dir = Path(scratch) / name
    if not _same_run(run, run_dir):  # another run of that name here (another sweep's): a place of its own
        run_dir = Path(scratch) / hashlib.sha256(run.url.encode()).hexdigest()[:10] / name
    fetch_run(run, run_dir)
    return run_dir, store.url


def _node_ids(journal: bytes) -> list[str]:
    return [node.get("id") for node in json.loads(journal).get("nodes") or []]


def _same_run(run: Store, run_dir: Path) -> bool:
    """Whether ``run_dir`` is free or holds the run at ``run``: its journal's nodes start with the
    store's (the store is at most the node in flight behind the run directory it mirrors)."""
    local = run_dir / JOURNAL_FILE
    if not local.exists():
        return True
    try:
        mine, theirs = _node_ids(local.read_bytes()), _node_ids(run.fs.cat_file(run.path(JOURNAL_FILE)))
    except (OSError, ValueError):
        return False
    return mine[:len(theirs)] == theirs and (bool(theirs) or not mine)


def read_run_json(store: Store, name: str, filename: str) -> dict | None:
    """``STORE/runs/<name>/<filename>`` parsed as a JSON object, or None when it is not there or
    not a JSON object (a run that did not write it yet)."""
    try:
        data = json.loads(store.fs.cat_file(store.run(name).path(filename)))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None
