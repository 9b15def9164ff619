"""Shared fixtures: one Prefect test server per session, prepared competitions, offline model."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

import pytest

# Import Prefect (and so configure its console log handler) before any test captures stdout/
# stderr: a handler bound to a capsys stream recurses once that stream is swapped back.
import flows.two_phase_evo  # noqa: E402,F401

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def prefect_server():
    """A real Prefect API on a temporary SQLite DB (prefect_test_harness), heartbeats off
    (they add ≈1 s per subflow and only matter for crash detection in production)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """A data directory with spaceship-titanic, house-prices and spooky prepared from ../shared."""
    from swarm_evo.competition import prepare_competition

    root = tmp_path_factory.mktemp("data")
    for cid in ("spaceship-titanic", "house-prices", "spooky-author-identification"):
        prepare_competition(cid, SHARED_DATA / cid / "raw", root)
    return root


@pytest.fixture(scope="session")
def programs_python() -> str:
    """The interpreter of the program environment (`swarm-evo env build`, profile tabular: the
    Kaggle stack), which `.ci/run` builds before the tests (cached by its requirements hash).

    Fails (never skips) when it is missing: running programs that import LightGBM, XGBoost and
    CatBoost is a feature under test. ``SWARM_EVO_PROGRAMS_PYTHON`` names another interpreter.
    """
    from swarm_evo.sandbox.program_env import DEFAULT_ENV_DIR, env_python, read_marker

    if os.environ.get("SWARM_EVO_PROGRAMS_PYTHON"):
        return os.environ["SWARM_EVO_PROGRAMS_PYTHON"]
    if read_marker(DEFAULT_ENV_DIR) is None:
        pytest.fail(f"no program environment at {DEFAULT_ENV_DIR}: run `.venv/bin/swarm-evo env build` (see .ci/run)")
    return str(env_python(DEFAULT_ENV_DIR))


def _our_containers(client) -> list:
    from swarm_evo.sandbox.docker_sandbox import LABEL

    return client.containers.list(all=True, filters={"label": LABEL})


@pytest.fixture(scope="session")
def docker_client():
    """The real Docker engine; the sandbox image must exist (CI builds it before the tests).

    Fails (never skips) when the engine or the image is missing: the Docker backend is a
    feature under test. At the end of the session no container of ours may be left behind.
    """
    import docker

    from swarm_evo.sandbox import DEFAULT_IMAGE

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"no Docker engine answers ({exc}): start dockerd (see .ci/run)")
    try:
        client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"image {DEFAULT_IMAGE} missing: bash deployments/build-sandbox-image-offline.sh")
    before = {c.id for c in _our_containers(client)}
    yield client
    left = [c.name for c in _our_containers(client) if c.id not in before]
    assert not left, f"containers left behind by the Docker sandbox: {left}"


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n N --dist loadgroup``) every test of a module that uses the real
    Docker engine or times hostile programs runs on one worker, in file order: the
    ``docker_client`` fixture's check that no container of ours is left behind, and the
    "ends within the timeout + 5 s" bounds of the hostile-program tests, assume no other
    worker starts containers or loads the CPUs with its own hostile programs meanwhile."""
    serial_modules = {item.module.__name__ for item in items
                      if "docker_client" in getattr(item, "fixturenames", ()) or item.module.__name__.startswith("test_hostile")}
    for item in items:
        if item.module.__name__ in serial_modules:
            item.add_marker(pytest.mark.xdist_group("serial"))
