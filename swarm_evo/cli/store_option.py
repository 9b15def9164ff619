"""The ``--store`` option of ``run`` and ``resume`` (issue 34): its help, and the check at the
command's start that the run store answers, with the error naming where the store came from."""

from __future__ import annotations

import os

STORE_HELP = ("run store: a directory or an fsspec URL (s3://bucket/prefix, gs://..., sftp://...) the run directory "
              "is mirrored to as STORE/runs/<run name>/ (default $SWARM_EVO_STORE; docs/many-machines.md)")


def store_source(args) -> str:
    """How the run store was given, for its error messages: ``--store``, ``$SWARM_EVO_STORE`` or
    ``store (config)`` (the config file's key, or a resumed run's saved config)."""
    from swarm_evo.store.location import STORE_ENV

    if getattr(args, "store", None):
        return "--store"
    return f"${STORE_ENV}" if os.environ.get(STORE_ENV) else "store (config)"


def check_store_option(config, source: str) -> None:
    """Reach and write the run store (``config.store``) once, before anything runs; prints it.

    Raises:
        StoreError: one line starting with ``source`` (``--store``), the URL and the error.
    """
    if not config.store:
        return
    from swarm_evo.store import StoreError, check_store, open_store

    try:
        check_store(open_store(config.store))
    except StoreError as exc:
        raise StoreError(f"{source} {exc}") from None
    print(f"store: {config.store}")
