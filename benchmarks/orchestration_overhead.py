"""Orchestration overhead per node, with Prefect's flow-run heartbeats on and off (issue 6).

Runs the same search (competition, seed, budget, offline model, ``parallel_workers`` 1 so that
the steps do not overlap and the programs are the same in every configuration) once per
configuration, each in its own process against its own temporary Prefect API on a fresh
database (see ``benchmarks/_search_run.py``)::

    python benchmarks/orchestration_overhead.py [--competition-id sklearn-breast-cancer]
        [--data-dir D] [--max-steps 12] [--seed 0] [--repeats 3]
        [--configs on,top,off,top-stock,top-pg,plain]
        [--postgres-url postgresql+asyncpg://USER@HOST:PORT/DB]

Configurations: ``on`` (heartbeats at Prefect 3.8's default frequency, 180 s, for every flow
run, subflows included: ``search.subflow_heartbeats: true``; the setting accepts >= 30 s or
None), ``top`` (the default since issue 16: heartbeats for the top-level flow run only, its
subflows — phase flows, steps, debug attempts — without; ``flows/_subflow.py``), ``off``
(``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` None, as in the tests), ``top-stock`` (``top`` on Prefect's
own ephemeral server, ``SubprocessASGIServer``, whose pool of SQLite connections collides with
itself: "database is locked" 503s and the client's 2–16 s back-offs; every other configuration
uses the server a ``swarm-evo run`` starts, ``flows._api_server.LocalAPIServer``, one connection),
``top-pg`` (``top`` with the API's
database on the PostgreSQL server ``--postgres-url`` instead of SQLite: Prefect's recommended
database for a shared server, without SQLite's "database is locked" retries) and ``plain`` (the same search
code with Prefect removed: tasks and flows called as plain functions, no API; the baseline for
"how much of it is Prefect").

Per node, from the journal (``node.metadata["timings"]``, written by ``swarm_evo.step.assembly.assemble_node``):
``in-step`` orchestration = wall − LLM − execution of the step body (selection → review; it
includes the task runs, the debug-attempt subflows, prompt building, review rules, the journal
save). Prefect's per-subflow start/finish cost of the step subflow itself (creating the flow
run, and with heartbeats joining the heartbeat thread, ≤ 1 s) falls outside that body, so the
script also prints ``between`` = (search window − Σ node wall) / nodes: with one worker this
is everything outside the step bodies (step subflow start/finish, per-epoch node-table
artifacts and agent evolution, phase flows). ``all-in`` = in-step + between.
Ratios on/off and Prefect's share (1 − plain/config, all-in) are what to compare on a busy
machine; absolute seconds depend on the load, which the script prints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _search_run import (
    PRODUCTION_HEARTBEAT_SECONDS,
    add_search_arguments,
    ensure_data,
    load_text,
    spawn,
)

LABELS = {
    "on": "heartbeats on",
    "top": "top-level only",
    "top-stock": "top, stock API",
    "top-pg": "top, PostgreSQL",
    "off": "heartbeats off",
    "plain": "no Prefect",
}


def _stats(results: list[dict]) -> dict:
    """Pooled per-node numbers of the repetitions of one configuration."""
    orch = [x for r in results for x in r["orchestration"]]
    wall = [x for r in results for x in r["wall"]]
    nodes = sum(r["nodes"] for r in results)
    between = sum(r["search_seconds"] - sum(r["wall"]) for r in results) / nodes
    in_step = statistics.fmean(orch)
    return {
        "nodes": nodes,
        "orch_mean": in_step,
        "orch_median": statistics.median(orch),
        "wall_mean": statistics.fmean(wall),
        "between": between,
        "all_in": in_step + between,
        "debug": sum(r["debug_attempts"] for r in results),
        "digests": {r["code_digest"] for r in results},
        "flow_runs": results[0].get("flow_runs") or {},
        "retries": sum(r.get("api_retries") or 0 for r in results),
        "retry_seconds_per_node": sum(r.get("api_retry_seconds") or 0.0 for r in results) / nodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_search_arguments(parser, max_steps_help="budget (> 10: Phase 1 is one epoch of 10 drafts)")
    parser.add_argument("--configs", default="on,top,off,plain", help="comma-separated: on, top, off, top-stock, top-pg, plain")
    parser.add_argument("--postgres-url", default=None,
                        help="PostgreSQL server for top-pg, e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/postgres "
                        "(each run creates and drops its own database)")
    parser.add_argument("--heartbeat-frequency", type=int, default=PRODUCTION_HEARTBEAT_SECONDS)
    parser.add_argument("--keep", type=Path, default=None, help="keep runs and logs in this directory")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    if unknown := set(configs) - set(LABELS):
        parser.error(f"unknown configurations {sorted(unknown)}; use {', '.join(LABELS)}")
    if "top-pg" in configs and not args.postgres_url:
        parser.error("configuration top-pg needs --postgres-url")

    with tempfile.TemporaryDirectory(prefix="swarm-evo-overhead-") as tmp:
        scratch = (args.keep or Path(tmp)).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        data_dir = ensure_data(args.competition_id, args.data_dir, args.raw_dir, scratch).resolve()
        print(f"orchestration overhead per node: {args.competition_id}, seed {args.seed}, "
              f"{args.max_steps} steps, parallel_workers 1, offline model, {args.repeats} run(s) per configuration")
        print(f"machine: {os.cpu_count()} cores; load average (1/5/15 min) before: {load_text()}")
        results: dict[str, list[dict]] = {c: [] for c in configs}
        for rep in range(args.repeats):
            for config in configs:
                result = spawn(
                    f"{config}-r{rep}", scratch,
                    mode="plain" if config == "plain" else "prefect",
                    heartbeats=None if config == "plain" else ("off" if config == "off" else "on"),
                    postgres_url=args.postgres_url if config == "top-pg" else None,
                    api="stock" if config == "top-stock" else None,
                    subflow_heartbeats=None if config == "plain" else ("on" if config == "on" else "off"),
                    heartbeat_frequency=args.heartbeat_frequency,
                    competition_id=args.competition_id, data_dir=data_dir, max_steps=args.max_steps,
                    seed=args.seed, parallel_workers=1,
                )
                if "error" in result:
                    print(f"  {LABELS[config]} run {rep + 1} failed ({result['error']}); log {result['log']}:")
                    print("\n".join(f"    {line}" for line in result["log_tail"]))
                    continue
                one = _stats([result])
                print(f"  {LABELS[config]:<15} run {rep + 1}: {result['nodes']} nodes, search "
                      f"{result['search_seconds']:.1f} s, in-step {one['orch_mean']:.3f} s/node, all-in "
                      f"{one['all_in']:.3f} s/node, API retries {result.get('api_retries', 0)}, "
                      f"load average after {result['loadavg_after'][0]:.2f}")
                results[config].append(result)
        print(f"load average after: {load_text()}")
        stats = {c: _stats(r) for c, r in results.items() if r}
        print()
        print(f"{'configuration':<16}{'nodes':>6}{'in-step mean':>14}{'median':>8}{'between':>9}"
              f"{'all-in':>8}{'wall/node':>11}{'debug':>7}{'retries':>9}{'retry s/node':>14}")
        for config, s in stats.items():
            print(f"{LABELS[config]:<16}{s['nodes']:>6}{s['orch_mean']:>14.3f}{s['orch_median']:>8.3f}"
                  f"{s['between']:>9.3f}{s['all_in']:>8.3f}{s['wall_mean']:>11.2f}{s['debug']:>7}"
                  f"{s['retries']:>9}{s['retry_seconds_per_node']:>14.3f}")
        print("(seconds per node; in-step = wall − LLM − exec inside the step body, between = outside the "
              "step bodies; debug = debug attempts, each its own subflow under Prefect; retries = API requests "
              "the Prefect client sent again after a 503 — on the local server's SQLite database, 'database is "
              "locked' (PrefectHQ/prefect#18934) — and retry s/node the back-off they slept, part of all-in)")
        if "on" in stats and "off" in stats:
            on, off = stats["on"], stats["off"]
            print(f"heartbeats on/off: in-step {on['orch_mean'] / off['orch_mean']:.2f}x, "
                  f"all-in {on['all_in'] / off['all_in']:.2f}x "
                  f"(+{on['all_in'] - off['all_in']:.3f} s per node)")
        if "plain" in stats:
            plain = stats["plain"]["all_in"]
            for config in ("on", "top", "off", "top-stock", "top-pg"):
                if config in stats:
                    share = 1 - plain / stats[config]["all_in"]
                    print(f"Prefect's share of the all-in orchestration, {LABELS[config]}: {share:.0%} "
                          f"({stats[config]['all_in'] - plain:.3f} of {stats[config]['all_in']:.3f} s per node; "
                          f"without Prefect {plain:.3f} s; ratio to no Prefect {stats[config]['all_in'] / plain:.1f}x)")
        first = next(iter(stats.values()), None)
        if first and first["flow_runs"]:
            runs = ", ".join(f"{k} {v}" for k, v in sorted(first["flow_runs"].items()))
            print(f"flow runs per run ({LABELS[next(iter(stats))]}): {runs}")
        digests = set().union(*(s["digests"] for s in stats.values())) if stats else set()
        print("same programs in every run: " + ("yes" if len(digests) == 1 else f"no ({len(digests)} different)"))


if __name__ == "__main__":
    main()
