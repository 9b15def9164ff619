"""The ``--store`` option of ``prepare``, ``run``, ``resume`` and ``sweep`` (issue 34): its help,
the data directory it implies (``STORE/data``), and the check at the command's start that the
run store answers, with the error naming where the store came from."""

from __future__ import annotations

import os
import re
from pathlib import Path

STORE_HELP = ("run store: a directory or an fsspec URL (s3://bucket/prefix, gs://..., sftp://...) the run directory "
              "is mirrored to as STORE/runs/<run name>/ (default $SWARM_EVO_STORE; docs/many-machines.md)")


STORE_DATA_DIR = "data"
"""``STORE/data``: where ``prepare --store`` puts competitions and where ``run``/``sweep`` with a
store read them when ``--data-dir`` is not given."""


def store_data_dir(args) -> str | Path | None:
    """``STORE/data`` for the store of ``args`` (``--store``, else ``$SWARM_EVO_STORE``): a URL's
    as a string, a folder's as a ``Path``; None without a store."""
    from swarm_evo.store.location import STORE_ENV

    store = getattr(args, "store", None) or os.environ.get(STORE_ENV)
    if not store:
        return None
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", store):
        return f"{store.rstrip('/')}/{STORE_DATA_DIR}"
    return Path(store).expanduser() / STORE_DATA_DIR


def store_source(args) -> str:
    """How the run store was given, for its error messages: ``--store``, ``$SWARM_EVO_STORE`` or
    ``store (config)`` (the config file's key, or a resumed run's saved config)."""
    from swarm_evo.store.location import STORE_ENV

    if getattr(args, "store", None):
        return "--store"
    return f"${STORE_ENV}" if os.environ.get(STORE_ENV) else "store (config)"


def check_store_option(config, source: str, run_dir: Path | None = None, *, take_over: bool = False):
    """Reach and write the run store (``config.store.url``) once, before anything runs, and, given
    ``run_dir``, :func:`check_run_location`; prints the store. Returns it (None without one).

    Raises:
        StoreError: one line starting with ``source`` (``--store``), the URL and the error;
            ``LocationClashError`` / ``StaleCopyError`` / ``WriterAliveError`` (:func:`check_run_location`).
    """
    if not config.store.url:
        return None
    from swarm_evo.store import StoreError, check_store, open_store

    try:
        store = open_store(config.store.url)
        check_store(store)
    except StoreError as exc:
        raise StoreError(f"{source} {exc}") from None
    if run_dir is not None:
        check_run_location(store, run_dir, take_over=take_over)
    print(f"store: {config.store.url}")
    return store


def check_run_location(store, run_dir: Path, *, take_over: bool = False) -> None:
    """Before a run starts: may the run in ``run_dir`` (a new one, or one whose journal is there)
    take ``STORE/runs/<its name>`` over? Not when it holds another run, nor when the store's copy
    of this run is further on (issue 40, items 3 and 6), nor, unless ``take_over``, while its
    writer is alive (issue 53, item 3; the flow run's state asked of ``PREFECT_API_URL`` when set).
    No-op without a store.

    Raises:
        LocationClashError, StaleCopyError, WriterAliveError: one line naming the location and the fix.
    """
    if store is None:
        return
    import json

    from swarm_evo.population.journal import JOURNAL_FILE
    from swarm_evo.store.lease import check_claim

    try:
        data = json.loads((Path(run_dir) / JOURNAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    nodes = [str(n.get("id")) for n in data.get("nodes") or [] if isinstance(n, dict)]
    location = store.run(Path(run_dir).resolve().name)
    check_claim(location, (data.get("info") or {}).get("run_id"), nodes)
    from flows._writer_state import flow_run_state
    from swarm_evo.store.lease import new_owner
    from swarm_evo.store.liveness import check_writer

    check_writer(location, new_owner(), take_over=take_over, writer_state=flow_run_state)


def check_stored_writer(location: str, take_over: bool = False) -> None:
    """Before ``resume STORE/runs/<name>`` fetches anything: the run's writer is not alive (issue 53,
    item 3; :func:`swarm_evo.store.liveness.check_writer`), unless ``take_over``. No-op for a
    local run directory (its store, if any, is checked by :func:`check_run_location`).

    Raises:
        WriterAliveError: one line naming the writer and ``--take-over``.
        StoreError: the URL is not a run in a store, or the store cannot be read.
    """
    from swarm_evo.store.location import is_url

    if take_over or not is_url(location):
        return
    from flows._writer_state import flow_run_state
    from swarm_evo.store import open_store, split_run_url
    from swarm_evo.store.lease import new_owner
    from swarm_evo.store.liveness import check_writer

    store_url, name = split_run_url(location)
    check_writer(open_store(store_url).run(name), new_owner(), writer_state=flow_run_state)
