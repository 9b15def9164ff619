"""``swarm-evo pool setup``: a work pool and Prefect's dead-run detection on the shared server (issue 34).

    swarm-evo pool setup --pool NAME [--type process|docker] [--heartbeat-frequency S]

On the server of ``PREFECT_API_URL``: creates work pool NAME when missing, and the automation
that marks a flow run Crashed when its heartbeats stop (flows/pool_setup.py), then prints what
it created or found and the worker command (``prefect worker start --pool NAME``: the
deployments of prefect.yaml carry their heartbeat frequency in their job variables). The
automation watches the flow runs tagged ``swarm-evo`` only. Running it again creates nothing new.

Exit codes: 0 done, 2 bad input or no server (one line naming PREFECT_API_URL or the option
and the fix).
"""

from __future__ import annotations

import os
import sys


def add_pool_parser(sub) -> None:
    """Add the ``pool`` command and its ``setup`` sub-command to the CLI's sub-parsers."""
    p = sub.add_parser("pool", help="work pools on the shared Prefect server (PREFECT_API_URL)")
    actions = p.add_subparsers(dest="pool_command", required=True)
    s = actions.add_parser(
        "setup", help="create a work pool and the automation that marks runs of dead workers Crashed",
        description="Idempotent: creates work pool NAME (if missing) and the automation that marks a flow run "
        "tagged swarm-evo Crashed when its heartbeats stop for 2 heartbeat intervals, on the server of PREFECT_API_URL.",
    )
    s.add_argument("--pool", required=True, help="work pool name, e.g. swarm-evo-process")
    s.add_argument("--type", dest="pool_type", choices=("process", "docker"), default="process",
                   help="worker type of a new pool (default process; docker needs prefect-docker)")
    s.add_argument("--heartbeat-frequency", type=int, default=30,
                   help="the heartbeat interval the automation assumes, seconds (default and Prefect's minimum: 30, "
                   "what prefect.yaml's deployments send); a run is Crashed after 2 intervals without one")


def run_pool(args) -> int:
    """Run ``swarm-evo pool setup``; returns the exit code."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from flows.pool_setup import PoolSetupError, setup_pool, worker_command

    try:
        result = setup_pool(args.pool, args.pool_type, args.heartbeat_frequency)
    except PoolSetupError as exc:
        print(f"swarm-evo: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(f"work pool {result.pool} ({result.pool_type}): {'created' if result.pool_created else 'already exists'}")
    print(f"automation {result.automation_id!s} (flow runs without a heartbeat for {result.within} s -> Crashed): "
          + {"created": "created", "found": "already exists", "updated": "updated to this heartbeat frequency"}
          [result.automation_action])
    print(f"start workers with: {worker_command(result)}")
    return 0
