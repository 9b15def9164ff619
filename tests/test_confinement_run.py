"""A search whose programs hunt for the answers ends with a real score (issue 32).

``swarm-evo run`` on spaceship-titanic against the stand-in model server, scenario
``answer_hunt``: every draft looks for ``prepared/private/test.csv`` (its ``input`` mount in
``/proc/self/mountinfo``, ``..`` of ``input``, ``/proc/*/root``, the usual roots), for the host's
listening ports, prints what it found (``HUNT: answers=...; ports=...``) and hands the answers
in as its submission when it found them. The data and run directories sit in a world-readable
folder, as a user's would (the README's ``--data-dir data`` inside a checkout). On both
backends no program finds the answers or reaches a port, and the run's score is a real one, not
the answers' 1.0 (before issue 32 the local backend handed the answers in and was graded 1.0).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from conftest import sampled_raw_dir
from llm_server import run_swarm
from llm_server.app import StandInServer

RESULTS: list[tuple] = []


@pytest.fixture(scope="module")
def open_world():
    """A world-readable folder with spaceship-titanic prepared in ``data/`` (the answers in
    ``data/spaceship-titanic/prepared/private/test.csv``), and a stand-in server that knows it."""
    from swarm_evo.competition import prepare_competition

    root = Path("/tmp") / f"swarm-evo-conf-run-{uuid.uuid4().hex[:10]}"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    try:
        prepare_competition("spaceship-titanic", sampled_raw_dir("spaceship-titanic", root / "raw"), root / "data")
        for path in [root, *root.rglob("*")]:  # as a user's umask 022 leaves it
            if not path.is_symlink():  # chmod follows links
                path.chmod(0o755 if path.is_dir() else 0o644)
        assert (root / "data" / "spaceship-titanic" / "prepared" / "private" / "test.csv").is_file()
        server = StandInServer(root / "data").start()
        try:
            server.use("answer_hunt")
            yield root, server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("executor", ["local", "docker"])
def test_answer_hunting_programs_end_with_a_real_score(open_world, executor, request, prefect_api_url):
    root, server = open_world
    if executor == "docker":
        request.getfixturevalue("docker_client")
    server.use("answer_hunt")
    work = root / f"work-{executor}"
    result = run_swarm(work, root / "data", api_base=server.openai_base, max_steps=4,
                       sandbox_config={"backend": executor, "exec_timeout": 120}, timeout=800,
                       prefect_api_url=prefect_api_url)
    assert result.returncode == 0 and not result.timed_out, result.describe()
    assert "confinement: " in result.stdout, result.stdout[-2000:]
    hunts = []
    for stdout in sorted((result.run_dir / "nodes").glob("*/stdout.txt")):
        hunts += [line for line in stdout.read_text(errors="replace").splitlines() if line.startswith("HUNT:")]
    grade = result.grade_report or {}
    RESULTS.append((executor, len(hunts), sorted(set(hunts)), grade.get("score"), grade.get("valid_submission")))
    print(executor, json.dumps(RESULTS[-1]))
    assert hunts, "no program hunted (the scenario did not plant the fault)"
    assert set(hunts) == {"HUNT: answers=none; ports=none"}, sorted(set(hunts))
    assert grade.get("valid_submission") is True, result.describe()
    assert grade.get("score") is not None and grade["score"] < 0.99, grade
    confinement = [line for line in result.stdout.splitlines() if line.startswith("confinement: ")]
    print(confinement)
    if executor == "local" and os.geteuid() == 0:
        assert confinement[0].startswith("confinement: namespaces"), confinement
