"""One measured search run, in its own process (shared by the benchmarks of issue 6).

The benchmark scripts start this module as a subprocess per configuration, so Prefect settings
(heartbeats, API URL) and the run session registry never leak from one configuration into the
next. It writes one JSON object (the measurements below) to ``--out``::

    python benchmarks/_search_run.py --mode prefect --heartbeats on --competition-id C \\
        --data-dir D --run-dir R --max-steps N --seed S --parallel-workers W --out FILE.json

Modes:

``prefect``
    ``two_phase_evo`` (the real flow) against a local API server subprocess on a fresh SQLite
    database (``PREFECT_HOME`` is new per run): ``--api local`` (default) is the server a
    ``swarm-evo run`` without ``PREFECT_API_URL`` starts (``flows._api_server.LocalAPIServer``:
    SQLite through one connection), ``--api stock`` Prefect's own ephemeral server
    (``SubprocessASGIServer``: a pool of connections, "database is locked" 503s); with
    ``--postgres-url``, a server subprocess on a fresh database of that PostgreSQL server, dropped
    afterwards; with ``--api-url``, a server started outside (``benchmarks/server_overhead.py``:
    ``prefect server start`` or ``deployments/local_server.py``). ``--fault-rate`` and
    ``--repair-rate`` set the offline model's planted bugs and repairs (failing programs, debug
    attempts, dead nodes). ``--heartbeats on``
    keeps Prefect's flow-run heartbeats at ``--heartbeat-frequency`` (Prefect 3.8's default is
    180 s, the minimum it accepts 30 s); ``off`` sets ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` to
    None (only possible through ``temporary_settings``: the environment variable cannot be None).
    The search window is read back from the API: first start to last end of the run's child
    flow runs (the phase/policy flows, whose runs enclose every step).
``plain``
    The same search code with Prefect taken out: in the ``flows.*`` and ``tasks.*`` modules every
    task and flow object is replaced by its undecorated function (``.fn``), ``get_run_logger`` by
    a standard logger and the artifact calls by no-ops; ``PREFECT_API_URL`` points at a closed
    port so that any Prefect call left over fails instead of starting a server. It runs the
    search phases only (``phase1_draft`` then ``phase2_evolve``, as ``two_phase_evo`` does), not
    grading; the search window is timed around them.

Measurements (``timings`` come from the journal, ``swarm_evo.step.assembly.assemble_node``: ``wall`` is the step
body from selection to review; ``orchestration = wall - llm - exec``):
``nodes``, per-node ``orchestration``/``wall``/``llm``/``exec`` lists, ``debug_attempts``,
``search_seconds`` (search window), ``total_seconds`` (the whole flow call, prefect mode),
``flow_runs`` (count per flow name, prefect mode), ``api_retries`` and ``api_retry_seconds``
(prefect mode: requests the Prefect client sent again after a retryable answer, and the back-off
it slept; on the SQLite database of a local server these are 503s for "database is locked",
PrefectHQ/prefect#18934, each costing about 2 s), ``code_digest`` (hash of the node programs
in step order: equal digests mean both configurations ran the same programs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

PRODUCTION_HEARTBEAT_SECONDS = 180
"""Prefect 3.8's default ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` (it accepts >= 30 or None)."""


def journal_measurements(run_dir: Path) -> dict:
    """Per-node timings, node count, debug attempts and a digest of the programs."""
    data = json.loads((run_dir / "journal.json").read_text())
    nodes = sorted(data["nodes"], key=lambda n: n.get("step") or 0)
    timings = [n.get("metadata", {}).get("timings") or {} for n in nodes]
    digest = hashlib.sha256("\0".join(n.get("code") or "" for n in nodes).encode()).hexdigest()[:16]
    return {
        "nodes": len(nodes),
        "valid": sum(1 for n in nodes if not n.get("is_buggy") and not n.get("dead")),
        "debug_attempts": sum(n.get("debug_attempts") or 0 for n in nodes),
        **{key: [t[key] for t in timings if t.get(key) is not None] for key in ("wall", "llm", "exec", "orchestration")},
        "code_digest": digest,
    }


def _api_measurements() -> dict:
    """Search window and flow-run counts of the (only) run on the temporary API."""
    from prefect import get_client

    runs, page = [], 200  # the API answers at most 200 per request
    with get_client(sync_client=True) as client:
        while True:
            batch = client.read_flow_runs(limit=page, offset=len(runs))
            runs += batch
            if len(batch) < page:
                break
        flows = {f.id: f.name for f in client.read_flows(limit=page)}
    children = [r for r in runs if r.parent_task_run_id is not None and r.start_time and r.end_time]
    counts: dict[str, int] = {}
    for r in runs:
        name = flows.get(r.flow_id, str(r.flow_id))
        counts[name] = counts.get(name, 0) + 1
    search = None
    if children:
        search = (max(r.end_time for r in children) - min(r.start_time for r in children)).total_seconds()
    return {"search_seconds": search, "flow_runs": counts}


class _RetryCounter(logging.Filter):
    """Counts the Prefect client's retries and their back-off from its debug record
    (``prefect.client.base``: "... Another attempt will be made in {s}s ..."). As a filter of the
    ``prefect.client`` logger set to DEBUG, it passes on only the records at or above the level the
    logger had, so the log reads as before."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.count, self.seconds = 0, 0.0
        self.level = logger.getEffectiveLevel()
        logger.addFilter(self)
        logger.setLevel(logging.DEBUG)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "Another attempt will be made in" in message:
            self.count += 1
            try:
                self.seconds += float(message.split("will be made in ", 1)[1].split("s", 1)[0])
            except ValueError:
                pass
        return record.levelno >= self.level


@contextmanager
def _api_server(server_class):
    """An API server subprocess of ``server_class`` (a ``SubprocessASGIServer``) on a free port of
    127.0.0.1, with this process's settings (database included), ``PREFECT_API_URL`` pointed at it."""
    import socket

    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_class(port=port)
    server.start(timeout=180)
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            yield
    finally:
        server.stop()


@contextmanager
def _external_api(api_url: str):
    """``PREFECT_API_URL`` pointed at a server started outside this process (``--api-url``)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}):
        yield


@contextmanager
def _postgres_api(server_url: str, label: str):
    """A Prefect API server subprocess on a new database of the PostgreSQL server ``server_url``
    (``postgresql+asyncpg://user@host:port/maintenance-db``), as ``prefect_test_harness`` does for
    SQLite; the database is dropped afterwards."""
    import asyncio

    import asyncpg
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    name = f"swarm_evo_bench_{label}_{os.getpid()}".replace("-", "_")
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin(sql: str) -> None:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute(sql)
        finally:
            await connection.close()

    asyncio.run(admin(f"CREATE DATABASE {name}"))
    try:
        database = url.set(database=name).render_as_string(hide_password=False)
        with temporary_settings({PREFECT_SERVER_DATABASE_CONNECTION_URL: database}):
            with _api_server(SubprocessASGIServer):
                yield
    finally:
        asyncio.run(admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def run_prefect(args) -> dict:
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from flows._api_server import LocalAPIServer
    from flows.two_phase_evo import two_phase_evo

    frequency = args.heartbeat_frequency if args.heartbeats == "on" else None
    extra = {"policy": args.policy} if args.policy else {}
    extra["python"] = args.python
    config = Path(args.run_dir).with_suffix(".config.yaml")  # search.subflow_heartbeats (issue 16)
    config.parent.mkdir(parents=True, exist_ok=True)
    text = f"search: {{subflow_heartbeats: {str(args.subflow_heartbeats == 'on').lower()}}}\n"
    if args.fault_rate is not None or args.repair_rate is not None:  # failing programs (issue 54, item 6)
        rates = {k: v for k, v in (("fault_rate", args.fault_rate), ("repair_rate", args.repair_rate)) if v is not None}
        text += "model: {" + ", ".join(f"{k}: {v}" for k, v in rates.items()) + "}\n"
    config.write_text(text)
    extra["config_path"] = str(config)
    retries = _RetryCounter(logging.getLogger("prefect.client"))
    if args.api_url:
        api = _external_api(args.api_url)
    elif args.postgres_url:
        api = _postgres_api(args.postgres_url, Path(args.run_dir).name)
    else:
        api = _api_server(LocalAPIServer if args.api == "local" else SubprocessASGIServer)
    with api:
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: frequency}):
            started = time.perf_counter()
            summary = two_phase_evo(
                competition_id=args.competition_id,
                data_dir=str(args.data_dir),
                run_dir=str(args.run_dir),
                model=args.model,
                max_steps=args.max_steps,
                seed=args.seed,
                parallel_workers=args.parallel_workers,
                **extra,
            )
            total = time.perf_counter() - started
        api = _api_measurements()
    grade = summary.get("grade_report") or {}
    return {"total_seconds": total, **api, "score": grade.get("score"), "heartbeat_frequency": frequency,
            "api_retries": retries.count, "api_retry_seconds": round(retries.seconds, 3)}


def _strip_prefect() -> None:
    """Replace Prefect in the flows/tasks modules by plain calls (see the module docstring)."""
    os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # nothing listens: a leftover call fails
    import importlib
    import pkgutil

    from prefect import Flow, Task

    import flows
    import tasks

    modules = []
    for package in (flows, tasks):
        for info in pkgutil.iter_modules(package.__path__):
            modules.append(importlib.import_module(f"{package.__name__}.{info.name}"))
    logger = logging.getLogger("swarm-evo-bench")

    def no_artifact(*args, **kwargs):
        return None

    for module in modules:
        for name, value in list(vars(module).items()):
            if isinstance(value, (Task, Flow)):
                setattr(module, name, value.fn)
            elif name == "get_run_logger":
                setattr(module, name, lambda: logger)
            elif name.startswith(("create_", "update_")) and name.endswith("_artifact"):
                setattr(module, name, no_artifact)


def run_plain(args) -> dict:
    _strip_prefect()
    from flows import phase1_draft as p1
    from flows import phase2_evolve as p2
    from flows.run_config import resolve_config
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import open_session

    if args.policy not in (None, "two_phase"):
        raise SystemExit("plain mode runs the two-phase search only")
    config, api_key = resolve_config(
        None, model=args.model, max_steps=args.max_steps, seed=args.seed, parallel_workers=args.parallel_workers,
        python=args.python,
    )
    session = open_session(
        competition_id=args.competition_id, data_dir=Path(args.data_dir), run_dir=Path(args.run_dir),
        config=config, endpoint=endpoint_for(config.model, api_key),
    )
    key = str(session.run_dir)
    started = time.perf_counter()
    epoch = p1.phase1_draft(run_dir=key, first_epoch=0)
    p2.phase2_evolve(run_dir=key, first_epoch=epoch)
    search = time.perf_counter() - started
    return {"search_seconds": search, "total_seconds": None, "flow_runs": {}, "score": None}


REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def add_search_arguments(parser, *, max_steps_help: str) -> None:
    """The options every benchmark of one search shares: competition, data, budget, seed, repeats."""
    parser.add_argument("--competition-id", default="sklearn-breast-cancer")
    parser.add_argument("--data-dir", type=Path, default=None, help="prepared data (default: prepare into a temp dir)")
    parser.add_argument("--raw-dir", type=Path, default=None, help="raw files (default ../shared/data/<id>/raw)")
    parser.add_argument("--max-steps", type=int, default=12, help=max_steps_help)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration (interleaved)")


def ensure_data(competition_id: str, data_dir: Path | None, raw_dir: Path | None, scratch: Path) -> Path:
    """A data directory holding ``competition_id`` prepared (``swarm-evo prepare``): ``data_dir``
    as given when it already has the competition, else prepared into it (or into ``scratch``)
    from ``raw_dir`` (default ``../shared/data/<id>/raw``; not needed for ``sklearn-*``)."""
    root = data_dir or scratch / "data"
    if (root / competition_id / "prepared").exists():
        return root
    cmd = [sys.executable, "-m", "swarm_evo.cli", "prepare", competition_id, "--data-dir", str(root)]
    if not competition_id.startswith("sklearn-"):
        cmd += ["--raw-dir", str(raw_dir or SHARED_DATA / competition_id / "raw")]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return root


def spawn(label: str, scratch: Path, **options) -> dict:
    """Run this module in a fresh process with ``--key value`` options; return its JSON.

    Each run gets its own ``PREFECT_HOME`` and run directory under ``scratch``; the log goes to
    ``scratch/<label>.log``. On failure the dict has ``error`` and the log's last lines.
    """
    out = scratch / f"{label}.json"
    log = scratch / f"{label}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(scratch / f"{label}-prefect-home"), LITELLM_LOCAL_MODEL_COST_MAP="True",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-dir", str(scratch / "runs" / label), "--out", str(out)]
    for key, value in options.items():
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.run(cmd, check=False, env=env, cwd=scratch, stdout=handle, stderr=subprocess.STDOUT).returncode
    if code or not out.exists():
        tail = log.read_text(errors="replace").splitlines()[-15:]
        return {"error": f"exit code {code}", "log_tail": tail, "log": str(log)}
    result = json.loads(out.read_text())
    result["process_seconds"] = time.perf_counter() - started
    return result


def load_text() -> str:
    """``1-, 5-, 15-minute load average: a / b / c`` of the machine now."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("prefect", "plain"), required=True)
    parser.add_argument("--heartbeats", choices=("on", "off"), default="on")
    parser.add_argument("--heartbeat-frequency", type=int, default=PRODUCTION_HEARTBEAT_SECONDS)
    parser.add_argument("--subflow-heartbeats", choices=("on", "off"), default="off",
                        help="search.subflow_heartbeats: heartbeats for step and debug-attempt subflows too")
    parser.add_argument("--competition-id", required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel-workers", type=int, default=1)
    parser.add_argument("--model", default="offline")
    parser.add_argument("--policy", default=None)
    parser.add_argument("--python", default=sys.executable,
                        help="sandbox.python (default: this interpreter, scikit-learn programs of a few seconds; "
                        "the program environment's optuna drafts run a minute each and add only noise here)")
    parser.add_argument("--postgres-url", default=None,
                        help="run the API on a new database of this PostgreSQL server (postgresql+asyncpg://...)")
    parser.add_argument("--api", choices=("local", "stock"), default="local",
                        help="SQLite API server: local (what swarm-evo runs start: one connection) or stock "
                        "(Prefect's SubprocessASGIServer)")
    parser.add_argument("--api-url", default=None,
                        help="run against this API (a server started outside, e.g. by benchmarks/server_overhead.py)")
    parser.add_argument("--fault-rate", type=float, default=None, help="model.fault_rate of the offline model")
    parser.add_argument("--repair-rate", type=float, default=None, help="model.repair_rate of the offline model")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = run_prefect(args) if args.mode == "prefect" else run_plain(args)
    result.update(journal_measurements(Path(args.run_dir)))
    result["loadavg_after"] = os.getloadavg()
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
