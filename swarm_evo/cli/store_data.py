"""``--data-dir URL`` of ``swarm-evo prepare`` and ``swarm-evo grade``: a prepared competition in
the store (issue 34, item 2; the cache and the layout: swarm_evo/store/data.py). ``run`` takes
the same URL through swarm_evo/objective/load.py."""

from __future__ import annotations

import tempfile
from pathlib import Path

from swarm_evo.competition import Competition


def prepare_to_store(competition_id: str, raw_dir: Path | None, url: str) -> str:
    """Prepare built-in ``competition_id`` from ``raw_dir`` in a local temporary folder, then
    upload it to ``URL/<id>/``; returns that URL.

    Raises:
        StoreError: the store cannot be opened, reached or written (the message starts with
            ``--data-dir`` and names the error); checked before anything is prepared.
        CompetitionError: as ``prepare_competition`` (an unknown id, a missing raw file).
    """
    from swarm_evo.competition import prepare_competition
    from swarm_evo.store import StoreError, check_store, open_store
    from swarm_evo.store.data import upload_competition

    try:
        store = open_store(url)
        check_store(store)
        with tempfile.TemporaryDirectory(prefix="swarm-evo-prepare-") as tmp:
            prepare_competition(competition_id, raw_dir, Path(tmp))
            upload_competition(Path(tmp), competition_id, store.url)
    except StoreError as exc:
        raise StoreError(f"--data-dir {exc}") from None
    return store.child(competition_id).url


def graded_competition(competition_id: str, url: str, mlebench_repo: Path | None) -> Competition:
    """Competition ``competition_id`` from the store location ``url``, its public and private
    parts brought into this machine's data cache (for ``swarm-evo grade``).

    Raises:
        StoreError: the store cannot be opened or read (the message starts with ``--data-dir``).
        CompetitionError: the competition is not prepared there (names the ``prepare`` command).
    """
    from swarm_evo.objective.load import stored_competition
    from swarm_evo.store import StoreError

    try:
        return stored_competition(competition_id, url, str(mlebench_repo) if mlebench_repo else None, answers=True)
    except StoreError as exc:
        raise StoreError(f"--data-dir {exc}") from None
