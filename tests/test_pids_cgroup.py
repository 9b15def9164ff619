"""One execution's processes as a whole (issue 53, item 9): a pids cgroup per local execution.

Before it, ``sandbox.pids_limit`` was ``RLIMIT_NPROC``, which counts every process of the
programs' user: as root every program runs as nobody, so a program that forked up to its limit
made an innocent program running beside it fail its next ``fork`` with ``BlockingIOError``
(seen with the probe below on the code before this change). Now each execution has its own
``pids.max``: the forking program meets its limit, with a line naming ``sandbox.pids_limit``,
and the program beside it forks as it likes.
"""

from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

from swarm_evo.sandbox import LocalSandbox
from swarm_evo.sandbox.cgroup_home import PREFIX, CgroupHome, cgroup_home
from swarm_evo.sandbox.confinement import describe_confinement

LIMIT = 48

FORKER = textwrap.dedent("""
    import os, time
    children = []
    try:
        while True:
            pid = os.fork()
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            children.append(pid)
    except OSError as exc:
        print("forker stopped after", len(children), "children:", exc)
    time.sleep(3)  # holds them while the program beside it forks
    raise SystemExit(3)
""")

BESIDE = textwrap.dedent("""
    import os, time
    time.sleep(1.5)  # the forker is at its limit by now
    children = []
    for _ in range(20):
        pid = os.fork()
        if pid == 0:
            time.sleep(0.2)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    print("beside: forked 20")
""")


@pytest.fixture()
def home() -> CgroupHome:
    found = cgroup_home("pids")
    assert isinstance(found, CgroupHome), f"this test host (root, cgroup v1 or v2) must have a pids cgroup: {found}"
    return found


@pytest.mark.slow
def test_a_forking_program_meets_its_own_limit_and_its_neighbour_forks_on(home, tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    for d in (tmp_path, public):
        d.chmod(0o755)
    sandbox = LocalSandbox(memory_limit_mb=512, pids_limit=LIMIT, num_threads=1)
    assert f"processes: {LIMIT} per execution (cgroup v{home.version})" in describe_confinement(sandbox)
    results = {}

    def run(name: str, code: str) -> None:
        results[name] = sandbox.execute(code, tmp_path / name, public, 60)

    threads = [threading.Thread(target=run, args=args) for args in (("beside", BESIDE), ("forker", FORKER))]
    for t in threads:
        t.start()
        time.sleep(0.3)  # the innocent program starts first: under RLIMIT_NPROC it then has the lower limit
    for t in threads:
        t.join()
    forker, beside = results["forker"], results["beside"]
    print({k: (r.exc_type, r.stdout.strip()[-120:]) for k, r in results.items()})
    assert beside.ok and beside.stdout.strip() == "beside: forked 20", (beside.exc_type, beside.exc_info)
    stopped = int(forker.stdout.split("stopped after", 1)[1].split()[0])
    assert LIMIT - 2 <= stopped <= LIMIT, forker.stdout  # its own limit: the program and its children
    assert forker.exc_type == "ProcessError" and "sandbox.pids_limit = 48" in forker.exc_info, forker.exc_info
    assert sorted(home.path.glob(f"{PREFIX}{os.getpid()}-*")) == [], "the execution cgroups are removed"


def test_on_cgroup_v2_one_execution_cgroup_holds_both_limits(tmp_path, monkeypatch):
    """cgroup v2 (this v1 host has none: its files stand in, in a folder): a process is in one v2
    cgroup only, so the execution's memory and pids limits go to one cgroup, whichever controller
    moved the run to its leaf ``swarm-evo-run`` first; the supervisor joins it once."""
    from swarm_evo.sandbox import cgroup_home as homes
    from swarm_evo.sandbox.memory_cgroup import ExecutionMemory
    from swarm_evo.sandbox.pids_cgroup import ExecutionPids

    scope = tmp_path / "run.scope"
    scope.mkdir()
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    for name in ("cgroup.subtree_control", "cgroup.procs"):
        (scope / name).write_text("")
    monkeypatch.setattr(homes, "_mounts", lambda: [("/", str(tmp_path), "cgroup2", "rw")])
    monkeypatch.setattr(homes, "_mount_private", lambda *a: pytest.fail("the stand-in must never mount a hierarchy"))
    # the run was moved to the leaf when the first controller was enabled
    monkeypatch.setattr(homes, "_own_cgroup", lambda version, controller: f"/run.scope/{homes.RUN_LEAF}")
    homes.cgroup_home.cache_clear()
    try:
        assert homes.cgroup_home("memory") == homes.cgroup_home("pids") == CgroupHome(2, scope)
        memory = ExecutionMemory(256, warn=pytest.fail)
        pids = ExecutionPids(LIMIT, warn=pytest.fail, memory=memory)
    finally:
        homes.cgroup_home.cache_clear()  # the real homes for the tests after this one
    assert pids.path == memory.cgroup.path and pids.path.parent == scope
    assert (pids.path / "pids.max").read_text() == str(LIMIT + 2) and (pids.path / "memory.max").read_text() == str(256 << 20)
    assert pids.procs_file is None and not pids.rlimit_nproc, "joined once, through the memory cgroup's procs file"
