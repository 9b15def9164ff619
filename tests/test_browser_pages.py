"""A run's pages in a real headless browser (issue 54): Debian's ``chromium`` driven by selenium
through ``/usr/bin/chromedriver`` (``.ci/run`` installs both; elsewhere the test is skipped when
they are missing). The server is the one docs/prefect.md gives for the UI,
``deployments/local_server.py`` (issue 54, item 6), on a fresh database; one small offline run
against it (programs that fail: dead nodes after a debug attempt); then in the browser: the final
report names as best node the node the run handed in, the lineage artifact and the evolution tree
(``RUN_DIR/evolution_tree.html``) mark that node best, a dead node's page shows its error and its
debug fix as a diff, and the state message of its step's run ("dead after ...").
The UI's pages after the first are reached through its own router (``history.pushState``), not
reloaded: ≈ 0.5 s a page instead of ≈ 5."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1000", "--disable-dev-shm-usage"]
"""docs: /work/shared/NOTES.md (without the background-networking flags Chromium keeps calling out)."""
REPO = Path(__file__).resolve().parents[1]


def _browser_or_skip():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs chromium, chromium-driver and selenium (.ci/run); missing: {missing}")
        pytest.skip(f"no headless browser here: {missing}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ui_server(tmp: Path) -> tuple[subprocess.Popen, str]:
    """``deployments/local_server.py`` (the project's server for the UI: Prefect's, SQLite through
    one connection) on a fresh database, copied from the migrated template a run's API keeps
    (``flows._api_server.database_template``) when there is one."""
    from flows._api_server import database_template

    port = _free_port()
    home = tmp / "ui-home"
    home.mkdir()
    if database_template().exists():
        shutil.copyfile(database_template(), home / "prefect.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home))
    log = (tmp / "ui-server.log").open("w")
    proc = subprocess.Popen([sys.executable, str(REPO / "deployments" / "local_server.py"),
                             "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def _wait_healthy(proc: subprocess.Popen, base: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert proc.poll() is None, f"the UI server exited: {log.read_text()[-2000:]}"
        time.sleep(0.3)
    pytest.fail(f"the UI server did not answer in 90 s: {log.read_text()[-2000:]}")


def _latest(key: str):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_latest_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    assert found, key
    return found[0]


@pytest.mark.slow
def test_a_runs_pages_in_a_headless_browser(tmp_path):
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from flows.two_phase_evo import two_phase_evo
    from swarm_evo.cli.commands import main

    started = time.monotonic()

    def mark(what: str) -> None:  # where the seconds go (shown with a failure, or with -s)
        print(f"{time.monotonic() - started:6.1f} s  {what}")

    proc, base = _ui_server(tmp_path)  # starts while the data are prepared
    driver = api = None
    try:
        options = Options()
        options.binary_location = CHROMIUM
        for flag in FLAGS + [f"--user-data-dir={tmp_path / 'chromium'}"]:
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)  # idle while the run goes
        assert main(["prepare", "sklearn-breast-cancer", "--data-dir", str(tmp_path / "data")]) == 0
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 4, "debug_max_attempts": 1, "final_refit": False},
                                          "model": {"fault_rate": 0.5, "repair_rate": 0.0}}))
        run_dir = tmp_path / "browser-run"
        mark("browser started, data prepared")
        _wait_healthy(proc, base, tmp_path / "ui-server.log")
        mark("server up")
        api = temporary_settings({PREFECT_API_URL: base + "/api", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
        api.__enter__()  # left in the finally clause
        summary = two_phase_evo(competition_id="sklearn-breast-cancer", data_dir=str(tmp_path / "data"),
                                run_dir=str(run_dir), model="offline", max_steps=3, seed=0, parallel_workers=2,
                                config_path=str(config))
        mark("run ended")
        nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
        hand_in = summary["hand_in"]
        dead = [n for n in nodes if n["dead"]]
        assert hand_in["node_id"] and dead, "the seed gives a valid node and a dead one"

        def page(url: str, *texts: str) -> str:
            if url.startswith(base) and driver.current_url.startswith(base):  # within the UI: its router, no reload
                driver.execute_script("history.pushState({}, '', arguments[0]);"
                                      "window.dispatchEvent(new PopStateEvent('popstate', {state: {}}))", url[len(base):])
            else:
                driver.get(url)
            try:
                WebDriverWait(driver, 30).until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text for t in texts))
            except TimeoutException:
                pytest.fail(f"{url} did not show {texts} in 30 s; it shows: {driver.find_element(By.TAG_NAME, 'body').text[:3000]}")
            return driver.find_element(By.TAG_NAME, "body").text

        def artifact(key: str, *texts: str) -> str:
            found = _latest(key)
            try:
                urllib.request.urlopen(f"{base}/api/artifacts/{found.latest_id}", timeout=10).close()
            except OSError as exc:
                pytest.fail(f"the UI's API does not have artifact {key} ({exc}); {proc.args}; "
                            f"{(tmp_path / 'ui-server.log').read_text()[-3000:]}")
            return page(f"{base}/artifacts/artifact/{found.latest_id}", *texts)

        # the best node is the hand-in: in the report, the lineage page and the tree
        step = hand_in["step"]
        report = artifact("browser-run-report", "Handed in:")
        assert f"Best node step {step} (" in report and f"Handed in: node {hand_in['node_id'][:8]} (step {step})" in report
        mark("report page")
        lineage = artifact("browser-run-lineage", "Best so far:")
        assert f"Best so far: step {step} (" in lineage

        # a dead node: its error on its page, and its step run's state message (the sidebar); the fix as a diff
        node = dead[0]
        text = artifact(f"browser-run-node-{node['step']}-{node['id'][:8]}", "Error", "Debug chain", "dead after")
        assert node["exc_type"] and f"{node['exc_type']}:" in text.split("Error", 1)[1]
        assert "@@ -" in text.split("Debug chain", 1)[1], "the debug attempt's fix is shown as a diff"
        assert f"step{node['step']}-draft-{node['id'][:8]}" in text  # the page names the step's flow run
        mark("lineage and node pages")

        page((run_dir / "evolution_tree.html").as_uri(), "Evolution tree")
        best = driver.find_elements(By.CSS_SELECTOR, "svg.tree .node.best")
        assert [g.get_attribute("data-id") for g in best] == [hand_in["node_id"]]
        best[0].click()
        assert f'"id": "{hand_in["node_id"]}"' in driver.find_element(By.ID, "details").text
        mark("tree")
    finally:
        if driver is not None:
            driver.quit()
        if api is not None:
            api.__exit__(None, None, None)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp_path / "chromium", ignore_errors=True)
