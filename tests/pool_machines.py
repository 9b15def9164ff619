"""Many machines on one machine, the parts the tests and benchmarks/sweep_pool.py share: Prefect's
server on PostgreSQL started by deployments/start-prefect-server.sh, and ``prefect worker``
processes each in a mount namespace of its own (``unshare -m``) with private tmpfs folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "deployments" / "start-prefect-server.sh"
HEARTBEAT = 30  # Prefect 3.8.8's minimum PREFECT_FLOWS_HEARTBEAT_FREQUENCY
POOL = "swarm-evo-process"  # the work pool of prefect.yaml's two-phase-evo/default


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without Prefect settings, the venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PREFECT_HOME=str(home),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", PYTHONPATH=str(ROOT), **extra)
    return env


@contextlib.contextmanager
def prefect_pg_server():
    """PostgreSQL and Prefect's server on it, from deployments/start-prefect-server.sh, on free ports of
    127.0.0.1; ``{"api_url", "dir", "env"}``, ``env`` with what clients need: ``PREFECT_API_URL`` and
    ``PREFECT_API_AUTH_STRING`` (the credentials the script keeps in ``dir/prefect-api-auth``). The state
    directory is under /tmp (as root the cluster belongs to the ``postgres`` user, who cannot enter
    pytest's 0700 tmp directories)."""
    state = Path(tempfile.mkdtemp(prefix="swarm-evo-pg-"))
    port, pg_port = free_port(), free_port()
    env = child_env(state / "prefect-home", SWARM_EVO_SERVER_DIR=str(state), SWARM_EVO_PG_PORT=str(pg_port),
                     SWARM_EVO_SERVER_HOST="127.0.0.1", SWARM_EVO_SERVER_PORT=str(port))
    api_url = f"http://127.0.0.1:{port}/api"
    log = open(state / "server.out", "w")
    proc = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{api_url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not come up: {(state / 'server.out').read_text()[-3000:]}")
            time.sleep(0.5)
        auth = (state / "prefect-api-auth").read_text().strip()
        yield {"api_url": api_url, "dir": state, "env": dict(env, PREFECT_API_URL=api_url, PREFECT_API_AUTH_STRING=auth)}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        subprocess.run(["bash", str(SCRIPT), "--stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(state, ignore_errors=True)


def start_worker(name: str, env: dict, private: list[Path], log: Path, limit: int = 1,
                 queue: str | None = None) -> subprocess.Popen:
    """``prefect worker start --pool POOL`` in a new mount namespace whose ``private`` folders are
    empty tmpfs (its own scratch, cache and output: a machine with no shared disk), from ROOT;
    with ``queue``, it takes only the flow runs of that work queue of the pool.

    The program environment (``.venv-programs``, when built) is hidden there too, as
    tests/conftest.py hides it for the suite: the workers' runs run their programs with the
    project's interpreter (quick scikit-learn programs instead of LightGBM/CatBoost ones; what
    these tests check is the pool, not the programs)."""
    from conftest import BUILT_PROGRAM_ENV  # the real one: the session patches program_env's

    hidden = [BUILT_PROGRAM_ENV] if BUILT_PROGRAM_ENV.is_dir() else []
    mounts = " && ".join(f"mount -t tmpfs -o size=512m tmpfs {p}" for p in [*private, *hidden])
    command = ((f"{mounts} && " if mounts else "") + f"exec {Path(sys.executable).parent / 'prefect'} worker start "
               f"--pool {POOL} --name {name} --limit {limit}" + (f" --work-queue {queue}" if queue else ""))
    with log.open("w") as fh:
        return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", command], env=env,
                                cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def seen_by(process: subprocess.Popen, path: Path) -> Path:
    """``path`` as the process sees it (its mount namespace): ``/proc/<pid>/root/<path>``."""
    return Path(f"/proc/{process.pid}/root") / path.relative_to("/")


def kill_tree(process: subprocess.Popen) -> list[int]:
    """SIGKILL the process and every descendant (a worker and its flow run processes)."""
    try:
        parent = psutil.Process(process.pid)
        victims = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return []
    for victim in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            victim.kill()
    process.wait()
    return [v.pid for v in victims]


def deploy_default(env: dict, *more: str) -> str:
    """``swarm-evo pool setup`` (pool + zombie automation) and ``prefect deploy -n two-phase-evo/default``
    (and the deployments ``more`` names, e.g. ``benchmark-sweep/nightly``); returns what ``pool
    setup`` printed (on a fresh server: the pool and the automation "created").

    Raises:
        RuntimeError: either command failed (its output in the message).
    """
    names = [arg for name in ("two-phase-evo/default", *more) for arg in ("-n", name)]
    printed = []
    for args in ([sys.executable, "-m", "swarm_evo.cli", "pool", "setup", "--pool", POOL],
                 [str(Path(sys.executable).parent / "prefect"), "--no-prompt", "deploy", *names]):
        done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args[-4:])}: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        printed.append(done.stdout)
    return printed[0]


def flow_processes(worker: subprocess.Popen) -> list[psutil.Process]:
    """The processes a worker started (its flow runs and their programs), not the worker itself."""
    try:
        return psutil.Process(worker.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def signal_all(processes: list[psutil.Process], sig: int) -> None:
    """Send ``sig`` to each process still alive (SIGSTOP: a frozen machine; SIGCONT: it thaws)."""
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)


FOREIGN_FLOW = """
import sys, time
from prefect import flow

@flow(name="another-teams-flow")
def another_teams_flow(seconds: float) -> str:
    time.sleep(seconds)
    return "done"

another_teams_flow(float(sys.argv[1]))
"""
"""A flow of another team on the same server: untagged, Prefect's default heartbeats (every 180 s)."""
