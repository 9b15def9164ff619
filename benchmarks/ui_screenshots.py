"""Screenshots of the Prefect UI after a small offline run (issue 6: "checked in a real browser").

Starts ``prefect server start`` on a free port (its own PREFECT_HOME in a temporary directory,
``PREFECT_SERVER_UI_API_URL`` set so the UI reaches the API), prepares ``sklearn-breast-cancer``
and runs ``swarm-evo run`` against that server with the offline model, finds the flow run and
its artifacts through the API, and drives headless Chromium (Debian's ``/usr/bin/chromium``;
``apt-get install chromium`` if missing) over the DevTools protocol to take screenshots::

    python benchmarks/ui_screenshots.py [--out docs/screenshots] [--max-steps 8] [--keep]

Pictures written to ``--out``:

- ``flow-run-graph.png``: the two-phase-evo flow run page (the run graph with the phase1-draft
  and phase2-evolve subflows, the publishing tasks and their artifacts; the Logs tab below);
- ``phase2-flow-run-graph.png``: the phase2-evolve subflow's page (its step subflows);
- ``flow-run-artifacts.png``: the two-phase-evo run page after clicking its Artifacts tab;
- ``final-report-artifact.png``: the final report artifact's page, once its inline images
  (the best-fitness chart, the tree preview) have loaded;
- ``tree-link-artifact.png``: the link artifact naming the evolution tree's HTML file;
- ``evolution-tree-html.png``: the run's ``evolution_tree.html`` opened from its file;
- ``best-fitness.png``: a copy of the run's chart file.

It prints the run's artifacts, the data-URI images the report page loaded (type and natural
size: proof the UI rendered them) and the paths of the pictures.

The server is stopped (its process group) and the temporary directory removed at the end
unless ``--keep`` is given, which prints where it is and leaves the server running until Enter.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(api: str, server: subprocess.Popen, timeout: float = 180.0) -> None:
    """Wait until ``GET {api}/health`` answers; raise if the server exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prefect server exited with {server.returncode}")
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"no answer from {api}/health after {timeout:.0f} s")


class Browser:
    """Headless Chromium driven over the DevTools protocol (CDP): navigate, wait for a condition
    in the page, click, and capture PNGs. ``chromium --screenshot`` alone cannot switch a tab
    of the single-page UI or wait for an image to load."""

    def __init__(self, profile: Path, size: tuple[int, int] = (1400, 1000)) -> None:
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={size[0]},{size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
        url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        self.ws = connect(url, max_size=None, open_timeout=30)
        self.next_id = 0
        self.size = size

    def call(self, method: str, **params) -> dict:
        """Send one CDP command and return its result (events in between are dropped)."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=120))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def eval(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, settle: float = 1.5):
        """Poll until ``expression`` is truthy, then let the page settle; returns its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                time.sleep(settle)
                return value
            time.sleep(0.5)
        raise TimeoutError(f"page never satisfied: {expression}")

    def goto(self, url: str, size: tuple[int, int] | None = None) -> None:
        """Open ``url`` in a viewport of ``size`` CSS pixels."""
        width, height = size or self.size
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", settle=0.5)

    def screenshot(self, out: Path) -> Path:
        """The viewport as a PNG file."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        """Close the connection and stop our Chromium (its process group)."""
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


CLICK_TAB = """(() => {
  const tab = [...document.querySelectorAll('.p-tab, [role=tab], button')]
    .find(e => e.textContent.trim() === %s && e.offsetParent !== null);
  if (!tab) { return false; }
  tab.click();
  return true;
})()"""

IMAGES = """[...document.images].filter(i => i.src.startsWith('data:image/'))
  .map(i => ({type: i.src.slice(5, i.src.indexOf(';')), loaded: i.complete,
              width: i.naturalWidth, height: i.naturalHeight}))"""


def take_screenshots(ui: str, api: str, run_dir: Path, out: Path, profile: Path) -> dict:
    """Open the run's pages in Chromium, save the PNGs under ``out``; return what was seen."""
    run_id = api_post(api, "/flow_runs/filter",
                      {"flows": {"name": {"any_": ["two-phase-evo"]}}, "sort": "START_TIME_DESC", "limit": 1})[0]["id"]
    phase2 = api_post(api, "/flow_runs/filter", {"flows": {"name": {"any_": ["phase2-evolve"]}}, "limit": 1})
    artifacts = api_post(api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}})
    by_key = {a["key"]: a for a in artifacts if a.get("key")}
    report = next(a for key, a in by_key.items() if key.endswith("-report"))
    seen: dict = {"flow_run": f"{ui}/runs/flow-run/{run_id}",
                  "artifacts": sorted(f"{key} ({a['type']})" for key, a in by_key.items())}
    shots = []
    browser = Browser(profile)
    try:
        browser.goto(f"{ui}/runs/flow-run/{run_id}", (1400, 1000))
        browser.wait_for("document.querySelector('canvas') !== null", settle=5)
        shots.append(browser.screenshot(out / "flow-run-graph.png"))

        if phase2:  # a phase flow's own page: its graph shows the step subflows
            browser.goto(f"{ui}/runs/flow-run/{phase2[0]['id']}", (1400, 1000))
            browser.wait_for("document.querySelector('canvas') !== null", settle=5)
            shots.append(browser.screenshot(out / "phase2-flow-run-graph.png"))

        browser.goto(f"{ui}/runs/flow-run/{run_id}", (1400, 1500))
        browser.wait_for(CLICK_TAB % json.dumps("Artifacts"))
        browser.wait_for(f"document.body.innerText.includes({json.dumps(report['key'])})", settle=3)
        seen["artifacts_tab_url"] = browser.eval("location.href")
        shots.append(browser.screenshot(out / "flow-run-artifacts.png"))

        browser.goto(f"{ui}/artifacts/artifact/{report['id']}", (1400, 1000))
        browser.wait_for(f"({IMAGES}).length >= 1 && ({IMAGES}).every(i => i.loaded)", settle=2)
        seen["report_images"] = browser.eval(IMAGES)
        # the UI scrolls an inner element, not the document: take the tallest scroll height
        height = browser.eval("Math.max(...[...document.querySelectorAll('*')].map(e => e.scrollHeight))")
        browser.goto(f"{ui}/artifacts/artifact/{report['id']}", (1400, min(int(height or 3000) + 40, 4000)))
        browser.wait_for(f"({IMAGES}).length >= 1 && ({IMAGES}).every(i => i.loaded)", settle=2)
        shots.append(browser.screenshot(out / "final-report-artifact.png"))

        tree = next((a for key, a in by_key.items() if key.endswith("-tree")), None)
        if tree is not None:
            browser.goto(f"{ui}/artifacts/artifact/{tree['id']}", (1400, 700))
            browser.wait_for(f"document.body.innerText.includes({json.dumps(tree['key'])})", settle=2)
            shots.append(browser.screenshot(out / "tree-link-artifact.png"))

        browser.goto((run_dir / "evolution_tree.html").as_uri(), (1400, 900))
        browser.wait_for("document.querySelector('svg.tree') !== null", settle=0.5)
        shots.append(browser.screenshot(out / "evolution-tree-html.png"))
    finally:
        browser.close()
    shutil.copyfile(run_dir / "best_fitness.png", out / "best-fitness.png")
    shots.append(out / "best-fitness.png")
    seen["screenshots"] = [str(p) for p in shots]
    return seen


def api_post(api: str, path: str, body: dict) -> list[dict]:
    """POST a filter to the Prefect API; return the JSON list."""
    response = httpx.post(f"{api}{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def main(argv: list[str] | None = None) -> int:
    """Run the check; print the screenshot paths. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--keep", action="store_true", help="leave the server up until Enter")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="swarm-evo-ui-"))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = dict(
        os.environ,
        PREFECT_HOME=str(tmp / "prefect-home"),
        PREFECT_API_URL=api,
        PREFECT_SERVER_UI_API_URL=api,
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        MPLCONFIGDIR=str(tmp / "mpl"),
    )
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(
        ["prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        wait_healthy(api, server)
        print(f"prefect server on http://127.0.0.1:{port} (log {tmp / 'server.log'})")
        data, run_dir = tmp / "data", tmp / "run-ui-check"
        config = tmp / "config.yaml"
        config.write_text(
            "search:\n  phase1_target_nodes: 3\n  steps_per_epoch: 3\nmodel:\n  fault_rate: 0.4\n  repair_rate: 0.7\n"
        )
        subprocess.run(["swarm-evo", "prepare", "sklearn-breast-cancer", "--data-dir", str(data)],
                       env=env, check=True, capture_output=True)
        started = time.monotonic()
        subprocess.run(
            ["swarm-evo", "run", "--competition-id", "sklearn-breast-cancer", "--data-dir", str(data),
             "--model", "offline", "--max-steps", str(args.max_steps), "--seed", "0",
             "--run-dir", str(run_dir), "--config", str(config)],
            env=env, check=True, stdout=subprocess.DEVNULL, stderr=open(tmp / "run.log", "w"),
        )
        print(f"run of {args.max_steps} steps took {time.monotonic() - started:.1f} s ({run_dir})")
        seen = take_screenshots(f"http://127.0.0.1:{port}", api, run_dir, out, tmp / "chromium")
        print(json.dumps(seen, indent=1))
        if args.keep:
            print(f"--keep: server at http://127.0.0.1:{port}, files in {tmp}; press Enter to stop")
            input()
        return 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # our own server's process group
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
