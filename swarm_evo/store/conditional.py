"""Conditional writes of a run's history: the journal lands only over the version its writer last
saw (issue 40, items 2 and 3: one writer per location, the store never goes back).

The lease (:mod:`.lease`) is checked right before every upload, but no check stops the upload
already under way when a machine freezes, nor the one whose check came just before the freeze:
seen in CI, such an upload landed the moment the machine thawed, minutes after the run had been
resumed elsewhere. Were it the journal, the store would hold the old history again. S3 evaluates
``If-Match`` / ``If-None-Match`` on a PUT when the write completes ("conditional writes", AWS S3
since 2024-11; SeaweedFS 4.48 does the same, checked here with an 800 MB PUT frozen by
SIGSTOP, refused with 412 after another writer wrote): the writer sends the ETag of the journal it
last wrote or read, and the store itself refuses a journal written over one it has not seen.

Only S3 stores take conditions here (``s3fs``; other fsspec file systems have no common way to
send them): a directory store, GCS or an SFTP store keep the lease alone, with the window above.
A store that answers a condition with ``NotImplemented`` (an S3 gateway without conditional
writes) is written unconditionally, with one warning.
"""

from __future__ import annotations

import errno
import logging

from swarm_evo.store.lease import Lease, check_lease
from swarm_evo.store.location import Store

logger = logging.getLogger(__name__)

SINGLE_PUT_BYTES = 5 * 2**30
"""S3's largest single PUT (5 GiB): a larger object goes up in parts, unconditionally."""

CONFLICT_ATTEMPTS = 3
"""Conditional writes of one file refused in a row while the lease stayed the writer's."""

ABSENT = None
"""The ETag of an object that does not exist: a write then asks ``If-None-Match: *``."""


class VersionConflict(OSError):
    """The store's object is no longer the version the writer named (another writer wrote it)."""


class ConditionsUnsupported(OSError):
    """The store does not take conditional writes (``NotImplemented``)."""


def takes_conditions(store: Store) -> bool:
    """Whether writes to ``store`` can carry ``If-Match`` / ``If-None-Match`` (an S3 store)."""
    return "s3" in _protocols(store)


def etag_of(store: Store, rel: str) -> str | None:
    """The store's ETag of ``rel`` as it is now (cache bypassed), or :data:`ABSENT`.

    Raises:
        OSError and the store's own errors: the store cannot be read.
    """
    path = store.path(rel)
    store.fs.invalidate_cache(path)
    try:
        info = store.fs.info(path)
    except FileNotFoundError:
        return ABSENT
    etag = info.get("ETag") or info.get("etag")
    return str(etag) if etag else ABSENT


def put_if(store: Store, rel: str, data: bytes, etag: str | None) -> str | None:
    """Write ``data`` to ``rel`` only if the store's object is still ``etag`` (:data:`ABSENT`: only
    if there is none); returns the new ETag (None when the store did not say).

    Raises:
        VersionConflict: the object changed (HTTP 412 ``PreconditionFailed``, 409
            ``ConditionalRequestConflict``): nothing was written.
        ConditionsUnsupported: the store answers ``NotImplemented``.
        OSError and the store's own errors: the write failed otherwise.
    """
    condition = {"IfMatch": etag} if etag is not ABSENT else {"IfNoneMatch": "*"}
    if len(data) >= SINGLE_PUT_BYTES:
        raise ConditionsUnsupported(errno.EFBIG, f"{len(data):,} bytes: over one PUT, which alone takes conditions")
    try:  # one PUT whatever the size (s3fs splits at 2 chunks; a multipart upload takes no If-Match here)
        response = store.fs.pipe_file(store.path(rel), data, chunksize=len(data) + 1, **condition)
    except OSError as exc:
        if _is_conflict(exc):
            raise VersionConflict(errno.EEXIST, f"{store.path(rel)} changed since ETag {etag}") from exc
        if exc.errno == errno.ENOSYS:
            raise ConditionsUnsupported(errno.ENOSYS, str(exc)) from exc
        raise
    return (response or {}).get("ETag") if isinstance(response, dict) else None


def _is_conflict(exc: OSError) -> bool:
    if isinstance(exc, FileExistsError):  # s3fs's translation of a failed If-None-Match
        return True
    response = getattr(exc.__cause__, "response", None) or {}
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def _protocols(store: Store) -> set[str]:
    protocol = store.fs.protocol
    return {protocol} if isinstance(protocol, str) else set(protocol)


class HistoryWrites:
    """One writer's conditional writes of its history files (the journal, ``result.json``) to the
    store location ``target``, holding ``lease`` (None: no lease to read): the ETag it last wrote
    or read per file, and what a refusal means.

    A refusal is read against the lease: another writer's lease means this writer was superseded
    (:class:`~swarm_evo.store.lease.SupersededError`); its own lease means a superseded writer's
    late upload landed before this writer's first write, which then writes over it.
    """

    def __init__(self, target: Store, lease: Lease | None = None) -> None:
        self.target = target
        self.lease = lease
        self.enabled = takes_conditions(target)
        self._etags: dict[str, str | None] = {}

    def put(self, rel: str, data: bytes) -> bool:
        """Write ``data`` to ``rel`` over the version this writer last saw; False (nothing written)
        when the store takes no conditions: the caller writes it as any other file.

        Raises:
            SupersededError: the store refused it and the lease is another writer's.
            OSError and the store's own errors: the write failed (refused
                :data:`CONFLICT_ATTEMPTS` times in a row while the lease held, or otherwise).
        """
        for _ in range(CONFLICT_ATTEMPTS if self.enabled else 0):
            if rel not in self._etags:
                self._etags[rel] = etag_of(self.target, rel)
            try:
                etag = put_if(self.target, rel, data, self._etags[rel])
            except VersionConflict:
                self._etags.pop(rel, None)
                if self.lease is not None:
                    check_lease(self.target, self.lease)  # raises when another writer holds it
                continue
            except ConditionsUnsupported as exc:
                logger.warning("the store %s takes no conditional writes (%s): the journal is written without "
                               "them, guarded by the lease alone", self.target.url, exc)
                self.enabled = False
                break
            if etag is None:
                self._etags.pop(rel, None)  # the store named none: read it before the next write
            else:
                self._etags[rel] = etag
            return True
        if self.enabled:
            raise OSError(f"{self.target.path(rel)} changed under this writer {CONFLICT_ATTEMPTS} times in a row "
                          "while its lease held; the next sync tries again")
        return False
