"""The run store (issue 34): one place, any fsspec URL, that holds every run of a pool of
machines with no shared disk. A run works in a local scratch run directory and mirrors it to
``STORE/runs/<run name>/``; a run is resumed on any machine from there; a sweep reads its rows
from there.

- :mod:`~swarm_evo.store.location`: ``open_store``, ``check_store``, ``Store``, ``StoreError``;
- :mod:`~swarm_evo.store.mirror`: ``RunMirror``, the background upload of a run directory;
- :mod:`~swarm_evo.store.writer`: ``mirror_run``, a run becomes the one writer of its location
  (:mod:`~swarm_evo.store.lease`, the check that the current one is dead:
  :mod:`~swarm_evo.store.liveness`);
- :mod:`~swarm_evo.store.run_lock`: one process per run directory;
- :mod:`~swarm_evo.store.fetch`: a run back into a local directory, one JSON file of a run;
- :mod:`~swarm_evo.store.data`: prepared competitions in the store, read through a local cache.

May import: sandbox, config, population.
"""

from swarm_evo.store.fetch import fetch_files, fetch_run, read_run_json, resolve_run, split_run_url
from swarm_evo.store.location import STORE_ENV, Store, StoreError, check_store, checked_store, is_url, open_store
from swarm_evo.store.mirror import RunMirror
from swarm_evo.store.writer import mirror_run
from swarm_evo.store.location import put_object

__all__ = [
    "STORE_ENV",
    "RunMirror",
    "Store",
    "StoreError",
    "check_store",
    "checked_store",
    "fetch_files",
    "fetch_run",
    "is_url",
    "mirror_run",
    "open_store",
    "put_object",
    "read_run_json",
    "resolve_run",
    "split_run_url",
]
