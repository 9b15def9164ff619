"""Shared fixtures: one Prefect test server per session, prepared competitions, offline model."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Programs, and the `swarm-evo` processes the tests start, run single-threaded (the sandbox keeps
# a thread count that is already set, `env_scrub.scrub_env`): the suite runs programs side by side
# (two workers under `pytest -n 2`, two steps per search) on 2 cores, where OpenMP's spinning threads
# made one HistGradientBoosting program take 150 s instead of a few (tests/test_same_journal.py).
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import pytest

# Import Prefect (and so configure its console log handler) before any test captures stdout/
# stderr: a handler bound to a capsys stream recurses once that stream is swapped back.
import flows.two_phase_evo  # noqa: E402,F401

from swarm_evo.sandbox import program_env  # noqa: E402
from llm_server.fixture import llm_server, stand_in  # noqa: E402,F401  (one stand-in model server per worker)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BUILT_PROGRAM_ENV = program_env.DEFAULT_ENV_DIR
"""Where `swarm-evo env build` put the program environment (`.ci/run` builds it first)."""


@pytest.fixture(scope="session", autouse=True)
def _programs_run_in_the_project_interpreter(tmp_path_factory):
    """Runs of the suite that do not name an interpreter run their programs with the project's
    own (scikit-learn, pandas, pillow): the default program environment is hidden for the
    session. The search, the sandboxes and the reports behave the same with either; the
    program environment's LightGBM/XGBoost/CatBoost/optuna programs take minutes each, and
    the tests of that environment name it (``programs_python``). Subprocess runs get the
    same through ``sandbox.python`` / ``--python`` (``tests/llm_server/runner.py``)."""
    patch = pytest.MonkeyPatch()
    patch.setattr(program_env, "DEFAULT_ENV_DIR", tmp_path_factory.mktemp("no-program-env") / ".venv-programs")
    yield
    patch.undo()


@contextlib.contextmanager
def session_api(database: Path):
    """A real Prefect API server subprocess for the block, the one a ``swarm-evo run`` starts
    (``flows._api_server.LocalAPIServer``: Prefect's app with its SQLite file ``database`` served
    through one connection, the file copied from the migrated template instead of migrated again),
    and what ``prefect_test_harness`` does around it: ``PREFECT_API_URL`` pointed at it, the log
    and event workers drained before it stops. On ``prefect_test_harness``'s own server (a pool
    of connections to one file) concurrent writers (two runs of a sweep, a run's subflows beside
    the server's event and task-run services) failed with "database is locked"; the server
    answers those 503 and Prefect's client backs off 2, 4, 8, 16 s, which stretched single tests
    from 33 s to 216 s (flows/_api_app.py)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings

    from flows._api_server import LocalAPIServer

    with temporary_settings({PREFECT_SERVER_DATABASE_CONNECTION_URL: f"sqlite+aiosqlite:///{database}"}):
        server = LocalAPIServer()  # a free port
        server.start(timeout=120)
        try:
            with temporary_settings({PREFECT_API_URL: server.api_url}):
                yield server.api_url
                APILogWorker.drain_all(timeout=10)
                EventsWorker.drain_all(timeout=10)
        finally:
            server.stop()


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """A real Prefect API for the session (:func:`session_api`), heartbeats off (they add ≈1 s per
    subflow and only matter for crash detection in production)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with session_api(tmp_path_factory.mktemp("session-api") / "prefect.db"):
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


@pytest.fixture(scope="session")
def prefect_api_url(prefect_server) -> str:
    """The session Prefect API's URL, for `swarm-evo` processes the tests start (``PREFECT_API_URL``):
    without it each process starts and migrates an ephemeral API of its own (seconds per run)."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


TEST_ROWS = {"spaceship-titanic": 1500, "spooky-author-identification": 2000}
"""Rows of the raw training file the suite's searches use: a fixed random sample of the real
Kaggle rows (``DataFrame.sample(n, random_state=0)``, in file order), prepared with MLE-bench's
split as usual. Programs train on a sixth of spaceship-titanic (8,693 rows) and a tenth of spooky
(19,579 texts); the code paths, the columns and the grading are the same, and the offline
model's programs take seconds instead of up to a minute (a RandomForest over 5 folds, CatBoost
with an optuna study): as many rows as house-prices (1,460, used whole). Half the earlier 3,000 and
4,000 rows halved a program's fits (3-fold CV and refit, 20 features, one thread: RandomForest
150 trees 4.5 -> 2.0 s of CPU, GradientBoosting 7.5 -> 3.6 s); the programs' starts and the runs
around them stay, so whole tests gain less (test_flow_e2e.py and test_hidden_fitness_runs.py:
163 and 187 s of machine CPU with 3,000 rows, 157 and 149 s with 1,500). Tests of the preparation itself
(tests/test_competition_prepare.py, the MLE-bench checksums) prepare the full files."""


def sampled_raw_dir(competition_id: str, root: Path) -> Path:
    """A copy of ``../shared/data/<competition_id>`` under ``root`` (``raw/`` and the
    description) whose ``raw/train.csv`` keeps :data:`TEST_ROWS` rows; the original directory
    when the competition is not capped."""
    import shutil

    import pandas as pd

    source = SHARED_DATA / competition_id
    rows = TEST_ROWS.get(competition_id)
    if rows is None:
        return source / "raw"
    raw = root / competition_id / "raw"
    raw.mkdir(parents=True)
    for path in (source / "raw").iterdir():
        if path.name != "train.csv":
            shutil.copy(path, raw / path.name)
    train = pd.read_csv(source / "raw" / "train.csv", float_precision="round_trip")
    train.sample(n=rows, random_state=0).sort_index().to_csv(raw / "train.csv", index=False)
    if (source / "description.md").is_file():
        shutil.copy(source / "description.md", root / competition_id / "description.md")
    return raw


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """A data directory with spaceship-titanic, house-prices and spooky prepared from ../shared
    (spaceship-titanic and spooky on :data:`TEST_ROWS` rows of their real training files)."""
    from swarm_evo.competition import prepare_competition

    root = tmp_path_factory.mktemp("data")
    raw_root = tmp_path_factory.mktemp("raw-sample")
    for cid in ("spaceship-titanic", "house-prices", "spooky-author-identification"):
        prepare_competition(cid, sampled_raw_dir(cid, raw_root), root)
    return root


@pytest.fixture(scope="session")
def programs_python() -> str:
    """The interpreter of the program environment (`swarm-evo env build`, profile tabular: the
    Kaggle stack), which `.ci/run` builds before the tests (cached by its requirements hash).

    Fails (never skips) when it is missing: running programs that import LightGBM, XGBoost and
    CatBoost is a feature under test. ``SWARM_EVO_PROGRAMS_PYTHON`` names another interpreter.
    """
    if os.environ.get("SWARM_EVO_PROGRAMS_PYTHON"):
        return os.environ["SWARM_EVO_PROGRAMS_PYTHON"]
    if program_env.read_marker(BUILT_PROGRAM_ENV) is None:
        pytest.fail(f"no program environment at {BUILT_PROGRAM_ENV}: run `.venv/bin/swarm-evo env build` (see .ci/run)")
    return str(program_env.env_python(BUILT_PROGRAM_ENV))


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


SLOW_FIXTURES = frozenset({"prefect_server", "docker_client", "stand_in", "llm_server", "programs_python"})
"""A test that needs one of these (directly or through another fixture) is ``slow``: a Prefect
API, the Docker engine, the stand-in model server or the program environment's libraries. So is
a case whose backend parameter is ``"docker"`` (it asks for ``docker_client`` when it runs)."""


def pytest_collection_finish(session):
    """Everything the imports and the collection made (Prefect, litellm, pandas, scikit-learn, the
    test modules) is frozen, as a ``swarm-evo`` command freezes what its imports made
    (swarm_evo/run/heap.py): the collections of the tests that follow never walk it."""
    from swarm_evo.run import heap

    heap.settle()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """Marks ``slow`` every test that uses a :data:`SLOW_FIXTURES` fixture (others carry the mark
    themselves: real programs, subprocess runs), so ``pytest -m "not slow"`` is the quick loop.

    Under pytest-xdist (``-n N --dist loadgroup``, what `.ci/run` uses) the tests of a module with a
    module-scoped fixture (a search that several tests read) run on one worker (an ``xdist_group``
    named after the module), so that fixture runs once, not once per worker; other tests go to
    whichever worker is free. Every test that uses the real Docker engine, and every test of the
    hostile-program modules, shares one group ("serial"), in file order: the "ends within the
    timeout + 5 s" bounds of the hostile-program tests assume no other worker loads the CPUs with
    its own hostile programs or containers meanwhile, and the Docker engine's session check (no
    container of ours left behind) assumes no other worker has containers running."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        docker_case = callspec is not None and "docker" in callspec.params.values()  # a backend parameter
        if docker_case or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        module = item.module.__name__
        if docker_case or "docker_client" in getattr(item, "fixturenames", ()) or module.startswith("test_hostile"):
            item.add_marker(pytest.mark.xdist_group("serial"))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(module))


def _uses_a_module_fixture(item) -> bool:
    """Whether ``item`` needs a fixture scoped to its module or class (run once per worker that
    runs one of the module's tests)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(defs and defs[-1].scope in ("module", "class") for defs in definitions)
