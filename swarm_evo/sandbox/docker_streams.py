"""A running container seen from this host, for :class:`~swarm_evo.sandbox.docker_sandbox.DockerSandbox`:
its init process (to SIGKILL it without a round trip through the daemon) and its output
streams (attached as they are written, or read back from the capped logs)."""

from __future__ import annotations

import os
import signal
import threading
from contextlib import suppress

from .output import OutputCapture


class ContainerInit:
    """The running container's init seen from this host, to SIGKILL it without the daemon.

    ``docker kill`` is a round trip through the daemon, containerd and runc (~0.1 s measured;
    the container inspection alone 1-12 ms under load), during which a program writing to the
    page cache at GB/s adds hundreds of MB. The init is PID 1 of the container's PID namespace:
    when it dies the kernel kills every process of the container. The PID the daemon reports is
    used only when ``/proc/PID/cgroup`` names the container (a daemon in another PID namespace,
    e.g. in a VM or on a remote host, reports PIDs of its own), through a pidfd opened before
    that check, so a reused PID is never hit. Thread-safe (the watcher kills, the run opens).
    """

    def __init__(self) -> None:
        self._fd: int | None = None
        self._lock = threading.Lock()

    def open(self, container) -> None:
        """Inspect the (started) container and keep a pidfd of its init; quietly nothing if unseen."""
        with self._lock:
            if self._fd is not None:
                return
            fd = None
            try:
                container.reload()
                pid = int(container.attrs.get("State", {}).get("Pid") or 0)
                if pid <= 0:
                    return
                fd = os.pidfd_open(pid)
                with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as fh:
                    if container.id in fh.read():
                        self._fd, fd = fd, None
            except Exception:  # noqa: BLE001 - no answer, no such process, not ours: the daemon kills
                pass
            finally:
                if fd is not None:
                    os.close(fd)

    def kill(self) -> bool:
        """SIGKILL the init if it was seen; whether the signal was sent."""
        with self._lock:
            if self._fd is None:
                return False
            try:
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)
                return True
            except OSError:  # already gone
                return False

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def attach_streams(container, out: OutputCapture, err: OutputCapture) -> threading.Thread | None:
    """Attach to the (created, not started) container; a thread feeds its stdout/stderr frames
    into ``out``/``err`` until the container stops. None when attaching fails (the caller then
    reads the capped json-file logs); the thread's ``failed`` is set if the stream broke."""
    try:
        stream = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=True)
    except Exception:  # noqa: BLE001 - any failure falls back to the logs
        return None

    def run() -> None:
        try:
            for chunk_out, chunk_err in stream:
                if chunk_out:
                    out.feed(chunk_out)
                if chunk_err:
                    err.feed(chunk_err)
        except Exception:  # noqa: BLE001
            thread.failed = True
        finally:
            with suppress(Exception):
                stream.close()

    thread = threading.Thread(target=run, name="docker-attach", daemon=True)
    thread.failed = False
    thread.start()
    return thread


def logs_capture(container, max_bytes: int) -> tuple[OutputCapture, OutputCapture]:
    """The container's (capped) json-file logs as captures: the fallback of :func:`attach_streams`."""
    out, err = OutputCapture(max_bytes), OutputCapture(max_bytes)
    for capture, streams in ((out, dict(stdout=True, stderr=False)), (err, dict(stdout=False, stderr=True))):
        for chunk in container.logs(stream=True, **streams):
            capture.feed(chunk)
    return out, err
