"""Who owns a sweep's folders, and what a restarted sweep keeps (issue 40, items 6 and 9).

A sweep records an id when it is created, in ``OUT/sweep.json`` and, with a run store, in
``STORE/sweeps/<OUT's name>/sweep.json`` (:data:`SWEEP_FILE`)::

    {"id": "<32 hex>", "created": "<UTC ISO time>", "out_dir": "/abs/OUT", "host": "<hostname>",
     "flow_run_id": "<the benchmark-sweep flow run that created it>" | null}

- Started again with the same output folder (and store), the sweep is the same sweep: same id,
  so the same Prefect idempotency keys (flows/_sweep_deployment.py) and no run is started twice.
- A deployment flow run of ``benchmark-sweep`` restarted on another machine (its output folder
  is gone) is recognised by its flow run id in the store's ``sweep.json``.
- Anything else that finds the store's folder holding another sweep — another id, or files of
  a sweep made before ids — is a clash (:class:`~swarm_evo.sweeps.sweep.SweepError`, one line
  naming the output folder, the store and the fix), never a merge. Two output folders with the
  same last name (``/home/alice/exp/nightly``, ``/home/bob/x/nightly``) clash in one store.

:func:`finished_rows` gives the rows a restarted sweep reuses: those already in
``OUT/grading_reports.jsonl`` and ``OUT/problem_reports.jsonl``. Pure: no Prefect.
"""

from __future__ import annotations

import json
import socket
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from swarm_evo.population.journal import atomic_write_text
from swarm_evo.store import Store, put_object
from swarm_evo.sweeps.sweep import REPORTS_FILE, SweepError
from swarm_evo.sweeps.sweep_problems import PROBLEM_REPORTS_FILE

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class SweepIdentity:
    """A sweep's record (see the module): ``id`` (32 hex digits), ``created`` (UTC ISO time),
    ``out_dir`` and ``host`` where it was created, ``flow_run_id`` of the ``benchmark-sweep``
    deployment flow run that created it (None for a sweep driven by ``swarm-evo sweep``)."""

    id: str
    created: str
    out_dir: str
    host: str
    flow_run_id: str | None = None

    def describe(self) -> str:
        """``id 1a2b3c4d, output folder HOST:/abs/OUT, created TIME`` (for messages)."""
        return f"id {self.id[:8]}, output folder {self.host}:{self.out_dir}, created {self.created}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"


@dataclass(frozen=True)
class Claim:
    """What :func:`claim_sweep` found: the ``identity``, ``new`` (created now) and ``local``
    (continued from ``OUT/sweep.json``, whose rows a restart reuses)."""

    identity: SweepIdentity
    new: bool
    local: bool


def _parse(text: str | bytes, where: str) -> SweepIdentity:
    try:
        data = json.loads(text)
        return SweepIdentity(id=str(data["id"]), created=str(data.get("created", "")),
                             out_dir=str(data.get("out_dir", "")), host=str(data.get("host", "")),
                             flow_run_id=data.get("flow_run_id"))
    except (ValueError, TypeError, KeyError):
        raise SweepError(f"{where} is not a sweep record (JSON with an 'id'): move it away, or give the sweep "
                         "another output folder") from None


def read_local(out_dir: Path) -> SweepIdentity | None:
    """``OUT/sweep.json``, or None when there is none.

    Raises:
        SweepError: the file exists but is not a sweep record (names the file).
    """
    path = Path(out_dir) / SWEEP_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return _parse(text, str(path))


def read_stored(location: Store) -> SweepIdentity | None:
    """``STORE/sweeps/<name>/sweep.json``, or None when there is none.

    Raises:
        SweepError: not a sweep record; OSError and the store's own errors: the store cannot be read.
    """
    location.fs.invalidate_cache()
    try:
        data = location.fs.cat_file(location.path(SWEEP_FILE))
    except FileNotFoundError:
        return None
    return _parse(data, location.path(SWEEP_FILE))


def _holds_files(location: Store) -> bool:
    """Whether the store location holds anything (a sweep made before ids, or another use)."""
    try:
        return bool(location.fs.ls(location.root, detail=False))
    except FileNotFoundError:
        return False


def _clash(out_dir: Path, location: Store, theirs: SweepIdentity | None, out_flag: str, store_flag: str) -> SweepError:
    owner = f"another sweep ({theirs.describe()})" if theirs is not None else \
        f"files of another sweep without a {SWEEP_FILE} (made before sweeps had ids)"
    return SweepError(
        f"{out_flag} {out_dir} with {store_flag} {location.url.rsplit('/sweeps/', 1)[0]}: the store's folder for this "
        f"sweep, {location.url}, holds {owner}; a sweep's store folder is named after its output folder, so give "
        f"{out_flag} a folder with another name" + (
            f" (or continue that sweep with {out_flag} {theirs.out_dir} on {theirs.host})" if theirs else ""))


def _resolve(out_dir: Path, location: Store | None, flow_run_id: str | None, out_flag: str,
             store_flag: str) -> tuple[SweepIdentity | None, bool, bool]:
    """``(identity or None for a new sweep, from OUT, store needs the record)``; raises on a clash."""
    local = read_local(out_dir)
    stored = read_stored(location) if location is not None else None
    if local is not None:
        if location is None or (stored is not None and stored.id == local.id):
            return local, True, False
        if stored is None and not _holds_files(location):
            return local, True, True  # the store is new to this sweep (or its record was never written)
        raise _clash(out_dir, location, stored, out_flag, store_flag)
    if stored is not None:
        if flow_run_id is not None and stored.flow_run_id == flow_run_id:
            return stored, False, False  # the same deployment flow run, restarted on another machine
        raise _clash(out_dir, location, stored, out_flag, store_flag)
    if location is not None and _holds_files(location):
        raise _clash(out_dir, location, None, out_flag, store_flag)
    return None, False, location is not None


def check_sweep(out_dir: Path, location: Store | None, flow_run_id: str | None = None, *,
                out_flag: str = "out_dir", store_flag: str = "store") -> SweepIdentity | None:
    """Read-only :func:`claim_sweep`: the sweep that ``out_dir`` continues, or None for a new one.

    Raises:
        SweepError: a clash (module docstring), or a ``sweep.json`` that is not a sweep record.
    """
    return _resolve(Path(out_dir), location, flow_run_id, out_flag, store_flag)[0]


def claim_sweep(out_dir: Path, location: Store | None, flow_run_id: str | None = None, *,
                out_flag: str = "out_dir", store_flag: str = "store") -> Claim:
    """Create the sweep's record, or continue the sweep ``out_dir`` (or the store) records.

    ``OUT/sweep.json`` is written first, then the store's copy, so a sweep that dies between
    the two finds its own record and an empty store folder when started again.

    Args:
        out_dir: the sweep's output folder (created when missing).
        location: its store folder ``STORE/sweeps/<OUT's name>`` (None without a store).
        flow_run_id: the ``benchmark-sweep`` deployment flow run driving the sweep (recorded;
            recognises that flow run restarted elsewhere), None for ``swarm-evo sweep``.
        out_flag, store_flag: how the messages name the two (``--out``/``--store`` on the CLI).

    Raises:
        SweepError: a clash (one line, see the module); OSError and the store's own errors.
    """
    out_dir = Path(out_dir)
    identity, local, store_needs = _resolve(out_dir, location, flow_run_id, out_flag, store_flag)
    new = identity is None
    if identity is None:
        identity = SweepIdentity(id=uuid.uuid4().hex, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                 out_dir=str(out_dir), host=socket.gethostname(), flow_run_id=flow_run_id)
    if not local:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / SWEEP_FILE, identity.to_json())
    if store_needs and location is not None:
        put_object(location, SWEEP_FILE, identity.to_json().encode())
    return Claim(identity=identity, new=new, local=local)


def finished_rows(out_dir: Path) -> dict[str, dict]:
    """The rows of ``OUT/grading_reports.jsonl`` and ``OUT/problem_reports.jsonl`` by run name
    (the last part of the row's ``run_dir``): the runs a restarted sweep does not run again.
    Unreadable lines are skipped (the run is then polled or run again)."""
    rows: dict[str, dict] = {}
    for name in (REPORTS_FILE, PROBLEM_REPORTS_FILE):
        try:
            lines = (Path(out_dir) / name).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            try:
                row = json.loads(line)
                rows[Path(row["run_dir"]).name] = row
            except (ValueError, KeyError, TypeError):
                continue
    return rows
