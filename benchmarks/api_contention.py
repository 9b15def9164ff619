"""Concurrent writes against a local Prefect API on SQLite: Prefect's own ephemeral server versus
the one ``swarm-evo run`` starts (issue 16).

Starts each server (``stock``: Prefect's ``SubprocessASGIServer``; ``local``:
``flows._api_server.LocalAPIServer``, SQLite through one connection) on a fresh ``PREFECT_HOME``,
then ``--threads`` clients at once each create ``--runs`` flow runs and, per run, set it
RUNNING then COMPLETED, post five log lines and create a task run (with the flow: 1 + 5 x runs
requests per client) — what parallel steps, the
log worker and the task-run events do during a search. Requests go out through plain httpx,
without Prefect's client, so a 503 is counted instead of retried after a 2–16 s sleep::

    python benchmarks/api_contention.py [--threads 8] [--runs 15] [--servers stock,local]

Prints, per server: requests by HTTP status (``error``: a client whose request got no answer,
a reset connection; it stops), and the seconds the load took. A client whose flow cannot be
created stops too, so the stock server's counts are lower than the local one's.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_load(api_url: str, threads: int, runs: int) -> tuple[Counter, float]:
    """``threads`` clients writing at once (module docstring); the count of answers by status
    (``"error"`` for a request that got no answer) and the wall seconds of the whole load."""
    import httpx

    answers: Counter = Counter()
    lock = threading.Lock()

    def count(response: httpx.Response | None) -> None:
        with lock:
            answers[response.status_code if response is not None else "error"] += 1

    def client_work(i: int) -> None:
        with httpx.Client(base_url=api_url, timeout=120) as client:
            try:
                created_flow = client.post("/flows/", json={"name": f"load-{i % 3}"})
                count(created_flow)
                if created_flow.status_code not in (200, 201):
                    return
                flow = created_flow.json()["id"]
                for j in range(runs):
                    created = client.post("/flow_runs/", json={"flow_id": flow, "name": f"run-{i}-{j}",
                                                                "state": {"type": "PENDING"}})
                    count(created)
                    if created.status_code != 201:
                        continue
                    run = created.json()["id"]
                    for state in ("RUNNING", "COMPLETED"):
                        count(client.post(f"/flow_runs/{run}/set_state", json={"state": {"type": state}, "force": True}))
                    log = {"name": "load", "level": 20, "message": "x" * 200, "timestamp": "2026-01-01T00:00:00Z",
                           "flow_run_id": run}
                    count(client.post("/logs/", json=[log] * 5))
                    count(client.post("/task_runs/", json={"flow_run_id": run, "task_key": "load", "name": "load",
                                                            "dynamic_key": uuid.uuid4().hex, "state": {"type": "RUNNING"}}))
            except httpx.HTTPError:
                count(None)

    started = time.perf_counter()
    workers = [threading.Thread(target=client_work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers, time.perf_counter() - started


def measure(kind: str, threads: int, runs: int) -> tuple[Counter, float]:
    """Start a ``kind`` server (``stock`` or ``local``) on a fresh SQLite database in a temporary
    ``PREFECT_HOME``, put :func:`write_load` on it, stop it."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_HOME, temporary_settings

    from flows._api_server import LocalAPIServer

    with tempfile.TemporaryDirectory(prefix="swarm-evo-contention-") as home:
        with temporary_settings({PREFECT_HOME: home}):
            server = (LocalAPIServer if kind == "local" else SubprocessASGIServer)(port=_free_port())
            server.start(timeout=180)
            try:
                return write_load(server.api_url, threads, runs)
            finally:
                server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--runs", type=int, default=15, help="flow runs per thread")
    parser.add_argument("--servers", default="stock,local", help="comma-separated: stock, local")
    args = parser.parse_args()
    print(f"{args.threads} clients x {args.runs} flow runs (5 requests each) at once; {os.cpu_count()} cores")
    for kind in [k for k in args.servers.split(",") if k]:
        answers, seconds = measure(kind, args.threads, args.runs)
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(answers.items(), key=str))
        print(f"{kind:>6}: {statuses}; {seconds:.1f} s")


if __name__ == "__main__":
    main()
