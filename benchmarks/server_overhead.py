"""Orchestration per node on the server a person starts for the UI (issue 54, item 6): Prefect's
stock ``prefect server start`` on SQLite, the project's ``deployments/local_server.py`` (the same
server, SQLite through one connection) and a run's own ephemeral API, with 2 workers and failing
programs.

Every run is the same search (competition, seed, budget, offline model with ``--fault-rate``
planted bugs and ``--repair-rate`` repairs: debug attempts and dead nodes, so failed task runs,
debug subflows, node pages and WARNING logs), in its own process (``benchmarks/_search_run.py``)
on a fresh database. ``stock`` and ``project`` start their server as a separate process on a free
port with a ``PREFECT_HOME`` of its own (the full server: UI and every service, as a person runs
it) and point the run at it (``PREFECT_API_URL``); ``ephemeral`` is what a ``swarm-evo run``
without ``PREFECT_API_URL`` starts (``flows._api_server.LocalAPIServer``: no UI, the ephemeral
services only)::

    python benchmarks/server_overhead.py [--competition-id sklearn-breast-cancer] [--max-steps 12]
        [--workers 2] [--fault-rate 0.6] [--repair-rate 0.5] [--repeats 2]
        [--configs ephemeral,stock,project]

Per configuration (pooled over the repeats):

- ``in-step``: mean ``timings.orchestration`` of the nodes (step body wall − LLM − execution:
  task runs, debug subflows, artifacts, journal).
- ``lane s/node``: (workers × search window − Σ execution) / nodes: the execution-lane seconds per
  node in which no program ran (the offline model answers in milliseconds, so this is the
  orchestration: step subflows, task runs, debug subflows, artifacts, the journal, lanes waiting
  for any of them), the orchestration per node with the steps overlapping. ``in-step`` is measured
  inside each step and also counts a step's wait for a free execution lane (the scheduler keeps
  more steps in flight than lanes), so it is larger than ``lane s/node``.
- ``search s/node``: search window / nodes; ``retries``: requests the Prefect client sent again
  after a 503 ("database is locked" on SQLite) and the back-off it slept per node.

The ratio to ``ephemeral`` of ``lane s/node`` is the figure issue 54 asks for (goal ≤ 1.5×).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _search_run import REPO, add_search_arguments, ensure_data, load_text, spawn

LABELS = {
    "ephemeral": "run's ephemeral API",
    "stock": "prefect server start",
    "project": "local_server.py",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def server(config: str, home: Path, log: Path):
    """The API URL of a server for ``config`` (``stock``: ``prefect server start``; ``project``:
    ``deployments/local_server.py``) on a free port and a fresh ``PREFECT_HOME``; stopped after.
    None for ``ephemeral`` (the run starts its own)."""
    if config == "ephemeral":
        yield None
        return
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_API_PORT=str(port), PREFECT_SERVER_UI_API_URL=f"http://127.0.0.1:{port}/api")
    prefect = Path(sys.executable).with_name("prefect")
    cmd = ([str(prefect), "server", "start"] if config == "stock"
           else [sys.executable, str(REPO / "deployments" / "local_server.py")]) + ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as handle:
        proc = subprocess.Popen(cmd, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{config} server did not start; see {log}")
            time.sleep(0.5)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stats(results: list[dict], workers: int) -> dict:
    """Pooled per-node numbers of one configuration's repetitions."""
    nodes = sum(r["nodes"] for r in results)
    busy = sum(sum(r["exec"]) for r in results)
    window = sum(r["search_seconds"] for r in results)
    return {
        "nodes": nodes,
        "in_step": statistics.fmean(x for r in results for x in r["orchestration"]),
        "lane": (workers * window - busy) / nodes,
        "search": window / nodes,
        "debug": sum(r["debug_attempts"] for r in results),
        "dead": sum(r["nodes"] - r["valid"] for r in results),
        "retries": sum(r.get("api_retries") or 0 for r in results),
        "retry_s": sum(r.get("api_retry_seconds") or 0.0 for r in results) / nodes,
        "runs": [round((workers * r["search_seconds"] - sum(r["exec"])) / r["nodes"], 3) for r in results],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_search_arguments(parser, max_steps_help="budget")
    parser.set_defaults(repeats=2)
    parser.add_argument("--workers", type=int, default=2, help="parallel_workers")
    parser.add_argument("--fault-rate", type=float, default=0.6, help="offline model: chance of a planted bug")
    parser.add_argument("--repair-rate", type=float, default=0.5, help="offline model: chance a debug repairs it")
    parser.add_argument("--configs", default="ephemeral,stock,project", help="comma-separated: " + ", ".join(LABELS))
    parser.add_argument("--keep", type=Path, default=None, help="keep runs and logs in this directory")
    parser.add_argument("--table-only", type=Path, default=None, help="reprint the table of a --keep directory")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    if unknown := set(configs) - set(LABELS):
        parser.error(f"unknown configurations {sorted(unknown)}; use {', '.join(LABELS)}")
    if args.table_only:
        found = {c: [json.loads(p.read_text()) for p in sorted(args.table_only.glob(f"{c}-r*.json"))] for c in configs}
        print_table({c: r for c, r in found.items() if r}, args.workers)
        return
    with tempfile.TemporaryDirectory(prefix="swarm-evo-server-") as tmp:
        scratch = (args.keep or Path(tmp)).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        data_dir = ensure_data(args.competition_id, args.data_dir, args.raw_dir, scratch).resolve()
        print(f"orchestration per node by API server: {args.competition_id}, seed {args.seed}, {args.max_steps} steps, "
              f"parallel_workers {args.workers}, offline model (fault_rate {args.fault_rate}, repair_rate "
              f"{args.repair_rate}), {args.repeats} run(s) per configuration")
        print(f"machine: {os.cpu_count()} cores; load average (1/5/15 min) before: {load_text()}")
        results: dict[str, list[dict]] = {c: [] for c in configs}
        for rep in range(args.repeats):
            for config in configs:
                label = f"{config}-r{rep}"
                try:
                    with server(config, scratch / f"{label}-server-home", scratch / f"{label}-server.log") as url:
                        result = spawn(label, scratch, mode="prefect", heartbeats="on", subflow_heartbeats="off",
                                       api_url=url, competition_id=args.competition_id, data_dir=data_dir,
                                       max_steps=args.max_steps, seed=args.seed, parallel_workers=args.workers,
                                       fault_rate=args.fault_rate, repair_rate=args.repair_rate)
                except RuntimeError as exc:
                    result = {"error": str(exc), "log_tail": [], "log": ""}
                if "error" in result:
                    print(f"  {LABELS[config]} run {rep + 1} failed ({result['error']}); log {result['log']}:")
                    print("\n".join(f"    {line}" for line in result["log_tail"]))
                    continue
                one = _stats([result], args.workers)
                print(f"  {LABELS[config]:<22} run {rep + 1}: {result['nodes']} nodes ({one['dead']} not valid, "
                      f"{one['debug']} debug attempts), search {result['search_seconds']:.1f} s, in-step "
                      f"{one['in_step']:.3f} s/node, lane {one['lane']:.3f} s/node, API retries "
                      f"{result.get('api_retries', 0)}, load average after {result['loadavg_after'][0]:.2f}")
                results[config].append(result)
        print(f"load average after: {load_text()}")
        print_table(results, args.workers)


def print_table(results: dict[str, list[dict]], workers: int) -> None:
    """The per-configuration table and the ratios to the ephemeral API."""
    stats = {c: _stats(r, workers) for c, r in results.items() if r}
    print()
    print(f"{'server':<24}{'nodes':>6}{'in-step':>9}{'lane s/node':>13}{'search s/node':>15}{'debug':>7}"
          f"{'retries':>9}{'retry s/node':>14}  per run (lane s/node)")
    for config, s in stats.items():
        print(f"{LABELS[config]:<24}{s['nodes']:>6}{s['in_step']:>9.3f}{s['lane']:>13.3f}{s['search']:>15.3f}"
              f"{s['debug']:>7}{s['retries']:>9}{s['retry_s']:>14.3f}  {s['runs']}")
    if "ephemeral" in stats:
        base = stats["ephemeral"]
        for config in ("stock", "project"):
            if config in stats:
                s = stats[config]
                print(f"{LABELS[config]} / ephemeral API: lane {s['lane'] / base['lane']:.2f}x, "
                      f"in-step {s['in_step'] / base['in_step']:.2f}x, search {s['search'] / base['search']:.2f}x")


if __name__ == "__main__":
    main()
