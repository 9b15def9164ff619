"""Lane occupancy and wall time of one search with heavy-tailed program run times (issue 52).

Starts the stand-in model server (``tests/llm_server``) on 127.0.0.1 with programs that sleep a
lognormal number of seconds before they train (``Scenario.program_seconds``: median, sigma,
low, high), runs ``swarm-evo run`` on the built-in ``sklearn-wine`` competition with
``--workers`` lanes and prints, per run: the code it ran, the steps, the run's wall seconds,
the slots' occupancy counted two ways (busy slot-seconds / (slots × wall),
:func:`swarm_evo.reporting.slot_timeline.occupancy`): ``step_occupancy`` counts a slot busy for
a whole step (model included: what the epoch-barrier scheduler's slots held), ``lane_occupancy``
only while a program runs (issue 52: the model never holds a slot; None for code before it),
the mean wait for a lane and the proposals' staleness. The same programs' seconds come from the
scenario's seed, so two runs of the same settings sleep the same.

To compare with the epoch-barrier scheduler of before issue 52, check that commit out beside
this one and pass it as ``--code``; its processes then import that checkout's packages
(``PYTHONPATH``), while this script's server and measurement stay the same::

    git worktree add /tmp/barrier f85db56
    .venv/bin/python benchmarks/steady_state.py --code /tmp/barrier --code .   # barrier, then steady state

Usage::

    .venv/bin/python benchmarks/steady_state.py [--steps 40] [--workers 4] [--seconds 3,0.9,1,20]
        [--code DIR ...] [--workdir /tmp/steady-state] [--latency 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from llm_server import SCENARIOS, StandInServer, run_swarm  # noqa: E402
from swarm_evo.population.node import Node  # noqa: E402
from swarm_evo.reporting.slot_timeline import occupancy, step_spans  # noqa: E402


def one_run(server: StandInServer, code: Path, args, data_dir: Path, index: int) -> dict:
    """One ``swarm-evo run`` with the code of ``code``; its figures as a dict."""
    scenario = SCENARIOS["tidy"].with_(program_seconds=tuple(args.seconds), latency=args.latency)
    server.use(scenario, data_dir)
    workdir = args.workdir / f"run{index}-{code.resolve().name}"
    result = run_swarm(
        workdir, data_dir, api_base=server.api_base_for("openai/stand-in"), competition_id="sklearn-wine",
        max_steps=args.steps, parallel_workers=args.workers, timeout=args.timeout,
        search_config={"fitness": "printed", "debug_max_attempts": 1,
                       **({"proposal_backlog": args.backlog} if args.backlog is not None else {})},
        sandbox_config={"exec_timeout": 60},
        env_extra={"PYTHONPATH": str(code.resolve())},
    )
    nodes = [Node.model_validate(n) for n in result.nodes]
    steps = occupancy(step_spans(nodes, per="step"), args.workers)  # what the barrier's slots held: whole steps
    runs = occupancy(step_spans(nodes), args.workers)  # issue 52: a lane is held by a program only (None before)
    elapsed = (result.journal or {}).get("info", {}).get("elapsed_seconds")
    return {"code": str(code), "exit": result.returncode, "steps": len(nodes), "run_s": round(result.seconds, 1),
            "elapsed_s": elapsed, "wall_s": steps["wall_s"], "step_occupancy": steps["occupancy"],
            "lane_occupancy": runs["occupancy"], "mean_wait_s": runs["mean_wait_s"],
            "mean_staleness": runs["mean_staleness"], "max_staleness": runs["max_staleness"],
            "backlog": args.backlog, "latency": args.latency, "command": " ".join(result.cmd)}


def main(argv: list[str] | None = None) -> int:
    """Run once per ``--code``; print one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=lambda t: [float(x) for x in t.split(",")], default=[3.0, 0.9, 1.0, 20.0],
                        help="median,sigma,low,high of the programs' lognormal sleep (default 3,0.9,1,20)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds the model waits before each reply")
    parser.add_argument("--backlog", type=int, default=None,
                        help="search.proposal_backlog (default: the run's default; codes before issue 52 ignore it: leave unset)")
    parser.add_argument("--code", type=Path, action="append", default=None,
                        help="a checkout whose code runs (repeat to compare; default: this one)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/steady-state"))
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    data_dir = args.workdir / "data"
    if not (data_dir / "sklearn-wine").exists():
        from swarm_evo.competition import prepare_competition

        prepare_competition("sklearn-wine", None, data_dir)
    server = StandInServer(data_dir).start()
    try:
        for index, code in enumerate(args.code or [REPO]):
            print(json.dumps(one_run(server, code, args, data_dir, index)), flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
