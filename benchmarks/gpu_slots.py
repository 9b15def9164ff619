"""GPU slots of the local sandbox, checked on a machine with an NVIDIA GPU (issue 52, item 3).

Run it on the GPU machine, with the interpreter that holds torch as the programs' interpreter::

    python benchmarks/gpu_slots.py [--python PYTHON] [--gpus 1] [--slots-per-gpu 2] [--mib 2048]
                                   [--seconds 15] [--json FILE]

It builds the sandbox a run builds (:func:`swarm_evo.sandbox.factory.make_sandbox`, ``sandbox.backend:
local``, ``sandbox.gpus: GPUS``, ``sandbox.slots_per_gpu: SLOTS``) and starts as many executions at
once as the run has slots (:func:`swarm_evo.sandbox.gpu_slots.execution_slots`; with the defaults, one
GPU and two slots: two executions that share it). Each program prints its ``CUDA_VISIBLE_DEVICES``,
the ``/dev/nvidia*`` nodes it sees, ``torch.cuda.device_count()`` and its device's name, then holds
``--mib`` MiB on the GPU and multiplies matrices for ``--seconds``. Meanwhile the host samples
``nvidia-smi`` every 0.25 s (compute processes per GPU and their memory; utilisation): that both
ran on the GPU at once is the host's measurement. Last, a sandbox without ``sandbox.gpus`` runs
the same probe: no ``/dev/nvidia*`` node, no CUDA device.

Checks (one ``PASS``/``FAIL`` line each, then a JSON summary, also to ``--json``; exit 1 when one
fails): every execution ended well; each saw exactly its group (one CUDA device, the group's UUID
in ``CUDA_VISIBLE_DEVICES``, one ``/dev/nvidia<N>`` node besides the control nodes; ``nvidia-smi -L``
run inside lists one GPU, the driver's directories of the others being covered); executions of
one GPU share it (as many distinct groups as GPUs given); the host saw all executions' processes
on the GPU(s) at one time, with at least their memory together; the sandbox without GPUs saw none.
Nothing here needs the network.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from swarm_evo.config import RunConfig  # noqa: E402
from swarm_evo.sandbox.factory import make_sandbox
from swarm_evo.sandbox.gpu_slots import execution_slots

PROGRAM = r'''
import glob, json, os, subprocess, sys, time
seen = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "dev_nvidia": sorted(glob.glob("/dev/nvidia*")), "pid": os.getpid(),
        "proc_gpus": sorted(os.listdir("/proc/driver/nvidia/gpus")) if os.path.isdir("/proc/driver/nvidia/gpus") else []}
try:  # what NVML shows in here (the driver directories of other GPUs are covered)
    smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    seen["nvidia_smi"] = (smi.stdout + smi.stderr).strip().splitlines()
except Exception as exc:
    seen["nvidia_smi"] = [f"{type(exc).__name__}: {exc}"]
try:
    import torch
    seen["device_count"] = torch.cuda.device_count()
    seen["device_name"] = torch.cuda.get_device_name(0) if seen["device_count"] else None
except Exception as exc:  # torch missing or CUDA failing: reported, not hidden
    seen["error"] = f"{type(exc).__name__}: {exc}"
    seen.setdefault("device_count", None)
print("SEEN " + json.dumps(seen), flush=True)
if HOLD and seen.get("device_count"):
    block = torch.empty(MIB * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    a = torch.randn(2048, 2048, device="cuda")
    end = time.time() + SECONDS
    n = 0
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
        n += 1
    torch.cuda.synchronize()
    print("HELD " + json.dumps({"matmuls": n, "max_allocated_mib": torch.cuda.max_memory_allocated() // 2**20}),
          flush=True)
'''

CONTROL = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}


def program(hold: bool, mib: int, seconds: float) -> str:
    return PROGRAM.replace("HOLD", repr(hold)).replace("MIB", str(int(mib))).replace("SECONDS", repr(float(seconds)))


def sample_nvidia_smi(stop: threading.Event, samples: list[dict]) -> None:
    """Every 0.25 s: the compute processes per GPU UUID and each GPU's utilisation and memory in use."""
    while not stop.is_set():
        t = time.time()
        try:
            apps = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory",
                                   "--format=csv,noheader,nounits"], capture_output=True, text=True, check=False).stdout
            gpus = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,utilization.gpu,memory.used",
                                   "--format=csv,noheader,nounits"], capture_output=True, text=True, check=False).stdout
        except OSError:  # no nvidia-smi: nothing measured (the checks that need it fail)
            return
        procs: dict[str, list] = {}
        for line in apps.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 3:
                procs.setdefault(parts[0], []).append({"pid": int(parts[1]), "mib": _num(parts[2])})
        util = {}
        for line in gpus.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 4:
                util[parts[1]] = {"index": parts[0], "util": _num(parts[2]), "mib": _num(parts[3])}
        samples.append({"t": t, "procs": procs, "gpus": util})
        stop.wait(0.25)


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _seen(stdout: str, tag: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the programs' interpreter (holds torch)")
    parser.add_argument("--gpus", default="1", help="sandbox.gpus (default 1: the first GPU)")
    parser.add_argument("--slots-per-gpu", type=int, default=2, help="sandbox.slots_per_gpu (default 2)")
    parser.add_argument("--mib", type=int, default=2048, help="GPU memory each program holds (MiB)")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long each program keeps the GPU busy")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()

    config = RunConfig.model_validate({"sandbox": {"backend": "local", "python": args.python, "gpus": args.gpus,
                                                   "slots_per_gpu": args.slots_per_gpu}})
    slots = execution_slots(config)
    sandbox = make_sandbox(config)
    groups = [g.names for g in sandbox.gpu_groups]
    root = Path(tempfile.mkdtemp(prefix="gpu-slots-"))
    os.chmod(root, 0o755)
    public = root / "public"
    public.mkdir(mode=0o755)
    (public / "train.csv").write_text("id,y\n1,2\n")
    os.chmod(public / "train.csv", 0o644)
    print(f"sandbox.gpus={args.gpus} slots_per_gpu={args.slots_per_gpu}: device groups {groups}, "
          f"{slots} execution slots", flush=True)

    samples: list[dict] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_nvidia_smi, args=(stop, samples), daemon=True)
    sampler.start()
    results: list = [None] * slots
    code = program(True, args.mib, args.seconds)

    def run(i: int) -> None:
        try:
            results[i] = sandbox.execute(code, root / f"node{i}", public, timeout=args.seconds + 240)
        except Exception as exc:  # noqa: BLE001 - reported as a failed check
            results[i] = exc

    started = time.time()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - started
    stop.set()
    sampler.join(5)

    plain = make_sandbox(RunConfig.model_validate({"sandbox": {"backend": "local", "python": args.python}}))
    bare = plain.execute(program(False, 0, 0), root / "no-gpu", public, timeout=240)

    checks: list[tuple[str, bool, str]] = []
    executions = []
    for i, res in enumerate(results):
        if isinstance(res, Exception):
            executions.append({"error": f"{type(res).__name__}: {res}"})
            continue
        executions.append({"ok": res.ok, "exc_type": res.exc_type, "exec_time": round(res.exec_time, 2),
                           "seen": _seen(res.stdout, "SEEN"), "held": _seen(res.stdout, "HELD"),
                           "stderr_tail": res.stderr[-600:]})
    ok = [e for e in executions if e.get("ok")]
    checks.append(("every execution ended well", len(ok) == slots,
                   "; ".join(e.get("error") or f"ok={e.get('ok')} {e.get('exc_type') or ''} {e.get('stderr_tail', '')[-200:]}"
                             for e in executions)))
    for i, e in enumerate(executions):
        seen = e.get("seen") or {}
        nodes = [n for n in seen.get("dev_nvidia", []) if n not in CONTROL]
        good = seen.get("device_count") == 1 and len(nodes) == 1 and bool(seen.get("cuda_visible_devices")) \
            and bool(re.fullmatch(r"/dev/nvidia\d+", nodes[0] if nodes else ""))
        checks.append((f"execution {i} saw only its group", good,
                       f"CUDA_VISIBLE_DEVICES={seen.get('cuda_visible_devices')} device_count={seen.get('device_count')} "
                       f"({seen.get('device_name')}) /dev/nvidia*={seen.get('dev_nvidia')} {seen.get('error') or ''}"))
    for i, e in enumerate(executions):
        listed = [line for line in (e.get("seen") or {}).get("nvidia_smi", []) if line.startswith("GPU ")]
        checks.append((f"nvidia-smi in execution {i} lists only its group", len(listed) == 1,
                       f"{(e.get('seen') or {}).get('nvidia_smi')} (driver directories: "
                       f"{(e.get('seen') or {}).get('proc_gpus')})"))
    visible = {(e.get("seen") or {}).get("cuda_visible_devices") for e in executions}
    checks.append(("executions of one GPU share it", len(visible) == len(groups), f"groups seen: {sorted(map(str, visible))}"))
    most = max(samples, key=lambda s: sum(len(p) for p in s["procs"].values()), default={"procs": {}, "gpus": {}})
    at_once = sum(len(p) for p in most["procs"].values())
    held_mib = sum(q["mib"] for p in most["procs"].values() for q in p)
    if held_mib != held_mib or held_mib == 0:  # per-process memory not reported (NaN): the GPUs' memory in use
        held_mib = sum(g["mib"] for g in most["gpus"].values())
    checks.append(("the host saw every execution on the GPU at once", at_once >= slots,
                   f"{at_once} compute processes in one nvidia-smi sample ({held_mib:.0f} MiB together; "
                   f"{len(samples)} samples): {most['procs']}"))
    checks.append(("together they held at least their memory", held_mib >= slots * args.mib,
                   f"{held_mib:.0f} MiB >= {slots} x {args.mib} MiB"))
    seen = _seen(bare.stdout, "SEEN")
    checks.append(("a sandbox without sandbox.gpus sees no GPU",
                   bare.ok and not seen.get("dev_nvidia") and seen.get("device_count") in (0, None),
                   f"/dev/nvidia*={seen.get('dev_nvidia')} device_count={seen.get('device_count')} "
                   f"CUDA_VISIBLE_DEVICES={seen.get('cuda_visible_devices')!r}"))

    for name, passed, detail in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {name}: {detail}", flush=True)
    summary = {"gpus": args.gpus, "slots_per_gpu": args.slots_per_gpu, "groups": groups, "slots": slots,
               "wall_s": round(wall, 2), "executions": executions, "peak_sample": most,
               "max_util": max((g["util"] for s in samples for g in s["gpus"].values()), default=None),
               "no_gpu_sandbox": seen, "checks": [{"name": n, "pass": p, "detail": d} for n, p, d in checks]}
    print(json.dumps(summary, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    return 0 if all(p for _, p, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
