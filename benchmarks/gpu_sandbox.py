"""GPU passthrough of the local sandbox, checked on a machine with an NVIDIA GPU (SPEC §10).

Run it on the GPU machine, with the interpreter that holds torch as the programs' interpreter::

    python benchmarks/gpu_sandbox.py [--python PYTHON] [--seconds 20] [--json FILE]

It builds the sandbox a run builds (:func:`swarm_evo.sandbox.factory.make_sandbox`, ``sandbox.backend:
local``, ``sandbox.python: PYTHON``, default this interpreter; ``sandbox.gpus: all``: since issue 52 a local
program sees no GPU unless the run is given GPUs) and runs three programs through it:

1. **train**: an MLP trained with torch on CUDA for ``--seconds`` on a public training set
   (``input/train.csv``, 40 features, 4 classes, made by scikit-learn's ``make_classification``),
   writing its predictions for ``input/test.csv`` to ``submission/submission.csv``. While it runs the
   host samples ``nvidia-smi`` every 0.25 s (GPU utilisation, memory in use, the compute processes
   and their uids): that the GPU was used is the host's measurement; what the program prints (its
   device, its peak memory) is shown beside it as a claim. The host grades the submission against
   the answers that lie next to the public data (scikit-learn's ``accuracy_score``). The same
   program first probes its confinement: the answers' absolute path, this script's path, ``/root``,
   a secret the host holds in its environment, a TCP server the host listens on at 127.0.0.1, its
   uid, ``/dev/nvidia*`` and the processes it sees.
2. **timeout**: a program that keeps the GPU busy forever, limited to 10 s: killed at the limit
   (``timed_out``), and afterwards no process of it holds the GPU (nvidia-smi's compute processes).
3. **memory**: with ``sandbox.memory_limit_mb`` 4096 and then 16384, a program that initialises
   CUDA and then takes three times the limit in host memory: CUDA starts under the limit, the
   allocation is stopped (``MemoryError``).

Prints one line per check (``PASS``/``FAIL`` and what was measured) and a JSON summary (also to
``--json``); the exit status is 1 when a check fails. Nothing here needs the network.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import make_classification
from sklearn.metrics import accuracy_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from swarm_evo.config import RunConfig  # noqa: E402
from swarm_evo.sandbox.confinement import describe_confinement  # noqa: E402
from swarm_evo.sandbox.factory import make_sandbox  # noqa: E402

MEMORY_LIMITS_MB = (4096, 16384)
"""``sandbox.memory_limit_mb`` of the memory check's two runs."""

SECRET = "sk-gpu-check-do-not-leak"
"""Held by the host in ``OPENAI_API_KEY`` and ``HF_TOKEN``; no program may see it."""

PROBES = r'''
import glob, json, os, socket
def _visible(path):
    try:
        with open(path, "rb") as fh:
            return len(fh.read(16)) > 0
    except OSError:
        return False
def _connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False
try:
    root_home = sorted(os.listdir("/root"))
except OSError as exc:
    root_home = type(exc).__name__
print("PROBES " + json.dumps({
    "uid": os.getuid(),
    "answers_visible": _visible(ANSWERS),
    "script_visible": _visible(SCRIPT),
    "root_home": root_home,
    "top_level": sorted(os.listdir("/")),
    "secret_in_env": any(SECRET in v for v in os.environ.values()),
    "host_service_reached": _connect(PORT),
    "nvidia_devices": sorted(glob.glob("/dev/nvidia*")),
    "processes_seen": sum(name.isdigit() for name in os.listdir("/proc")),
}), flush=True)
'''

TRAIN = r'''
import time
import numpy as np, pandas as pd, torch
train, test = pd.read_csv("input/train.csv"), pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
device = torch.device("cuda")
x = torch.tensor(train[features].values, dtype=torch.float32, device=device)
y = torch.tensor(train["target"].values, dtype=torch.long, device=device)
mean, std = x.mean(0), x.std(0)
x = (x - mean) / std
model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                            torch.nn.ReLU(), torch.nn.Linear(2048, 4)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
started, steps, epochs = time.perf_counter(), 0, 0
while time.perf_counter() - started < SECONDS:
    for idx in torch.randperm(len(x), device=device).split(1024):
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    epochs += 1
    print(f"epoch {epochs} step {steps} loss {loss.item():.4f}", flush=True)
torch.cuda.synchronize()
with torch.no_grad():
    xt = (torch.tensor(test[features].values, dtype=torch.float32, device=device) - mean) / std
    pred = model(xt).argmax(1).cpu().numpy()
pd.DataFrame({"id": test["id"], "target": pred}).to_csv("submission/submission.csv", index=False)
print("CLAIMS " + json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                              "cuda": torch.version.cuda, "epochs": epochs, "steps": steps,
                              "train_seconds": round(time.perf_counter() - started, 2),
                              "peak_gpu_mib": torch.cuda.max_memory_allocated() // 2**20}), flush=True)
'''

SPIN = r'''
import torch
x = torch.randn(8192, 8192, device="cuda")
print("spinning on", torch.cuda.get_device_name(0), flush=True)
while True:
    x = x @ x
    x = x / x.norm()
'''

HOG = r'''
import numpy as np, torch
torch.zeros(1, device="cuda")
print("cuda initialised under the limit", flush=True)
hog = np.ones(3 * LIMIT_MB * 2**20 // 8)
print("allocated", hog.nbytes // 2**20, "MiB", flush=True)
'''


class _Hello(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"host service\n")


class GpuSampler:
    """``nvidia-smi`` sampled every ``period`` s in a thread: GPU utilisation (%), memory in use
    (MiB) and the compute processes with their uids (host-side measurement, not the program's word)."""

    def __init__(self, period: float = 0.25) -> None:
        self.period = period
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def read() -> dict:
        """One sample: ``{"t": monotonic s, "util": %, "mem_mib": MiB, "apps": [{"pid", "mib", "uid"}]}``."""
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.split("\n")[0].split(",")
        apps = []
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                apps.append({"pid": int(parts[0]), "mib": _int(parts[1]), "uid": _uid(int(parts[0]))})
        return {"t": time.monotonic(), "util": _int(gpu[0]), "mem_mib": _int(gpu[1]) if len(gpu) > 1 else None,
                "apps": apps}

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.read())
            except (OSError, subprocess.SubprocessError, IndexError) as exc:
                self.samples.append({"t": time.monotonic(), "error": str(exc)})
            self._stop.wait(self.period)

    def __enter__(self) -> "GpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def summary(self, baseline_mib: int | None) -> dict:
        """Peak utilisation, peak memory above ``baseline_mib``, samples with utilisation > 0, uids seen."""
        good = [s for s in self.samples if "error" not in s]
        return {"samples": len(self.samples), "busy_samples": sum((s["util"] or 0) > 0 for s in good),
                "peak_util": max((s["util"] or 0 for s in good), default=None),
                "peak_mem_mib_above_baseline": max(((s["mem_mib"] or 0) - (baseline_mib or 0) for s in good),
                                                   default=None),
                "compute_uids": sorted({a["uid"] for s in good for a in s["apps"] if a["uid"] is not None}),
                "compute_apps_seen": sum(bool(s["apps"]) for s in good),
                "errors": sorted({s["error"] for s in self.samples if "error" in s})[:3]}


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def _uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return None


def _claims(text: str, tag: str) -> dict:
    line = next((ln for ln in text.splitlines() if ln.startswith(tag + " ")), None)
    return json.loads(line[len(tag) + 1:]) if line else {}


def make_competition(root: Path) -> tuple[Path, Path]:
    """``root/public/{train,test}.csv`` (world-readable, as a user's data directory is) and the
    answers ``root/private/answers.csv`` beside them (also world-readable: only the sandbox's
    allow-list hides them). Returns ``(public_dir, answers_path)``."""
    x, y = make_classification(n_samples=60_000, n_features=40, n_informative=24, n_classes=4, random_state=0)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(x.shape[1])])
    frame.insert(0, "id", np.arange(len(frame)))
    public, private = root / "public", root / "private"
    public.mkdir(parents=True)
    private.mkdir()
    frame.iloc[:50_000].assign(target=y[:50_000]).to_csv(public / "train.csv", index=False)
    frame.iloc[50_000:].to_csv(public / "test.csv", index=False)
    answers = private / "answers.csv"
    pd.DataFrame({"id": frame["id"].iloc[50_000:], "target": y[50_000:]}).to_csv(answers, index=False)
    for path in (root, public, private, *public.iterdir(), answers):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return public, answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the programs' interpreter (holds torch)")
    parser.add_argument("--seconds", type=float, default=20.0, help="training time of the train program")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = os.environ["HF_TOKEN"] = SECRET

    root = Path(tempfile.mkdtemp(prefix="gpu-sandbox-"))
    public, answers = make_competition(root)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    probes = (PROBES.replace("ANSWERS", repr(str(answers))).replace("SCRIPT", repr(str(Path(__file__).resolve())))
              .replace("SECRET", repr(SECRET)).replace("PORT", str(server.server_address[1])))

    def sandbox(**overrides):
        config = RunConfig.model_validate({"sandbox": {"backend": "local", "python": args.python, "gpus": "all",
                                                       **overrides}})
        return make_sandbox(config)

    checks: list[tuple[str, bool, str]] = []
    summary: dict = {"host": socket.gethostname(), "euid": os.geteuid(), "python": args.python}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        summary["gpu"] = smi.stdout.strip() or smi.stderr.strip()
        baseline = GpuSampler.read()["mem_mib"]
    except (OSError, subprocess.SubprocessError) as exc:  # no nvidia-smi: every GPU check fails below
        baseline, summary["gpu"] = None, f"nvidia-smi: {exc}"

    # 1. train on CUDA, confined
    box = sandbox()
    summary["confinement"] = describe_confinement(box)
    code = probes + TRAIN.replace("SECONDS", repr(args.seconds))
    with GpuSampler() as sampler:
        started = time.monotonic()
        result = box.execute(code, root / "train", public, timeout=args.seconds + 240)
        wall = time.monotonic() - started
    gpu = sampler.summary(baseline)
    found, claims = _claims(result.stdout, "PROBES"), _claims(result.stdout, "CLAIMS")
    submission = root / "train" / "submission" / "submission.csv"
    accuracy = None
    if submission.is_file():
        truth, pred = pd.read_csv(answers), pd.read_csv(submission)
        accuracy = float(accuracy_score(truth["target"], truth[["id"]].merge(pred, on="id", how="left")["target"]
                                        .fillna(-1)))
    summary["train"] = {"ok": result.ok, "exc": (result.exc_info or result.exc_type) if not result.ok else None,
                        "exec_time": round(result.exec_time, 2), "wall": round(wall, 2), "mode": box.last_mode,
                        "gpu_measured": gpu, "claims": claims, "probes": found, "accuracy": accuracy,
                        "stderr_tail": result.stderr[-1500:] if not result.ok else ""}
    user = 65534 if os.geteuid() == 0 else os.getuid()
    checks.append(("train program ran to the end on CUDA", result.ok and bool(claims), summary["train"]["exc"] or
                   f"{claims.get('device')}, {claims.get('epochs')} epochs, {claims.get('steps')} steps in "
                   f"{claims.get('train_seconds')} s (claimed); exec_time {result.exec_time:.1f} s"))
    checks.append(("GPU used, measured by the host (nvidia-smi)", (gpu["peak_util"] or 0) > 0 and
                   (gpu["peak_mem_mib_above_baseline"] or 0) > 100,
                   f"peak utilisation {gpu['peak_util']} %, {gpu['busy_samples']}/{gpu['samples']} samples busy, "
                   f"peak memory +{gpu['peak_mem_mib_above_baseline']} MiB; compute processes' uids "
                   f"{gpu['compute_uids']} (program user {user})"))
    checks.append(("submission graded by the host", accuracy is not None and accuracy > 0.5,
                   f"accuracy {accuracy} on 10,000 rows (chance 0.25)"))
    checks.append(("GPU devices inside", bool(found.get("nvidia_devices")), str(found.get("nvidia_devices"))))
    checks.append(("runs as the program user", found.get("uid") == user, f"uid {found.get('uid')}"))
    hidden = found and not any(found.get(k) for k in ("answers_visible", "script_visible", "secret_in_env",
                                                       "host_service_reached"))
    checks.append(("answers, host files, secrets and host services out of reach", bool(hidden),
                   f"answers {found.get('answers_visible')}, this script {found.get('script_visible')}, "
                   f"secret {found.get('secret_in_env')}, 127.0.0.1 service {found.get('host_service_reached')}; "
                   f"/root {found.get('root_home')}; / holds {found.get('top_level')}; "
                   f"{found.get('processes_seen')} processes seen"))

    # 2. the timeout holds, and nothing of the program keeps the GPU
    result = box.execute(probes + SPIN, root / "spin", public, timeout=10)
    after: dict = {"apps": ["not read"], "mem_mib": None}
    for _ in range(20):  # the driver frees a killed process's memory within moments
        try:
            after = GpuSampler.read()
        except (OSError, subprocess.SubprocessError) as exc:
            after = {"apps": [str(exc)], "mem_mib": None}
            break
        if not after["apps"] and (after["mem_mib"] or 0) <= (baseline or 0) + 64:
            break
        time.sleep(0.5)
    summary["timeout"] = {"timed_out": result.timed_out, "exc_type": result.exc_type,
                          "exec_time": round(result.exec_time, 2), "apps_after": after["apps"],
                          "mem_mib_after": after["mem_mib"], "baseline_mib": baseline,
                          "stdout_head": result.stdout[-300:]}
    checks.append(("timeout kills a GPU-bound program, the GPU is free after", result.timed_out and "spinning" in
                   result.stdout and not after["apps"] and (after["mem_mib"] or 0) <= (baseline or 0) + 64,
                   f"timed_out {result.timed_out} after {result.exec_time:.1f} s; compute processes after: "
                   f"{after['apps']}; memory {after['mem_mib']} MiB (before: {baseline})"))

    # 3. the memory limit holds for a CUDA program (two limits: does CUDA start under a small one?)
    summary["memory"] = []
    for limit in MEMORY_LIMITS_MB:
        result = sandbox(memory_limit_mb=limit).execute(HOG.replace("LIMIT_MB", str(limit)), root / f"hog{limit}",
                                                        public, timeout=180)
        summary["memory"].append({"limit_mb": limit, "exc_type": result.exc_type, "exc_info": result.exc_info,
                                  "stdout": result.stdout[-300:], "exec_time": round(result.exec_time, 2)})
        checks.append((f"memory limit ({limit} MiB) stops a CUDA program's host allocation",
                       "cuda initialised" in result.stdout and result.exc_type == "MemoryError"
                       and "allocated" not in result.stdout,
                       f"{result.exc_info or result.exc_type}; stdout {result.stdout.strip()[-120:]!r}"))

    server.shutdown()
    summary["checks"] = [{"check": name, "pass": ok, "measured": text} for name, ok, text in checks]
    for name, ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {text}")
    print(json.dumps(summary, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=str))
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
