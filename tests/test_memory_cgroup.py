"""One execution's memory as a whole (issue 42, item 4): a memory cgroup per local execution.

Before it, ``sandbox.memory_limit_mb`` was ``RLIMIT_DATA`` per process: a program whose 8
children each allocate 60 % of the limit ran to the end (480 % of the limit in all), files in
the private ``/dev/shm`` and ``/tmp`` were not counted, and the host's OOM killer could take
another step's program. Now the execution's processes and scratch files share one cgroup: the
first OOM kill stops the whole execution as ``MemoryError``, recorded on that execution only,
while a program running beside it goes on. Where this process has no memory cgroup (an
ordinary user without delegation) the per-process limit stays, with one warning per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from swarm_evo.sandbox import LocalSandbox, describe_runtime
from swarm_evo.sandbox.cgroup_home import PREFIX, CgroupHome, cgroup_home

LIMIT_MB = 256
REPO = Path(__file__).resolve().parents[1]

FORKING_HOG = textwrap.dedent(f"""
    import os, time
    size = int({LIMIT_MB} * 0.6) * 1024 * 1024
    children = []
    for i in range(8):
        pid = os.fork()
        if pid == 0:
            block = b"x" * size  # written: resident, not only reserved
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)
    print("all 8 children held their memory")
""")

BESIDE = textwrap.dedent(f"""
    import time
    block = b"y" * int({LIMIT_MB} * 0.4 * 1024 * 1024)
    time.sleep(4)
    print("beside: done")
""")


@pytest.fixture()
def home() -> CgroupHome:
    found = cgroup_home()
    assert isinstance(found, CgroupHome), f"this test host (root, cgroup v1 or v2) must have a memory cgroup: {found}"
    return found


@pytest.fixture()
def public_dir(tmp_path: Path) -> Path:
    public = tmp_path / "public"
    public.mkdir()
    for d in (tmp_path, public):
        d.chmod(0o755)
    return public


def _ours(home: CgroupHome) -> list[str]:
    return sorted(p.name for p in home.path.glob(f"{PREFIX}{os.getpid()}-*"))


@pytest.mark.slow
def test_forking_program_is_stopped_as_out_of_memory_and_its_neighbour_runs_on(home, tmp_path, public_dir):
    sandbox = LocalSandbox(memory_limit_mb=LIMIT_MB, num_threads=1)
    results, took = {}, {}

    def run(name: str, code: str) -> None:
        started = time.monotonic()
        results[name] = sandbox.execute(code, tmp_path / name, public_dir, 60)
        took[name] = time.monotonic() - started

    threads = [threading.Thread(target=run, args=args) for args in (("hog", FORKING_HOG), ("beside", BESIDE))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hog, beside = results["hog"], results["beside"]
    print({k: (r.exc_type, round(took[k], 1)) for k, r in results.items()})
    assert hog.exc_type == "MemoryError", (hog.exc_type, hog.exc_info, hog.term_out[-2000:])
    assert "sandbox.memory_limit_mb = 256 MiB" in hog.exc_info and not hog.timed_out
    assert "all 8 children" not in hog.stdout
    assert took["hog"] < 20, "the whole execution was stopped, not left to sleep out its children"
    assert beside.ok and beside.stdout.strip() == "beside: done", (beside.exc_type, beside.exc_info)
    assert _ours(home) == [], "the execution cgroups are removed"


@pytest.mark.slow
@pytest.mark.parametrize("scratch", ["/dev/shm", "/tmp"])
def test_scratch_files_count_against_the_limit(home, tmp_path, public_dir, scratch):
    """The private tmpfs is memory: 1.5 × the limit written there (the tmpfs itself is larger) stops it."""
    code = textwrap.dedent(f"""
        with open("{scratch}/big", "wb") as fh:
            for _ in range({int(LIMIT_MB * 1.5)}):
                fh.write(b"z" * 1024 * 1024)
        print("wrote it all")
    """)
    sandbox = LocalSandbox(memory_limit_mb=LIMIT_MB, num_threads=1, tmp_size_mb=1024, shm_size_mb=1024)
    result = sandbox.execute(code, tmp_path / "node", public_dir, 60)
    assert result.exc_type == "MemoryError", (result.exc_type, result.exc_info, result.term_out[-2000:])
    assert "wrote it all" not in result.stdout


@pytest.mark.slow
def test_the_runtime_probe_reports_the_execution_limit(home):
    assert describe_runtime(LocalSandbox(memory_limit_mb=700, num_threads=1)).memory_limit_mb == 700


_USER_RUNNER = textwrap.dedent("""
    import json, logging, sys
    from pathlib import Path
    from swarm_evo.sandbox import LocalSandbox, local
    from swarm_evo.sandbox.confinement import describe_confinement
    logging.disable(logging.CRITICAL)
    sb = LocalSandbox(python=sys.executable, num_threads=1, memory_limit_mb=256)
    out = [sb.execute("print('ok')", Path(sys.argv[1]) / f"n{i}", Path(sys.argv[2]), 60) for i in range(2)]
    hog = sb.execute("x = bytearray(1024 ** 3)", Path(sys.argv[1]) / "hog", Path(sys.argv[2]), 60)
    print(json.dumps({"ok": [r.ok for r in out], "hog": hog.exc_type, "warnings": sorted(local._warned),
                      "line": describe_confinement(sb)}))
""")


@pytest.mark.slow
def test_without_a_cgroup_the_limit_is_per_process_with_one_warning(tmp_path):
    """An ordinary user whose cgroup is not delegated (uid 4242 through ``setpriv``): no cgroup,
    ``RLIMIT_DATA`` per process, one warning per run, and the confinement line says so."""
    python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists() or not python.exists():
        pytest.skip("needs root, setpriv and /usr/bin/python3 to become an ordinary user")
    if subprocess.run([str(python), "-c", f"import sys; assert sys.version_info[:2] == {sys.version_info[:2]}"]).returncode:
        pytest.skip("/usr/bin/python3 is not the venv's Python version (its packages would not load)")
    import site

    work = Path("/tmp") / f"swarm-evo-cg-{os.getpid()}"
    (work / "public").mkdir(parents=True, exist_ok=True)
    (work / "runs").mkdir(exist_ok=True)
    try:
        os.chown(work / "runs", 4242, 4242)
        for d in (work, work / "public"):
            d.chmod(0o755)
        packages = ":".join([str(REPO), *site.getsitepackages()])
        proc = subprocess.run(
            ["/usr/bin/setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "env", f"PYTHONPATH={packages}",
             f"HOME={work}", str(python), "-c", _USER_RUNNER, str(work / "runs"), str(work / "public")],
            capture_output=True, text=True, timeout=180, cwd="/tmp")
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    assert out["ok"] == [True, True] and out["hog"] == "MemoryError", out
    warnings = [w for w in out["warnings"] if "no memory cgroup" in w]
    assert len(warnings) == 1 and "RLIMIT_DATA" in warnings[0] and "not delegated" in warnings[0], out["warnings"]
    assert "per process (RLIMIT_DATA" in out["line"], out["line"]
    # no pids cgroup either (issue 53, item 9): the per-user RLIMIT_NPROC, one warning, said on the line
    pids = [w for w in out["warnings"] if "no pids cgroup" in w]
    assert len(pids) == 1 and "RLIMIT_NPROC" in pids[0] and "not delegated" in pids[0], out["warnings"]
    assert "processes: 512 per user (RLIMIT_NPROC" in out["line"], out["line"]
