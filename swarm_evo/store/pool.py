"""The pool backend's store half (issue 52, items 4 and 5): what travels between a run and the
worker that executes one of its programs, without Prefect (the flow run that carries it is
``flows/execute_program.py``; the host's sandbox that submits it is ``flows/pool_sandbox.py``).
It is the store's business: the sandbox package sits below the store and knows nothing of it.

Everything goes through the run store (``store.url``), under ``STORE/pool/``::

    data/<digest>/files/...            the public data a run's programs see (the competition's public
    data/<digest>/manifest.json        folder, or the run's hidden-split view), uploaded once per
                                       digest; the manifest is written last (its presence = complete)
    executions/<run id>/<key>/in/...   the node directory's files before the execution
    executions/<run id>/<key>/beat.json    the worker's heartbeat (a counter, every BEAT_SECONDS)
    executions/<run id>/<key>/out/...  the node directory's files after it (bounded like the mirror's)
    executions/<run id>/<key>/result.json  written last: the ExecutionResult, who ran it, the file list

Each try of an execution has a fresh ``key``: a late result of a worker declared dead is never
read. ``input/`` and ``working/`` (scratch) never travel; the private answers never leave the host
(only the folder the program sees is uploaded). A worker keeps the data in its cache,
``<data cache>/pool/<digest>/`` (:func:`swarm_evo.store.data.data_cache_root`), one download per
worker and digest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

from swarm_evo.sandbox.base import INPUT_DIR, WORKING_DIR, ExecutionResult, SandboxUnavailableError
from swarm_evo.store.location import Store, open_store, put_object

POOL_DIR = "pool"
MANIFEST_FILE = "manifest.json"
RESULT_FILE = "result.json"
BEAT_FILE = "beat.json"
EXECUTED_BY_FILE = "executed_by.json"
"""Written by the host into the node directory after a pool execution: who ran it (the journal's
``metadata.executed_by``)."""
SCRATCH = (INPUT_DIR, WORKING_DIR)
"""Top-level folders of a node directory that never travel."""
MAX_FILE_BYTES = 256 * 1024 * 1024
"""Largest file that travels either way; larger ones are left out (and listed in ``left_out``)."""
BEAT_SECONDS = 2.0
"""How often a worker writes its heartbeat while a program runs."""
WORKER_ENV = "SWARM_EVO_WORKER"
"""Names the worker in ``executed_by`` (default: the host's name), e.g. several workers on one host."""


class PoolUnavailableError(SandboxUnavailableError):
    """The pool cannot run the execution: no worker took it within ``sandbox.pool_wait``, or the
    workers that took it died more often than the retries allow. The run stops (resumable)."""


# ------------------------------------------------------------------------------------ the data
_DIGESTS: dict[tuple, str] = {}
_DIGEST_LOCK = threading.Lock()


def _listing(folder: Path) -> list[tuple[str, Path, int, int]]:
    """``(relative name, path, size, mtime_ns)`` of the regular files under ``folder``, links followed
    (a competition's public folder may be a link into the data cache), sorted."""
    rows = []
    for root, _dirs, files in os.walk(folder, followlinks=True):
        for name in files:
            path = Path(root) / name
            st = path.stat()
            rows.append((path.relative_to(folder).as_posix(), path, st.st_size, st.st_mtime_ns))
    return sorted(rows)


def data_digest(folder: Path) -> str:
    """The content digest (sha256 hex) of the files under ``folder``: names and bytes. Computed once
    per process and listing (names, sizes, mtimes).

    Raises:
        OSError: the folder cannot be read.
    """
    folder = Path(folder)
    rows = _listing(folder)
    signature = (str(folder.resolve()), tuple((r, s, m) for r, _p, s, m in rows))
    with _DIGEST_LOCK:
        if signature in _DIGESTS:
            return _DIGESTS[signature]
    digest = hashlib.sha256()
    for rel, path, _size, _mtime in rows:
        digest.update(rel.encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    value = digest.hexdigest()
    with _DIGEST_LOCK:
        _DIGESTS[signature] = value
    return value


def data_location(store: Store, digest: str) -> Store:
    """``STORE/pool/data/<digest>``."""
    return store.child(POOL_DIR, "data", digest)


def upload_data(store: Store, folder: Path) -> str:
    """Upload ``folder`` (what programs see as ``input/``) to ``STORE/pool/data/<digest>/`` unless it
    is there (its manifest); the digest.

    Raises:
        OSError and the store's own errors: the folder or the store cannot be read or written.
    """
    digest = data_digest(folder)
    location = data_location(store, digest)
    if location.fs.exists(location.path(MANIFEST_FILE)):
        return digest
    made: set[str] = set()
    files = {}
    for rel, path, size, _mtime in _listing(Path(folder)):
        with path.open("rb") as fh:
            put_object(location, f"files/{rel}", fh, made)
        files[rel] = size
    put_object(location, MANIFEST_FILE, json.dumps({"files": files}).encode(), made)
    return digest


def fetch_data(store: Store, digest: str, cache_root: Path) -> Path:
    """The data of ``digest`` on this worker: ``cache_root/pool/<digest>/``, downloaded once (into a
    temporary folder renamed into place, so concurrent executions see a whole folder or none).

    Raises:
        SandboxUnavailableError: the store has no such data (its manifest is missing).
        OSError and the store's own errors: the store or the cache cannot be read or written.
    """
    target = Path(cache_root) / POOL_DIR / digest
    if target.is_dir():
        return target
    location = data_location(store, digest)
    try:
        manifest = json.loads(location.fs.cat_file(location.path(MANIFEST_FILE)))
    except FileNotFoundError:
        raise SandboxUnavailableError(f"{location.url} has no {MANIFEST_FILE}: the run's data never reached the "
                                      "store (the run uploads it before its first execution)") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=target.parent))
    try:
        for rel in manifest["files"]:
            dest = partial / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            location.fs.get_file(location.path(f"files/{rel}"), str(dest))
            dest.chmod(0o644)  # programs run as nobody: readable by all, as the data cache's files
        for folder in [partial, *(p for p in partial.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)  # mkdtemp made it 0700
        try:
            partial.rename(target)
        except OSError:  # another execution of this worker got there first
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


# ------------------------------------------------------------------------------------ the files
def node_files(workdir: Path) -> tuple[dict[str, Path], list[str]]:
    """The files of a node directory that travel: ``({relative name: path}, left out)``: regular
    files only (no link is followed), none under ``input/`` or ``working/``, none over
    :data:`MAX_FILE_BYTES`."""
    files: dict[str, Path] = {}
    left_out: list[str] = []
    workdir = Path(workdir)
    if not workdir.is_dir():
        return files, left_out
    for root, dirs, names in os.walk(workdir):
        here = Path(root)
        if here == workdir:
            dirs[:] = [d for d in dirs if d not in SCRATCH]
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
        for name in names:
            path = here / name
            rel = path.relative_to(workdir).as_posix()
            with contextlib.suppress(OSError):
                st = path.lstat()
                if not path.is_symlink() and path.is_file():
                    if st.st_size > MAX_FILE_BYTES:
                        left_out.append(rel)
                    else:
                        files[rel] = path
    return files, sorted(left_out)


def upload_files(location: Store, prefix: str, files: dict[str, Path]) -> list[str]:
    """Put ``files`` under ``location/prefix/``; their names, sorted."""
    made: set[str] = set()
    for rel, path in files.items():
        with path.open("rb") as fh:
            put_object(location, f"{prefix}/{rel}", fh, made, limit=MAX_FILE_BYTES)
    return sorted(files)


def download_files(location: Store, prefix: str, names: list[str], workdir: Path) -> None:
    """Get ``location/prefix/<name>`` into ``workdir/<name>`` for each name (each replaced whole;
    a name that would leave ``workdir`` is refused)."""
    workdir = Path(workdir)
    for rel in names:
        dest = (workdir / rel)
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ValueError(f"refused file name {rel!r} in a pool result")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.is_dir():
            shutil.rmtree(dest, ignore_errors=True) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
        tmp = dest.with_name(f".{dest.name}.pool-{uuid.uuid4().hex[:8]}")
        location.fs.get_file(location.path(f"{prefix}/{rel}"), str(tmp))
        os.replace(tmp, dest)


def execution_location(store: Store, run_id: str, key: str) -> Store:
    """``STORE/pool/executions/<run id>/<key>``."""
    return store.child(POOL_DIR, "executions", run_id, key)


def read_json(location: Store, name: str) -> dict | None:
    """``location/name`` parsed, or None when it is not there, not yet whole, or the store did not
    answer this time (the callers poll)."""
    try:
        return json.loads(location.fs.cat_file(location.path(name)))
    except (OSError, ValueError):
        return None


def bind_pool(sandbox, run_id: str | None, mirror=None) -> None:
    """Tie a pool sandbox to its run (its id; with ``mirror``, its store lease): a no-op for
    every other backend."""
    bind = getattr(sandbox, "bind_run", None)
    if bind is not None:
        bind(run_id or "run", mirror)


def read_executed_by(node_dir: Path) -> dict | None:
    """Who ran the last pool execution of a node (:data:`EXECUTED_BY_FILE`): in ``node_dir`` (a
    competition's execution) or the newest under it (a problem's evaluation runs in
    ``results/run-<n>/`` and ``auxiliary/``); None when no pool execution ran there."""
    found = []
    for root, dirs, files in os.walk(Path(node_dir)):
        dirs[:] = [d for d in dirs if d not in SCRATCH]
        if EXECUTED_BY_FILE in files:
            path = Path(root) / EXECUTED_BY_FILE
            with contextlib.suppress(OSError):
                found.append((path.stat().st_mtime_ns, path))
    for _mtime, path in sorted(found, reverse=True):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return None


def worker_identity(flow_run_id: str | None = None, flow_run_name: str | None = None) -> dict:
    """``{"worker", "host", "pid", "flow_run_id", "flow_run_name"}`` of this process (``worker``:
    ``$SWARM_EVO_WORKER``, else the host's name)."""
    host = socket.gethostname()
    return {"worker": os.environ.get(WORKER_ENV) or host, "host": host, "pid": os.getpid(),
            "flow_run_id": flow_run_id, "flow_run_name": flow_run_name}


# ------------------------------------------------------------------------------------ the worker
class Heartbeat:
    """Writes ``{"beat": n}`` to ``location/beat.json`` every :data:`BEAT_SECONDS` until stopped (a
    counter, not a time: the host compares it with its own clock)."""

    def __init__(self, location: Store, seconds: float = BEAT_SECONDS) -> None:
        self.location, self.seconds = location, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pool-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        n = 0
        while True:
            n += 1
            with contextlib.suppress(Exception):  # a store hiccup: the next beat tries again
                put_object(self.location, BEAT_FILE, json.dumps({"beat": n}).encode())
            if self._stop.wait(self.seconds):
                return


def run_on_worker(sandbox, store: Store, *, run_id: str, key: str, code: str, data_digest_: str,
                  timeout: float, lease: dict | None, identity: dict, cache_root: Path) -> dict:
    """The worker's half of one execution: check that the run's writer still holds its lease,
    fetch the data (cached), lay out the node directory's files in a fresh folder, run ``code``
    in ``sandbox``, upload the folder's files and ``result.json`` (last). Returns what it wrote
    in ``result.json``: ``{"result": ExecutionResult dict | None, "files", "left_out",
    "executed_by", "superseded": reason | None}``.

    Raises:
        SandboxError: the worker's own sandbox failed (the host retries on another worker).
        OSError and the store's own errors: the store cannot be read or written.
    """
    from swarm_evo.store.lease import Lease, SupersededError, check_lease

    location = execution_location(store, run_id, key)
    out: dict = {"result": None, "files": [], "left_out": [], "executed_by": identity, "superseded": None}
    if lease:
        try:
            check_lease(open_store(lease["url"]), Lease(run_id=run_id, generation=lease["generation"],
                                                        owner={"token": lease["token"]}))
        except SupersededError as exc:
            out["superseded"] = str(exc)
            put_object(location, RESULT_FILE, json.dumps(out).encode())
            return out
    with Heartbeat(location), tempfile.TemporaryDirectory(prefix="swarm-evo-pool-") as tmp:
        public = fetch_data(store, data_digest_, cache_root)
        workdir = Path(tmp) / key
        workdir.mkdir()
        inbound = read_json(location, "in.json") or {"files": []}
        download_files(location, "in", inbound["files"], workdir)
        result: ExecutionResult = sandbox.execute(code, workdir, public, timeout)
        files, left_out = node_files(workdir)
        out.update(result=result.model_dump(mode="json"), files=upload_files(location, "out", files),
                   left_out=left_out, finished=time.time())
        put_object(location, RESULT_FILE, json.dumps(out).encode())
    return out
