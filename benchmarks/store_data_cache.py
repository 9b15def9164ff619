"""Loading a competition from the store (issue 34, item 2): the first load on a machine (a fresh
data cache) against a cached one, and the answers fetched to grade::

    python benchmarks/store_data_cache.py [--competition spaceship-titanic]
        [--raw-dir ../shared/data/spaceship-titanic/raw] [--url s3://bucket/prefix/data] [--runs 5]

Without ``--url`` a SeaweedFS (tests/object_store.py, the tests' S3 store) is started on
127.0.0.1 and the competition is prepared into it with ``swarm-evo prepare … --data-dir URL``;
with ``--url`` the competition must already be prepared there (credentials the standard way).
Each run empties the cache (``$SWARM_EVO_DATA_CACHE``, a temporary folder), then times
``sync_competition`` of the public part twice (first, cached) and ``load_objective`` (what a run
does at its start); medians in ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.1f} ms (runs: {', '.join(f'{s * 1000:.0f}' for s in seconds)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--competition", default="spaceship-titanic")
    parser.add_argument("--raw-dir", default=str(ROOT.parent / "shared" / "data" / "spaceship-titanic" / "raw"))
    parser.add_argument("--url", default=None, help="a store data location that holds the competition already")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="store-data-bench-"))
    os.environ["SWARM_EVO_DATA_CACHE"] = str(tmp / "cache")
    server = None
    try:
        url = args.url
        if url is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from object_store import SeaweedFS

            server = SeaweedFS(tmp / "seaweedfs", buckets=("swarm-evo",)).start()
            os.environ.update(server.env)
            url = "s3://swarm-evo/data"
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "swarm_evo.cli", "prepare", args.competition, "--raw-dir",
                            args.raw_dir, "--data-dir", url], check=True)
            print(f"prepare to the store (a process): {time.perf_counter() - started:.2f} s")
        from swarm_evo.objective.load import load_objective
        from swarm_evo.store.data import sync_competition

        first, cached, loads = [], [], []
        for _ in range(args.runs):
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            started = time.perf_counter()
            report = sync_competition(url, args.competition, "public")
            first.append(time.perf_counter() - started)
            started = time.perf_counter()
            again = sync_competition(url, args.competition, "public")
            cached.append(time.perf_counter() - started)
            assert again.downloaded == 0
            started = time.perf_counter()
            load_objective(args.competition, None, url)
            loads.append(time.perf_counter() - started)
        started = time.perf_counter()
        answers = sync_competition(url, args.competition, "private")
        print(f"public part: {report.downloaded} files, {report.bytes} bytes")
        print(f"first load (fresh cache): {_ms(first)}")
        print(f"cached load (nothing downloaded): {_ms(cached)}")
        print(f"load_objective, cached: {_ms(loads)}")
        print(f"answers: {answers.downloaded} file(s), {answers.bytes} bytes, "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
