"""A run becomes the one writer of its store location (issue 40, item 2; issue 53, items 1 and 3).

:func:`mirror_run` is the last step of opening a run with a store, after every check that can
still fail: it asks whether the location's current writer is alive
(:func:`~swarm_evo.store.liveness.check_writer`: refused unless told to take over), takes the
lease (:func:`~swarm_evo.store.lease.take_over`) and starts the mirror.

On a directory store a run may work in the store's own folder (``swarm-evo resume STORE/runs/X``
with a plain path, or a sweep's resume on a shared disk): nothing is uploaded then, but the run
is fenced all the same. It takes the lease like any writer, its mirror checks it at every sync
(in place: :class:`~swarm_evo.store.mirror.RunMirror` with ``in_place``), and the session checks
it before every journal write (``journal.before_save``), so a run resumed elsewhere stops this
one before it writes its journal again, and this one stops a writer elsewhere at its next check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from swarm_evo.config import DEFAULT_MAX_FILE_MB
from swarm_evo.store.lease import LocationClashError, StaleCopyError, SupersededError, take_over
from swarm_evo.store.liveness import WriterAliveError, WriterState, check_writer
from swarm_evo.store.location import Store, StoreError
from swarm_evo.store.mirror import RunMirror


def is_in_place(run_dir: Path, target: Store) -> bool:
    """Whether ``run_dir`` is the store location ``target`` itself (a directory store's folder)."""
    return target.is_local and Path(target.root).resolve() == Path(run_dir).resolve()


def mirror_run(run_dir: Path, store: Store | None, run_id: str, nodes: list[str], owner: dict, *,
               max_file_mb: int = DEFAULT_MAX_FILE_MB, derived: tuple[str, ...] = (),
               on_superseded: Callable[[SupersededError], None] | None = None,
               force: bool = False, writer_state: WriterState | None = None) -> RunMirror | None:
    """Take ``STORE/runs/<run_dir's name>`` over for this run (:func:`~swarm_evo.store.lease.take_over`)
    and start mirroring ``run_dir`` there; None without a store. When ``run_dir`` is the store's
    own folder (a directory store) the mirror uploads nothing and only fences (see the module).

    Args:
        run_id: the run's identity (``journal.info["run_id"]``).
        nodes: the node ids of the local journal, in order (they must extend the store's).
        owner: :func:`~swarm_evo.store.lease.new_owner` of this process.
        derived: top-level folders of ``run_dir`` that are not mirrored: derived data every
            session rebuilds (the hidden split's view and answers, issue 41).
        force: take the location over even from a live writer (``resume --take-over``).
        writer_state: the Prefect state of a flow run by id, where the API can tell
            (:func:`~swarm_evo.store.liveness.holder_alive`).

    Raises:
        WriterAliveError: the location's writer is alive and ``force`` is not set; nothing written.
        LocationClashError: the location holds another run.
        StaleCopyError: the store's copy of this run is ahead of ``run_dir``.
        SupersededError: another process took it over at the same moment.
        StoreError: the store cannot be read or written (the message names the URL).
    """
    if store is None:
        return None
    target = store.run(Path(run_dir).name)
    in_place = is_in_place(run_dir, target)
    try:
        check_writer(target, owner, take_over=force, writer_state=writer_state)
        lease = take_over(target, run_id, nodes, owner)
    except (LocationClashError, StaleCopyError, SupersededError, WriterAliveError):
        raise
    except Exception as exc:  # the store answered check_store a moment ago; say what failed now
        raise StoreError(f"{target.url}: cannot take the run's lease ({' '.join(f'{type(exc).__name__}: {exc}'.split())})"
                         ) from None
    return RunMirror(run_dir, target, lease=lease, max_file_mb=max_file_mb, on_superseded=on_superseded,
                     derived=derived, in_place=in_place).start()
