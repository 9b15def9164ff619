"""Confinement (issue 32): a program sees its input, its work directory and nothing else.

A hostile program (``tests/hostile/hunt.py``) hunts for the competition's answers (its
``input`` mount in ``/proc/self/mountinfo`` and ``..`` of it, a walk of ``/``, the usual roots,
``/proc/*/cwd`` and ``/proc/*/root`` of other processes), for secrets (home directories, the
caches in them, a file next to the interpreter's prefix, the environment of another process of
the host) and for services (every port listening on the host, the stand-in model server, the
Prefect API). The data directory sits in a world-readable folder, as a user's does. Cases:

- the local backend as root (namespaces, programs run as nobody), as an ordinary user (a user
  namespace; the orchestrator runs as uid 4242 through ``setpriv``), and the Docker backend:
  nothing is found, no port is reached;
- ``sandbox.network: true`` (local as root, Docker): the stand-in server is reached;
- the local backend without confinement (``isolate=False``): the same program finds the answers
  and reaches the ports, so the probes are not vacuous.

``-s`` prints the probes table (``RESULTS``). Docker cases use ``docker_client`` (fail, never
skip, without an engine); the non-root case needs root (to become uid 4242), ``setpriv`` and
``/usr/bin/python3`` of the venv's Python version, and skips otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

from llm_server.app import StandInServer
from swarm_evo.sandbox import DockerSandbox, LocalSandbox

HUNT = Path(__file__).with_name("hostile") / "hunt.py"
TIMEOUT = 90.0
USER = 4242
"""The ordinary user of the non-root case (no passwd entry needed)."""
REPO = Path(__file__).resolve().parents[1]
SECRET_PROBES = ("targets", "mountinfo", "input_dotdot", "walk_root", "usual_roots", "proc_cwd_root", "home_dirs",
                 "caches", "proc_environ")
RESULTS: dict[str, dict] = {}
"""case -> probe -> findings, printed as a table at the end of the module (``-s``)."""


@dataclass
class World:
    """A data directory in a world-readable folder, planted secrets, a decoy process, ports."""

    root: Path
    public: Path
    answers: Path
    home: str
    marker: str
    ports: list[int]
    targets: list[str] = field(default_factory=list)
    unix: list[str] = field(default_factory=list)

    def code(self) -> str:
        return (HUNT.read_text().replace("__MARK__", self.marker).replace("__TARGETS__", json.dumps(self.targets))
                .replace("__HOME__", self.home).replace("__DATA__", str(self.root / "data"))
                .replace("__PORTS__", json.dumps(self.ports)).replace("__UNIX__", json.dumps(self.unix)))


def host_unix_sockets() -> list[str]:
    """The host's listening unix sockets (``/proc/net/unix``): paths and ``@abstract`` names."""
    names = set()
    with open("/proc/net/unix") as fh:
        for line in list(fh)[1:]:
            fields = line.split()
            if len(fields) >= 8 and int(fields[3], 16) & 0x10000:
                names.add(fields[7])
    return sorted(names)


def host_listening_ports() -> set[int]:
    """Every TCP port in LISTEN state in the host's ``/proc/net/tcp{,6}``."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def stand_in_server():
    server = StandInServer(None).start()
    try:
        yield server
    finally:
        server.stop()


def _plant(path: Path, text: str, cleanup: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    cleanup.append(path)


def _make_world(stand_in_server, prefect_api_url, home: str, owner: int | None) -> tuple[World, list[Path]]:
    marker = f"swarm-evo-probe-{uuid.uuid4().hex}"
    root = Path("/tmp") / f"swarm-evo-conf-{uuid.uuid4().hex[:10]}"
    cleanup: list[Path] = [root]
    prepared = root / "data" / "comp-x" / "prepared"
    public, private = prepared / "public", prepared / "private"
    public.mkdir(parents=True)
    private.mkdir()
    (public / "train.csv").write_text("id,y\n1,2\n")
    (private / "test.csv").write_text(f"id,y\n1,{marker}\n")
    for d in (root, root / "data", root / "data" / "comp-x", prepared, public, private):
        d.chmod(0o755)  # world-readable, as a user's data directory is
    (root / "runs").mkdir()
    if owner is not None:
        os.chown(root / "runs", owner, owner)
    ports = sorted(host_listening_ports() | {stand_in_server.port, urlparse(prefect_api_url).port})
    world = World(root, public, private / "test.csv", home, marker, ports, targets=[str(private / "test.csv")],
                  unix=host_unix_sockets())
    secrets = [Path(home) / ".cache" / marker / "token"]
    prefix_parent = Path(os.path.realpath(sys.base_prefix)).parent
    if os.access(prefix_parent, os.W_OK):  # a sibling of the interpreter's prefix (/root/.pyenv/versions/...)
        secrets.append(prefix_parent / f"{marker}.txt")
    for path in secrets:
        _plant(path, marker, cleanup)
        cleanup.append(path.parent if marker in path.parent.name else path)
        world.targets.append(str(path))
    return world, cleanup


@pytest.fixture()
def world(stand_in_server, prefect_api_url):
    w, cleanup = _make_world(stand_in_server, prefect_api_url, os.path.expanduser("~"), None)
    # a process of the host whose environment holds a secret (like the run process's API key)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                             env={**os.environ, "SWARM_EVO_PROBE_SECRET": w.marker})
    try:
        yield w
    finally:
        decoy.kill()
        decoy.wait()
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def probes_of(case: str, result) -> dict:
    lines = [line for line in result.stdout.splitlines() if line.startswith("PROBES=")]
    assert lines, (case, result.exc_type, result.exc_info, result.term_out[-3000:])
    probes = json.loads(lines[-1][len("PROBES="):])
    RESULTS[case] = probes
    print(case, json.dumps(probes))
    return probes


def assert_confined(probes: dict, reached_ok: set[int] = frozenset()) -> None:
    leaks = {k: probes[k] for k in SECRET_PROBES if probes[k]}
    assert not leaks, f"the program found host files or secrets: {leaks}"
    assert set(probes["ports"]) <= set(reached_ok), f"the program reached ports {probes['ports']}"
    # with the host's network (reached_ok) abstract sockets are the host's too; socket files never
    reached = [n for n in probes["unix_sockets"] if not reached_ok or n.startswith("/")]
    assert not reached, f"the program reached unix sockets {reached}"


# ------------------------------------------------------------------------------ local, root


def _local(**kw) -> LocalSandbox:
    return LocalSandbox(num_threads=1, memory_limit_mb=1024, max_output_bytes=200_000, **kw)


def test_local_root_program_finds_nothing_and_reaches_nothing(world: World) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    sb = _local()
    res = sb.execute(world.code(), world.root / "runs" / "node", world.public, TIMEOUT)
    probes = probes_of("local root (namespaces)", res)
    assert sb.last_mode == "namespaces"
    assert_confined(probes)
    assert probes["interfaces"] == ["lo"]


def test_local_network_true_reaches_the_stand_in_server(world: World, stand_in_server) -> None:
    sb = _local(network=True)
    res = sb.execute(world.code(), world.root / "runs" / "node", world.public, TIMEOUT)
    probes = probes_of(f"local {'root' if os.geteuid() == 0 else 'user'} network: true", res)
    assert stand_in_server.port in probes["ports"]
    assert_confined(probes, reached_ok=set(probes["ports"]))


def test_unconfined_local_program_finds_the_answers(world: World) -> None:
    """The probes are not vacuous: without namespaces the same program finds the answers."""
    res = _local(isolate=False).execute(world.code(), world.root / "runs" / "node", world.public, TIMEOUT)
    probes = probes_of("local isolate=False (not confined)", res)
    assert str(world.answers) in probes["targets"]
    assert probes["mountinfo"] or probes["input_dotdot"] or probes["usual_roots"]
    assert probes["ports"]
    if os.geteuid() == 0 and os.path.exists("/var/run/docker.sock"):
        assert "/var/run/docker.sock" in probes["unix_sockets"]  # root on the host, through Docker


def test_data_inside_a_directory_on_sys_path_stays_hidden(tmp_path: Path) -> None:
    """A checkout on the interpreter's ``sys.path`` (a ``.pth`` line) holding ``data/`` and
    ``runs/``: the program imports from the checkout, sees ``input`` and its node directory,
    and nothing else of ``data/`` (the answers) or ``runs/`` (other nodes), not even after it
    enters a user namespace of its own and unmounts what covers them (the mounts are locked)."""
    root = Path("/tmp") / f"swarm-evo-conf-{uuid.uuid4().hex[:10]}"
    try:
        checkout = root / "checkout"
        prepared = checkout / "data" / "comp" / "prepared"
        for d in (prepared / "public", prepared / "private", checkout / "runs" / "r" / "other", checkout / "pkg"):
            d.mkdir(parents=True)
        (prepared / "public" / "train.csv").write_text("id\n1\n")
        (prepared / "private" / "test.csv").write_text("id\n1\n")
        (checkout / "mymod.py").write_text("VALUE = 7\n")
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        (next((venv / "lib").glob("python3*")) / "site-packages" / "checkout.pth").write_text(f"{checkout}\n")
        for path in [root, *root.rglob("*")]:
            if not path.is_symlink():  # chmod follows links: the venv's python links to the real one
                path.chmod(0o755 if path.is_dir() else 0o644)
        code = ("import ctypes, os, json, mymod\n"
                f"dirs = {[str(checkout), str(prepared), str(checkout / 'runs'), str(checkout / 'runs' / 'r')]!r}\n"
                # a user namespace of its own, then undo the masks: the mounts are locked (EINVAL)
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "if libc.unshare(0x10000000 | 0x00020000) == 0:\n"
                "    for d in dirs[1:] + [dirs[0] + '/data', '/']:\n"
                "        libc.umount2(d.encode(), 2)\n"
                "print(json.dumps({'mymod': mymod.VALUE, **{d: sorted(os.listdir(d)) for d in dirs}}))\n")
        res = _local(python=str(venv / "bin" / "python")).execute(code, checkout / "runs" / "r" / "node",
                                                                  prepared / "public", TIMEOUT)
        assert res.ok, res.term_out
        seen = json.loads(res.stdout.strip().splitlines()[-1])
        assert seen["mymod"] == 7
        assert seen[str(checkout)] == ["data", "mymod.py", "pkg", "runs"]
        assert seen[str(prepared)] == ["public"], "the answers are visible"
        assert seen[str(checkout / "runs")] == ["r"] and seen[str(checkout / "runs" / "r")] == ["node"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------------ docker


@pytest.mark.parametrize("network", [False, True], ids=["network-none", "network-host"])
def test_docker_program_finds_nothing(world: World, docker_client, stand_in_server, network: bool) -> None:
    sb = DockerSandbox(memory_limit_mb=1024, cpus=1, num_threads=1, max_output_bytes=200_000, client=docker_client,
                       network=network)
    res = sb.execute(world.code(), world.root / "runs" / "node", world.public, TIMEOUT)
    probes = probes_of(f"docker network: {'host' if network else 'none'}", res)
    if network:
        assert stand_in_server.port in probes["ports"]
        assert_confined(probes, reached_ok=set(probes["ports"]))
    else:
        assert_confined(probes)


# ------------------------------------------------------------------------------ an ordinary user

_USER_RUNNER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from swarm_evo.sandbox import LocalSandbox, SandboxUnavailableError
    from swarm_evo.sandbox.confinement import describe_confinement
    sb = LocalSandbox(python=sys.executable, num_threads=1, memory_limit_mb=1024, max_output_bytes=200_000,
                      network=sys.argv[4] == "1", allow_unconfined=sys.argv[5] == "1")
    try:
        res = sb.execute(Path(sys.argv[1]).read_text(), Path(sys.argv[2]), Path(sys.argv[3]), %(timeout)r)
    except SandboxUnavailableError as exc:
        print(json.dumps({"refused": str(exc), "ran": Path(sys.argv[2], "stdout.txt").exists()}))
        sys.exit(0)
    from swarm_evo.sandbox import local
    print(json.dumps({"stdout": res.stdout, "exc": res.exc_type, "info": res.exc_info, "mode": sb.last_mode,
                      "line": describe_confinement(sb), "warnings": sorted(local._warned)}))
    """ % {"timeout": TIMEOUT}
)


_NO_USERNS = textwrap.dedent(
    """
    import os, sys
    # a user namespace of our own (uids 0-65535 mapped through) where no further user
    # namespace may be created (user.max_user_namespaces = 0): a kernel that refuses them
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        import ctypes
        assert ctypes.CDLL(None, use_errno=True).unshare(0x10000000) == 0
        os.read(r, 1)
        with open("/proc/sys/user/max_user_namespaces", "w") as fh:
            fh.write("0")
        os.execv(sys.argv[1], sys.argv[1:])
    import time
    time.sleep(0.2)  # the child has unshared (it waits on the pipe)
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as fh:
            fh.write("0 0 65536")
    os.write(w, b"x")
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


def run_as_user(world: World, network: bool = False, no_userns: bool = False, allow_unconfined: bool = False) -> dict:
    """Run the hunt with the orchestrator as uid :data:`USER` (``setpriv``, ``/usr/bin/python3``
    with the venv's packages on ``PYTHONPATH``); the runner's JSON line. ``no_userns``: inside a
    user namespace that may not create another (:data:`_NO_USERNS`)."""
    python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists() or not python.exists():
        pytest.skip("needs root, setpriv and /usr/bin/python3 to become an ordinary user")
    if subprocess.run([str(python), "-c", f"import sys; assert sys.version_info[:2] == {sys.version_info[:2]}"]).returncode:
        pytest.skip("/usr/bin/python3 is not the venv's Python version (its packages would not load)")
    import site

    code = world.root / "runs" / "hunt.py"
    code.write_text(world.code())
    os.chown(code, USER, USER)
    packages = ":".join([str(REPO), *site.getsitepackages()])
    decoy = subprocess.Popen(["/usr/bin/setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups",
                              "env", f"SWARM_EVO_PROBE_SECRET={world.marker}", "sleep", "300"])
    try:
        proc = subprocess.run(
            ([sys.executable, "-c", _NO_USERNS] if no_userns else []) + ["/usr/bin/setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "env",
             f"PYTHONPATH={packages}", f"HOME={world.home}", str(python), "-c", _USER_RUNNER, str(code),
             str(world.root / "runs" / "node"), str(world.public), "1" if network else "0",
             "1" if allow_unconfined else "0"],
            capture_output=True, text=True, timeout=TIMEOUT + 60, cwd="/tmp")
    finally:
        decoy.kill()
        decoy.wait()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture()
def user_world(stand_in_server, prefect_api_url):
    home = Path("/tmp") / f"swarm-evo-home-{uuid.uuid4().hex[:10]}"
    home.mkdir(mode=0o700)
    os.chown(home, USER, USER)
    w, cleanup = _make_world(stand_in_server, prefect_api_url, str(home), USER)
    for path in [home, *home.rglob("*")]:
        os.chown(path, USER, USER, follow_symlinks=False)
    try:
        yield w
    finally:
        for path in [*cleanup, home]:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


class _Result:
    def __init__(self, out: dict):
        self.stdout, self.exc_type, self.exc_info, self.term_out = out["stdout"], out["exc"], out["info"], out["stdout"]


def test_local_ordinary_user_gets_the_same_confinement(user_world: World) -> None:
    out = run_as_user(user_world)
    if out["mode"] == "subreaper":
        pytest.skip(f"the kernel refuses unprivileged user namespaces here: {out['line']}")
    probes = probes_of("local user (user namespace)", _Result(out))
    assert out["mode"] == "userns" and out["line"].startswith("user namespace"), out
    assert_confined(probes)
    assert probes["interfaces"] == ["lo"]


def test_local_ordinary_user_network_true_reaches_the_stand_in(user_world: World, stand_in_server) -> None:
    out = run_as_user(user_world, network=True)
    probes = probes_of("local user network: true", _Result(out))
    assert stand_in_server.port in probes["ports"]
    assert_confined(probes, reached_ok=set(probes["ports"]))


def test_sandbox_network_setting_reaches_both_backends(docker_client, caplog, tmp_path: Path) -> None:
    """``sandbox.network`` (config, SandboxSettings block) reaches LocalSandbox and the container's
    ``network_mode``, with one warning per run (process) and backend."""
    from blocks import SandboxSettings
    from swarm_evo.config import RunConfig
    from swarm_evo.sandbox import factory

    assert SandboxSettings().network is False and SandboxSettings(network=True).overrides()["sandbox.network"] is True
    assert RunConfig().sandbox.network is False
    factory._warned_network.clear()
    config = RunConfig().with_overrides({"sandbox.network": True, "sandbox.python": sys.executable})
    with caplog.at_level("WARNING", logger="swarm_evo.sandbox.factory"):
        assert factory.make_sandbox(config).network is True
        assert factory.make_sandbox(config).network is True
    assert sum("sandbox.network is true" in r.getMessage() for r in caplog.records) == 1
    assert factory.make_sandbox(RunConfig().with_overrides({"sandbox.python": sys.executable})).network is False
    for network, mode in ((False, "none"), (True, "host")):
        sb = DockerSandbox(client=docker_client, network=network)
        assert sb.container_kwargs(tmp_path, tmp_path, None, "x")["network_mode"] == mode


def test_without_user_namespaces_programs_are_refused(user_world: World) -> None:
    """A kernel that refuses user namespaces (issue 42): no program runs; the error names the fixes."""
    out = run_as_user(user_world, no_userns=True)
    assert "refused" in out and not out["ran"], out
    for words in ("cannot confine", "answers", "Prefect API", "sandbox.allow_unconfined: true", "CAP_SYS_ADMIN",
                  "sandbox.backend: docker"):
        assert words in out["refused"], out["refused"]


def test_without_user_namespaces_allow_unconfined_runs_with_one_warning(user_world: World) -> None:
    out = run_as_user(user_world, no_userns=True, allow_unconfined=True)
    probes_of("local user, no user namespaces, allow_unconfined (subreaper)", _Result(out))
    assert out["mode"] == "subreaper" and out["line"].startswith("NOT confined"), out
    warnings = [w for w in out["warnings"] if "NOT confined" in w]
    assert len(warnings) == 1, out["warnings"]
    for words in ("answers", "host file", "network", "sandbox.allow_unconfined"):
        assert words in warnings[0], warnings[0]


@pytest.fixture(scope="session", autouse=True)
def _print_probes_table():
    """At the end of the session, the probes x cases table of the cases this process ran (``-s``),
    for the issue note (a fixture, not a test: under pytest-xdist the cases may run on another
    worker; session-scoped, so tests/conftest.py does not group the module's tests on one worker)."""
    yield
    if not RESULTS:
        return
    probes = [*SECRET_PROBES, "ports", "unix_sockets"]
    print("\n| case | " + " | ".join(probes) + " |")
    print("|---|" + "---|" * len(probes))
    for case, found in RESULTS.items():
        cells = [("found" if found.get(p) else "-") if p not in ("ports", "unix_sockets") else
                 (",".join(map(str, found.get(p, []))) or "-") for p in probes]
        print(f"| {case} | " + " | ".join(cells) + " |")
