"""What mirroring a run to the run store costs per node, and how far the store lags (issue 34).

A synthetic run grows node by node with a real run's file sizes (solution.py 6 KB, stdout and
stderr 2 KB, two prompts 12 KB each, a spaceship-titanic-sized submission 60 KB, and a journal
that grows by the node's JSON, code included: 8 KB a node). For each store, a local directory and
SeaweedFS's S3 gateway (started here, as the tests do):

- ``sync ms/node``: one :meth:`RunMirror.sync_once` after each append, median and p90, with the
  journal (the biggest file late in a run) included; without and with the location's lease
  (issue 40: a writer reads ``lease.json`` before each sync and again before the journal);
- ``lag``: with the background thread and ``request()`` after each append, every
  ``--interval`` seconds (default 0.2 s, far faster than a real run's steps), how many nodes the
  store's journal is behind the local one at the moment of the next append (max and mean).

Run: ``.venv/bin/python benchmarks/store_mirror.py [--nodes 100] [--interval 0.2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from object_store import SeaweedFS  # noqa: E402

from swarm_evo.store import RunMirror, open_store  # noqa: E402
from swarm_evo.store.lease import new_owner, take_over  # noqa: E402

SIZES = {"solution.py": 6_000, "stdout.txt": 2_000, "stderr.txt": 2_000, "prompt-draft.md": 12_000,
         "prompt-review.md": 12_000, "submission/submission.csv": 60_000}
NODE_JSON = 8_000


def _append(run_dir: Path, i: int, journal: list) -> None:
    node = run_dir / "nodes" / f"node-{i:04d}"
    for name, size in SIZES.items():
        path = node / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size // 2).hex().encode())
    journal.append({"id": node.name, "code": "x" * NODE_JSON})
    tmp = run_dir / ".journal.json.tmp"
    tmp.write_text(json.dumps({"info": {}, "nodes": journal}))
    os.replace(tmp, run_dir / "journal.json")


def _store_nodes(store, name: str) -> int:
    run = store.run(name)
    run.fs.invalidate_cache()
    try:
        return len(json.loads(run.fs.cat_file(run.path("journal.json")))["nodes"])
    except FileNotFoundError:
        return 0


def sync_costs(store, nodes: int, work: Path, lease: bool) -> list[float]:
    """ms of one synchronous sync after each of ``nodes`` appends, in append order."""
    run_dir, journal = work / f"sync-{time.time_ns()}", []
    target = store.run(run_dir.name)
    mirror = RunMirror(run_dir, target, lease=take_over(target, run_dir.name, [], new_owner()) if lease else None)
    costs = []
    for i in range(nodes):
        _append(run_dir, i, journal)
        started = time.perf_counter()
        mirror.sync_once()
        costs.append((time.perf_counter() - started) * 1000)
    return costs


def measure(store_url: str, nodes: int, interval: float, work: Path) -> dict:
    store = open_store(store_url)
    # per-node cost, synchronous, without and with the lease
    costs = sync_costs(store, nodes, work, lease=False)
    leased = sync_costs(store, nodes, work, lease=True)
    # lag, background thread
    run_dir, journal = work / f"lag-{time.time_ns()}", []
    run_dir.mkdir()  # as a run's directory exists before its mirror starts
    mirror = RunMirror(run_dir, store.run(run_dir.name)).start()
    lags = []
    for i in range(nodes):
        _append(run_dir, i, journal)
        mirror.request()
        time.sleep(interval)
        lags.append(len(journal) - _store_nodes(store, run_dir.name))
    mirror.close()
    ranked, leased_ranked = sorted(costs), sorted(leased)
    return {"store": store_url.split("://")[0] if "://" in store_url else "directory",
            "sync_ms_median": round(statistics.median(ranked), 1),
            "sync_ms_p90": round(ranked[int(0.9 * len(ranked)) - 1], 1),
            "sync_ms_last10_mean": round(statistics.mean(costs[-10:]), 1),  # the last nodes: the biggest journal
            "leased_sync_ms_median": round(statistics.median(leased_ranked), 1),
            "leased_sync_ms_p90": round(leased_ranked[int(0.9 * len(leased_ranked)) - 1], 1),
            "journal_kb_at_end": round((run_dir / "journal.json").stat().st_size / 1000),
            "lag_max_nodes": max(lags), "lag_mean_nodes": round(statistics.mean(lags), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        work = Path(tmp)
        results = [measure(f"file://{work / 'store'}", args.nodes, args.interval, work)]
        seaweed = SeaweedFS(work / "seaweedfs", buckets=("bench",)).start()
        try:
            os.environ.update(seaweed.env)
            results.append(measure("s3://bench/runs", args.nodes, args.interval, work))
        finally:
            seaweed.stop()
    print(f"{args.nodes} nodes, one append every {args.interval} s for the lag")
    for row in results:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
