"""Every stand-in server scenario once, each a real ``swarm-evo run`` over HTTP (issue 13 note).

Starts the stand-in OpenAI/Ollama-compatible server (``tests/llm_server``) on 127.0.0.1,
prepares spaceship-titanic from ``../shared`` (unless ``--data-dir`` already holds it), runs
``swarm-evo run`` once per scenario and prints one line per scenario: name, exit code, wall
seconds, nodes alive/dead, valid submission, the run's llm totals (calls, failed, prompt and
completion tokens, cost) and the server's own token counts, then the command that reproduces it.

Usage::

    .venv/bin/python benchmarks/real_model_scenarios.py [--steps 6] [--only tidy,hangs]
        [--model openai/stand-in] [--workdir /tmp/real-model-scenarios] [--json out.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from llm_server import SCENARIOS, StandInServer, closed_port, run_swarm  # noqa: E402

SHARED_DATA = REPO.parent / "shared" / "data"

RUN_SETTINGS: dict[str, dict] = {
    "everything": {"max_steps": 10, "search_config": {"steps_per_epoch": 4, "phase1_target_nodes": 4}},
    "hangs": {"time_limit": 20, "model_config": {"timeout": 5, "num_retries": 2}},
    "strict_reviewer": {"search_config": {"debug_max_attempts": 1}},
    "chatty": {"max_steps": 2},
}
"""Per-scenario run settings (the tests' settings); others use ``--steps`` and the defaults."""


def prepare(data_dir: Path) -> Path:
    """``data_dir`` with spaceship-titanic prepared (from ``../shared/data``) if it is not yet."""
    if not (data_dir / "spaceship-titanic" / "prepared" / "public" / "train.csv").exists():
        from swarm_evo.competition import prepare_competition

        prepare_competition("spaceship-titanic", SHARED_DATA / "spaceship-titanic" / "raw", data_dir)
    return data_dir


def line(name: str, result, server_totals: dict) -> dict:
    """One scenario's outcome as a dict (also printed as one line)."""
    alive, dead = result.alive_dead()
    llm = result.llm() or {}
    return {
        "scenario": name,
        "exit": result.returncode,
        "seconds": round(result.seconds, 1),
        "nodes": len(result.nodes),
        "alive": alive,
        "dead": dead,
        "valid_submission": result.valid_submission,
        "llm_calls": llm.get("calls"),
        "llm_failed": llm.get("failed_calls"),
        "prompt_tokens": llm.get("prompt_tokens"),
        "completion_tokens": llm.get("completion_tokens"),
        "cost_usd": llm.get("cost_usd"),
        "server": server_totals,
        "stop_reason": (result.run_report or {}).get("stop_reason"),
        "stderr_last": (result.stderr.strip().splitlines() or [""])[-1][:200],
        "command": " ".join(result.cmd),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios; print one line each (and write JSON lines with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--only", default="", help="comma-separated scenario names (default: all, plus endpoint_down)")
    parser.add_argument("--model", default="openai/stand-in")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/real-model-scenarios"))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or [*SCENARIOS, "endpoint_down"]
    data_dir = prepare(args.data_dir or args.workdir / "data")
    rows = []
    print(f"{'scenario':<16} {'exit':>4} {'secs':>6} {'alive/dead':>10} {'valid':>5}  llm (calls/failed, prompt+completion tok, $)  server tok")
    with StandInServer(data_dir) as server:
        for name in names:
            settings = dict(RUN_SETTINGS.get(name, {}))
            settings.setdefault("max_steps", args.steps)
            api_base = server.api_base_for(args.model)
            if name == "endpoint_down":
                server.use("tidy")
                api_base = f"http://127.0.0.1:{closed_port()}/v1"
            else:
                server.use(name)
            work = args.workdir / f"{name}-{int(time.time())}"
            result = run_swarm(work, data_dir, api_base=api_base, model=args.model, timeout=600, **settings)
            row = line(name, result, server.totals())
            rows.append(row)
            cost = "-" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
            print(f"{name:<16} {row['exit']:>4} {row['seconds']:>6.1f} {row['alive']:>4}/{row['dead']:<5} "
                  f"{str(row['valid_submission']):>5}  {row['llm_calls']}/{row['llm_failed']}, "
                  f"{row['prompt_tokens']}+{row['completion_tokens']}, {cost}  "
                  f"{row['server']['prompt_tokens']}+{row['server']['completion_tokens']}"
                  + (f"  stop: {row['stop_reason']}" if row["stop_reason"] else "")
                  + (f"  stderr: {row['stderr_last']}" if row["exit"] not in (0,) else ""), flush=True)
    if args.json:
        args.json.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
