"""Hostile programs on every sandbox backend (SPEC §10; issue 7).

Each program of ``tests/hostile/`` (fork bomb, gigabytes to stdout, memory hog, SIGTERM
ignored, daemons that outlive the program, writes outside its directory, ``rmtree('..')``,
deleting the public data, hunting for API keys, symlinks planted on the log files) runs as a node of a fake run directory on the
local backend and on Docker. Whatever it does, the execution must end as a *classified*
failure (the expected ``exc_type`` is named per case and backend) within timeout + 5 s; no
process of it may remain (found by a marker every hostile process carries in its argv, or by
its working directory), no container of the backend either; the run directory around the
node, a canary file outside it and the public data must be byte-identical afterwards.

Plus: the run process itself SIGKILLed while a program runs. Local: the program tree dies
with it (PID namespace / parent-death signals). Docker: the container survives (no
``finally``) and :func:`~swarm_evo.sandbox.docker_leftovers.remove_stray_containers` removes it.

The Docker cases use the session's ``docker_client`` fixture (tests/conftest.py): like every
Docker test they fail, never skip, when no engine answers or the sandbox image is missing
(``bash deployments/start-docker-engine.sh``, ``bash deployments/build-sandbox-image-offline.sh``).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from swarm_evo.sandbox import DockerSandbox, ExecutionResult, LocalSandbox
from swarm_evo.sandbox.docker_leftovers import remove_stray_containers
from swarm_evo.sandbox.docker_sandbox import LABEL, WORKDIR_LABEL

HOSTILE = Path(__file__).with_name("hostile")
TIMEOUT = 5.0
MAX_OUTPUT = 100_000
MAX_LOG = 10 * MAX_OUTPUT  # the default on-disk cap (10 x max_output_bytes)

# exc_type expected per case and backend. Both backends show the program a read-only host
# (Docker's read-only root; the local backend remounts every host mount read-only in its
# mount namespace, issue 18), so writes outside the node fail with EROFS (OSError);
# rmtree('/') may meet /proc first (PermissionError).
EXPECTED: dict[str, dict[str, set[str]]] = {
    "fork_bomb": {"local": {"TimeoutError"}, "docker": {"TimeoutError"}},
    "output_flood": {"local": {"TimeoutError"}, "docker": {"TimeoutError"}},
    "memory_hog": {"local": {"MemoryError"}, "docker": {"MemoryError"}},
    "ignore_sigterm": {"local": {"TimeoutError"}, "docker": {"TimeoutError"}},
    "orphans": {"local": {"RuntimeError"}, "docker": {"RuntimeError"}},
    "write_outside": {"local": {"OSError", "PermissionError"}, "docker": {"OSError"}},
    "rmtree_parent": {"local": {"OSError", "PermissionError"}, "docker": {"OSError", "PermissionError"}},
    "delete_input": {"local": {"OSError"}, "docker": {"OSError"}},
    "env_keys": {"local": {"KeyError"}, "docker": {"KeyError"}},
    "log_symlinks": {"local": {"RuntimeError"}, "docker": {"RuntimeError"}},
    "persist_writes": {"local": {"RuntimeError"}, "docker": {"RuntimeError"}},
}


# --------------------------------------------------------------------------- fixtures


@dataclass
class Backend:
    name: str
    sandbox: object
    client: object = None


@pytest.fixture(params=["local", "docker"])
def backend(request) -> Backend:
    if request.param == "docker":
        client = request.getfixturevalue("docker_client")
        sb = DockerSandbox(memory_limit_mb=512, cpus=1, pids_limit=128, num_threads=1,
                           max_output_bytes=MAX_OUTPUT, client=client)
        return Backend("docker", sb, client)
    return Backend("local", LocalSandbox(memory_limit_mb=512, pids_limit=128, num_threads=1,
                                         max_output_bytes=MAX_OUTPUT))


@dataclass
class Scene:
    """A fake run directory (journal, a sibling node), the node's workdir, public data, canary."""

    root: Path
    run_dir: Path
    workdir: Path
    sibling: Path
    public: Path
    canary: Path
    marker: str


@pytest.fixture()
def scene(tmp_path: Path) -> Scene:
    run_dir = tmp_path / "run"
    sibling = run_dir / "nodes" / "sibling-node"
    (sibling / "working").mkdir(parents=True)
    (run_dir / "journal.json").write_text('{"nodes": ["sibling-node"]}\n')
    (sibling / "solution.py").write_text("print('Validation metric: 0.5')\n")
    (sibling / "stdout.txt").write_text("Validation metric: 0.5\n")
    (sibling / "working" / "model.bin").write_bytes(os.urandom(4096))
    public = tmp_path / "public"
    public.mkdir()
    (public / "train.csv").write_text("id,y\n1,2\n2,3\n")
    (public / "test.csv").write_text("id\n3\n")
    # World-writable: only the sandbox (read-only mount, other user) can protect the data.
    public.chmod(0o777)
    for f in public.iterdir():
        f.chmod(0o666)
    canary = tmp_path / "canary.txt"
    canary.write_text("canary\n")
    canary.chmod(0o666)
    return Scene(tmp_path, run_dir, run_dir / "nodes" / "hostile-node", sibling, public, canary,
                 f"swarm-evo-hostile-{uuid.uuid4().hex}")


def hostile_code(case: str, scene: Scene) -> str:
    code = (HOSTILE / f"{case}.py").read_text()
    return (code.replace("__MARK__", scene.marker).replace("__CANARY__", str(scene.canary))
            .replace("__PUBLIC__", str(scene.public)).replace("__SIBLING__", scene.sibling.name))


# --------------------------------------------------------------------------- checks


def snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple]:
    """Every entry under ``root`` (except ``skip``'s subtree): type, mode, owner, content."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip is not None:
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                content: object = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                content = path.read_bytes()
            else:
                content = None
            out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, content)
    return out


def strays(marker: str, workdir: Path) -> list[str]:
    """Live processes carrying ``marker`` in their command line or working under ``workdir``."""
    found = []
    prefix = str(workdir)
    for proc in psutil.process_iter(["pid", "cmdline", "cwd", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(proc.info["cmdline"] or [])
            cwd = proc.info["cwd"] or ""
        except (psutil.Error, TypeError):
            continue
        if proc.pid == os.getpid():
            continue
        if marker in cmd or cwd == prefix or cwd.startswith(prefix + "/"):
            found.append(f"{proc.pid} {cmd[:120]} (cwd {cwd})")
    return found


def assert_no_strays(marker: str, workdir: Path, within: float = 3.0) -> None:
    deadline = time.monotonic() + within
    while True:
        left = strays(marker, workdir)
        if not left:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"processes survived the execution: {left[:5]} ({len(left)} in all)")
        time.sleep(0.1)


def our_containers(client, workdir: Path | None = None) -> list:
    """Containers of the Docker backend, only those of ``workdir`` when given (a test checks its
    own: under pytest-xdist another worker's containers exist at the same time)."""
    containers = client.containers.list(all=True, filters={"label": LABEL})
    if workdir is not None:
        containers = [c for c in containers if c.labels.get(WORKDIR_LABEL) == str(workdir)]
    return containers


def assert_stops_growing(path: Path, pause: float = 0.6) -> None:
    size = path.stat().st_size if path.exists() else 0
    time.sleep(pause)
    after = path.stat().st_size if path.exists() else 0
    assert after == size, f"{path.name} still grows: a daemon of the program survived"


# --------------------------------------------------------------------------- the cases

RESULTS: list[tuple[str, str, str | None, float]] = []


@pytest.mark.parametrize("case", list(EXPECTED))
def test_hostile_program(backend: Backend, scene: Scene, case: str, monkeypatch) -> None:
    code = hostile_code(case, scene)
    decoy = None
    secrets = (f"sk-test-secret-{scene.marker}", f"tok-{scene.marker}")
    if case == "env_keys":
        monkeypatch.setenv("OPENAI_API_KEY", secrets[0])
        monkeypatch.setenv("MY_SERVICE_TOKEN", secrets[1])
        # A process of the host whose initial environment holds the keys (like the run process).
        decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ))
    run_before = snapshot(scene.run_dir)
    outside_before = (snapshot(scene.public), scene.canary.read_bytes())
    start = time.monotonic()
    try:
        res: ExecutionResult = backend.sandbox.execute(code, scene.workdir, scene.public, TIMEOUT)
    finally:
        if decoy is not None:
            decoy.kill()
            decoy.wait()
    elapsed = time.monotonic() - start
    RESULTS.append((backend.name, case, res.exc_type, round(elapsed, 2)))
    print(f"{backend.name:6} {case:15} exc_type={res.exc_type} elapsed={elapsed:.2f}s exc_info={res.exc_info!r:.150}")

    # a classified failure, in time
    assert res.exc_type in EXPECTED[case][backend.name], (res.exc_type, res.exc_info, res.term_out[-3000:])
    assert elapsed <= TIMEOUT + 5, f"took {elapsed:.1f} s"
    # nothing left running
    assert_no_strays(scene.marker, scene.workdir)
    if backend.client is not None:
        assert not our_containers(backend.client, scene.workdir), "a container of the Docker backend remains"
    # the run directory around the node, the public data and the canary are untouched
    assert snapshot(scene.run_dir, skip=scene.workdir) == {
        k: v for k, v in run_before.items() if not k.startswith("nodes/hostile-node")
    }
    assert (snapshot(scene.public), scene.canary.read_bytes()) == outside_before
    for escaped in (Path("/tmp") / f"escape-{scene.marker}", Path("/etc") / f"escape-{scene.marker}"):
        assert not escaped.exists(), f"the program wrote {escaped} on the host"
    # the node's files are the caller's again
    if os.geteuid() == 0:
        owners = {p.lstat().st_uid for p in [scene.workdir, *scene.workdir.rglob("*")]}
        assert owners <= {0}, f"files left owned by {owners}"
    assert subprocess.run(["true"]).returncode == 0, "the host can no longer start processes"

    node_files = [p for p in scene.workdir.rglob("*") if p.is_file() and not p.is_symlink()]
    if case == "output_flood":
        assert res.output_truncated and "flood starts" in res.stdout
        for name in ("stdout.txt", "stderr.txt"):
            assert (scene.workdir / name).stat().st_size <= MAX_LOG + 100
        cut = int(re.search(r"\[\.\.\. (\d+) bytes truncated \.\.\.\]", res.stdout).group(1))
        assert cut > 50_000_000, f"only {cut} bytes were cut: the program did not flood"
        assert len(res.stdout.encode()) < MAX_OUTPUT + 100
    elif case == "orphans":
        beats = [scene.workdir / "working" / n for n in ("heartbeat.txt", "heartbeat2.txt")]
        assert all(b.exists() and b.stat().st_size > 0 for b in beats), "the daemons never ran"
        for beat in beats:
            assert_stops_growing(beat)
    elif case == "write_outside":
        wrote = [line for line in res.stdout.splitlines() if line.startswith("wrote ")]
        # Only the private /tmp and the program's own HOME (inside its node) may take a write.
        assert all(w.startswith("wrote /tmp/") or str(scene.workdir) in w or "/tmp/../" in w for w in wrote), wrote
    elif case == "persist_writes":
        # Issue 18: only the private scratch tmpfs took a write (the host's world-writable
        # directories such as /run/lock are read-only to the program), and nothing it wrote
        # outside its node directory exists once the execution is over.
        wrote = [line.split(" ", 1)[1] for line in res.stdout.splitlines() if line.startswith("wrote ")]
        assert wrote, res.term_out[-2000:]  # /tmp at least: the program did run its writes
        assert set(wrote) <= {f"{d}/persist-{scene.marker}" for d in ("/tmp", "/var/tmp", "/dev/shm")}, wrote
        assert not [p for p in wrote if os.path.lexists(p)], "a file the program wrote outside its node persists"
        assert "found " not in res.stdout, res.stdout
        again = backend.sandbox.execute(code, scene.workdir, scene.public, TIMEOUT)
        assert "found " not in again.stdout and again.exc_type == "RuntimeError", again.term_out[-2000:]
    elif case == "log_symlinks":
        for name in ("stdout.txt", "stderr.txt"):
            path = scene.workdir / name
            assert path.is_file() and not path.is_symlink(), f"{name} is not our own file"
        assert (scene.workdir / "stdout.txt").read_text() == "planted\n" == res.stdout
        assert "planted symlinks" in (scene.workdir / "stderr.txt").read_text()
    elif case == "env_keys":
        assert "working/env-dump.txt" in {str(p.relative_to(scene.workdir)) for p in node_files}
        for path in node_files:
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), f"a key reached {path}"
        text = res.stdout + res.stderr + res.term_out
        assert not any(s in text for s in secrets)
        assert "OPENAI_API_KEY" not in res.stdout and "MY_SERVICE_TOKEN" not in res.stdout


# --------------------------------------------------------------------------- killed run process

_RUNNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from swarm_evo.sandbox import DockerSandbox, LocalSandbox
    kind, code, workdir, public = sys.argv[1:5]
    if kind.startswith("local"):
        sb = LocalSandbox(num_threads=1, memory_limit_mb=512, isolate=kind == "local")
    else:
        sb = DockerSandbox(num_threads=1, memory_limit_mb=512, cpus=1)
    sb.execute(Path(code).read_text(), Path(workdir), Path(public), 120)
    """
)


def test_run_process_sigkilled_mid_execution(backend: Backend, scene: Scene) -> None:
    killed_run_process(backend.name, backend.sandbox, backend.client, scene)


def test_run_process_sigkilled_mid_execution_subreaper(scene: Scene) -> None:
    """Without namespaces (``isolate=False``, as a non-root orchestrator runs) the supervisor
    gets SIGTERM when the run process dies and kills the tree itself."""
    killed_run_process("local-subreaper", LocalSandbox(num_threads=1, isolate=False), None, scene)


def killed_run_process(kind: str, sandbox, client, scene: Scene) -> None:
    code_file = scene.root / "long_runner.py"
    code_file.write_text(hostile_code("long_runner", scene))
    beat = scene.workdir / "working" / "heartbeat.txt"
    child = subprocess.Popen([sys.executable, "-c", _RUNNER, kind, str(code_file), str(scene.workdir),
                              str(scene.public)])
    try:
        deadline = time.monotonic() + 60
        while not (beat.exists() and beat.stat().st_size > 20):
            assert child.poll() is None, "the run process ended on its own"
            assert time.monotonic() < deadline, "the program never started beating"
            time.sleep(0.1)
    finally:
        child.kill()  # SIGKILL: no finally, no atexit in the run process
        child.wait()
    killed_at = time.monotonic()
    if client is not None:
        # Docker: the container outlives its run process until a resume removes it.
        assert our_containers(client, scene.workdir), "expected the container to survive"
        removed = remove_stray_containers(scene.run_dir, client=client)
        assert len(removed) == 1 and removed[0].startswith("swarm-evo-")
        assert not our_containers(client, scene.workdir)
        assert remove_stray_containers(scene.run_dir, client=client) == []
    assert_no_strays(scene.marker, scene.workdir, within=3.0)
    gone_after = time.monotonic() - killed_at
    print(f"{kind}: the program tree was gone {gone_after:.2f} s after the run process was SIGKILLed")
    assert gone_after < 5
    assert_stops_growing(beat)
    # The next execution in that directory works and hands everything back to the caller.
    res = sandbox.execute("print('Validation metric: 1.0')", scene.workdir, scene.public, 30)
    assert res.ok, res.term_out
    if os.geteuid() == 0:
        owners = {p.lstat().st_uid for p in [scene.workdir, *scene.workdir.rglob("*")]}
        assert owners <= {0}, f"files left owned by {owners}"


def test_remove_stray_containers_only_touches_its_directory(request, tmp_path: Path) -> None:
    client = request.getfixturevalue("docker_client")
    sb = DockerSandbox(memory_limit_mb=512, cpus=1, num_threads=1, client=client)
    for d in ("run/nodes/a", "elsewhere/b"):
        (tmp_path / d).mkdir(parents=True)
    mine = sb.create_container(tmp_path / "run" / "nodes" / "a", tmp_path, None)
    other = sb.create_container(tmp_path / "elsewhere" / "b", tmp_path, None)
    try:
        assert mine.labels[WORKDIR_LABEL] == str(tmp_path / "run" / "nodes" / "a")
        assert remove_stray_containers(tmp_path / "run", client=client) == [mine.name]
        left = [c.name for d in ("run/nodes/a", "elsewhere/b") for c in our_containers(client, tmp_path / d)]
        assert left == [other.name]
    finally:
        for c in (mine, other):
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass


def test_local_defaults_follow_the_docker_rules() -> None:
    from swarm_evo.sandbox.base import host_memory_mb

    assert LocalSandbox().memory_limit_mb == int(host_memory_mb() * 0.8)
    assert LocalSandbox(parallel_workers=4).memory_limit_mb == max(256, int(host_memory_mb() * 0.8) // 4)
    assert LocalSandbox(memory_limit_mb=700).memory_limit_mb == 700
    assert LocalSandbox(max_output_bytes=2000).max_log_bytes == 20_000


# --------------------------------------------------------------------------- non-root orchestrator

_NONROOT_RUNNER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from swarm_evo.sandbox import LocalSandbox
    root = Path(sys.argv[1])
    sb = LocalSandbox(python=sys.executable, num_threads=1, memory_limit_mb=512, pids_limit=64,
                      max_output_bytes=100_000)
    out = {}
    for case, code in json.loads(Path(sys.argv[2]).read_text()).items():
        start = time.monotonic()
        res = sb.execute(code, root / "run" / case, root / "public", %(timeout)r)
        out[case] = [res.exc_type, time.monotonic() - start, res.exc_info]
    print(json.dumps(out))
    """ % {"timeout": TIMEOUT}
)


@pytest.mark.slow  # a forked orchestrator
def test_non_root_orchestrator_subreaper_and_nproc() -> None:
    """The orchestrator as an ordinary user (nobody here): programs run as that user (in a user
    namespace where the kernel allows one, issue 32; else under the subreaper); the fork bomb
    still meets RLIMIT_NPROC, daemons still die, the hog meets RLIMIT_DATA."""
    system_python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists() or not system_python.exists():
        pytest.skip("needs root, setpriv and /usr/bin/python3 to become an ordinary user")
    if subprocess.run([str(system_python), "-c", "import sys; assert sys.version_info[:2] == (3, 11)"]).returncode:
        pytest.skip("/usr/bin/python3 is not Python 3.11 (the venv's packages would not load)")
    import json
    import shutil
    import site

    # pytest's tmp_path is not reachable for nobody (mode 700 above it): use a directory of its own.
    root = Path("/tmp") / f"swarm-evo-nonroot-{uuid.uuid4().hex[:12]}"
    scene = Scene(root, root / "run", root / "run" / "orphans", root, root / "public", root / "canary",
                  f"swarm-evo-hostile-{uuid.uuid4().hex}")
    try:
        (root / "public").mkdir(parents=True)
        (root / "run").mkdir()
        (root / "public" / "train.csv").write_text("id\n1\n")
        cases = {case: hostile_code(case, scene) for case in ("fork_bomb", "orphans", "memory_hog")}
        (root / "cases.json").write_text(json.dumps(cases))
        for path in [root, *root.rglob("*")]:
            os.chown(path, 65534, 65534)
        packages = ":".join([str(Path(__file__).resolve().parents[1]), *site.getsitepackages()])
        proc = subprocess.run(
            ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "env", f"PYTHONPATH={packages}", "HOME=/tmp", str(system_python), "-c", _NONROOT_RUNNER,
             str(root), str(root / "cases.json")],
            capture_output=True, text=True, timeout=120, cwd="/tmp",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = json.loads(proc.stdout.strip().splitlines()[-1])
        print(results)
        expected = {"fork_bomb": "TimeoutError", "orphans": "RuntimeError", "memory_hog": "MemoryError"}
        for case, (exc_type, elapsed, info) in results.items():
            assert exc_type == expected[case], (case, exc_type, info)
            assert elapsed <= TIMEOUT + 5, (case, elapsed)
        assert_no_strays(scene.marker, root / "run")
        assert_stops_growing(root / "run" / "orphans" / "working" / "heartbeat.txt")
        assert_stops_growing(root / "run" / "orphans" / "working" / "heartbeat2.txt")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_links_out_of_the_workdir_are_removed_before_the_host_reads(backend: Backend, scene: Scene) -> None:
    """A program that plants ``submission.csv -> <host file>`` (or links a directory out)
    cannot make the host's readers (validator, grader, harness, prompts) expose that file:
    links leaving the workdir are gone when ``execute`` returns; links inside it stay."""
    secret = scene.root / "host-secret.txt"
    secret.write_text("SECRET-" + scene.marker)
    code = (
        "import os\n"
        f"os.symlink({str(secret)!r}, 'submission/submission.csv')\n"
        f"os.symlink({str(scene.root)!r}, 'working/host_dir')\n"
        "os.symlink('../solution.py', 'working/inside_link')\n"
        "print('Validation metric: 1.0')\n"
    )
    res = backend.sandbox.execute(code, scene.workdir, scene.public, TIMEOUT)
    assert res.ok, res.term_out
    assert not os.path.lexists(scene.workdir / "submission" / "submission.csv")
    assert not os.path.lexists(scene.workdir / "working" / "host_dir")
    assert (scene.workdir / "working" / "inside_link").is_symlink()
    assert secret.read_text() == "SECRET-" + scene.marker
