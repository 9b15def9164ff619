"""Where the test suite's CPU goes (issue 16 item 4): run a command, sample every process once a
second, and print the CPU seconds each kind of process used while it ran::

    python benchmarks/suite_cpu.py [--interval 1.0] -- .venv/bin/pytest -q -n 2 --dist loadgroup

Kinds, from the command line: programs the sandboxes run (``solution.py``, by interpreter; those
forked from the pre-imported program server keep its command line and count with it),
``swarm-evo`` processes the tests start, Prefect API servers (the session API of each pytest
worker, and the ephemeral API of each ``swarm-evo`` process without ``PREFECT_API_URL``),
pytest and its xdist workers (in-process flows, Prefect's client, the tests), Docker, and the
rest (processes that existed before the command count from their CPU time at the start).

A process is counted at its last sample, so one that lives less than ``--interval`` may be
missed; its CPU then shows up only in the machine total, which ``/proc/stat`` gives exactly.
``busy`` is the machine total over (wall × cores): below ≈ 90 % the suite is waiting on
something (sleeps, back-offs, timeouts), above it only less CPU work makes it faster.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time

import psutil


def kind(cmdline: list[str]) -> str:
    """The kind of a process from its command line (see the module docstring)."""
    text = " ".join(cmdline)
    if "solution.py" in text:
        return f"program: {cmdline[0]}" if cmdline else "program"
    if "preload_server.py" in text:  # the server, and the supervisors and programs forked from it
        return "program server and its forks (programs, supervisors)"
    if "uvicorn" in text and "prefect" in text or "prefect server start" in text or " server start" in text:
        return "Prefect API server"
    if "swarm_evo.cli" in text or "bin/swarm-evo" in text or "crash_launcher" in text:
        return "swarm-evo process"
    if "supervisor.py" in text:
        return "sandbox supervisor"
    if "pytest" in text or "exec(eval(sys.stdin.readline()))" in text:
        return "pytest (+ xdist workers)"
    if "prefect" in text:
        return "other Prefect process (worker, runner, CLI)"
    if "docker" in text or "containerd" in text:
        return "Docker"
    return "other"


def _started_by(proc) -> str | None:
    """The test that started ``proc`` (``PYTEST_CURRENT_TEST``, which its children inherit), or None."""
    try:
        return proc.environ().get("PYTEST_CURRENT_TEST")
    except psutil.Error:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    parser.add_argument("--processes", metavar="FILE",
                        help="also write one JSON line per process: pid, kind, command line, CPU s, and the test "
                             "that started it (its PYTEST_CURRENT_TEST), for finding which tests cost the most")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")

    def cpu(proc) -> float:
        times = proc.info["cpu_times"]
        return times.user + times.system if times else 0.0

    attrs = ["pid", "create_time", "cmdline", "cpu_times"]
    before = {(p.info["pid"], p.info["create_time"]): cpu(p) for p in psutil.process_iter(attrs)}
    machine_before = psutil.cpu_times()
    started = time.monotonic()
    child = subprocess.Popen(command)
    last: dict[tuple, tuple[str, float]] = {}
    seen: dict[tuple, dict] = {}  # per process, for --processes: what it was, read once at its first sample
    while child.poll() is None:
        for proc in psutil.process_iter(attrs):
            key = (proc.info["pid"], proc.info["create_time"])
            used = cpu(proc) - before.get(key, 0.0)
            label = last[key][0] if key in last else kind(proc.info["cmdline"] or [])
            last[key] = (label, used)
            if args.processes and key not in seen:
                seen[key] = {"pid": key[0], "kind": label, "cmdline": " ".join(proc.info["cmdline"] or [])[:300],
                             "test": _started_by(proc)}
        time.sleep(args.interval)
    wall = time.monotonic() - started
    machine_after = psutil.cpu_times()
    machine = sum(machine_after[:3]) - sum(machine_before[:3])  # user, nice, system
    totals: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    for label, used in last.values():
        if used > 0.05:
            totals[label] += used
            counts[label] += 1
    if args.processes:
        with open(args.processes, "w") as fh:
            for key, info in seen.items():
                fh.write(json.dumps(dict(info, cpu=round(last[key][1], 2))) + "\n")
    cores = psutil.cpu_count()
    print(f"\n$ {' '.join(command)}: exit {child.returncode}, wall {wall:.0f} s, machine CPU {machine:.0f} s "
          f"on {cores} cores (busy {machine / (wall * cores):.0%})")
    print(f"{'CPU s':>8} {'share':>6} {'procs':>6}  kind")
    for label, used in totals.most_common():
        print(f"{used:8.1f} {used / machine:6.1%} {counts[label]:6d}  {label}")
    print(f"{machine - sum(totals.values()):8.1f} {'':>6} {'':>6}  not sampled (short-lived processes, kernel)")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
