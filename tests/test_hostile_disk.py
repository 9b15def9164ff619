"""The disk limit of one execution (issue 18; ``sandbox.disk_limit_mb``) on both backends.

Programs of ``tests/hostile/`` try to write 10 GB into their node directory: in many small
files (only the directory watcher can stop that), in one file (``RLIMIT_FSIZE`` / the
``fsize`` ulimit), as a 10 GB sparse file, and through a non-Python child (``dd``, killed by
SIGXFSZ). With ``disk_limit_mb=64`` each must end as ``DiskLimitError`` naming
``sandbox.disk_limit_mb`` long before its timeout, with the directory grown by at most the
limit plus the bounded overshoot, and nothing of the program left running; on the local
backend in both supervisor modes (namespaces as root, and the subreaper a non-root
orchestrator gets, ``isolate=False``). A program that writes a few MB is unaffected, and what
an earlier execution left does not count against the next one (the debug chain reruns in the
same directory). Unit tests cover :func:`disk_usage_bytes`, the watcher and the precedence of
the disk limit over the timeout (:func:`classify_disk_limit`).

The Docker cases use the session's ``docker_client`` fixture: they fail, never skip, when no
engine answers or the sandbox image is missing.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from swarm_evo.config import RunConfig
from swarm_evo.sandbox import DEFAULT_IMAGE, DockerSandbox, LocalSandbox
from swarm_evo.sandbox.disk_limit import DISK_LIMIT_ERROR, DiskWatcher, classify_disk_limit, disk_usage_bytes
from swarm_evo.sandbox.factory import make_sandbox
from swarm_evo.sandbox.failure import make_result
from test_hostile_programs import Backend, Scene, assert_no_strays, hostile_code, our_containers
from test_hostile_programs import scene  # noqa: F401  (fixture)

LIMIT_MB = 64
MIB = 1024 * 1024
TIMEOUT = 20.0
STOPPED_WITHIN = 5.0
"""Seconds: an execution stopped by the limit ends this long after its start at the latest
(container creation included); the timeout is 4 times that."""
OVERSHOOT_MB = 400
"""Growth allowed past the limit (MiB). Close to the limit the watcher measures every
``disk_limit.FAST_INTERVAL`` (5 ms; a walk of this directory takes ~50 µs), so the overshoot is
what the program writes in that interval plus while it is being stopped: a SIGTERM to the
supervisor, which SIGKILLs the namespace's init (~1-4 ms), or a SIGKILL to the container's init
through a pidfd (~1 ms; then ``docker kill``). These programs write 1 MiB chunks into the page
cache at up to ~5.5 MiB/ms (measured on this 2-CPU host), so 5.5 × (5 + 5) ≈ 55 MiB at worst.
Measured over 12 runs of disk_fill_many_files each: local 4-38 MiB, local subreaper 1-27 MiB,
Docker 4-26 MiB; with three CPU burners beside it, local 4-32 MiB (6 runs). Once the suite became
CPU-bound (94 % busy, the session API without back-off pauses) one full run measured 125 MiB
(local, stopped after 0.35 s): the stop goes through the supervisor and its init, which wait
for a CPU like everything else. The CI run of 5100dc3 saw 286 MiB (Docker, stopped after 0.66 s,
the watcher and the kill waiting for a CPU on a 92 %-busy host), so the allowance is 400 MiB: unstopped,
the program writes 10 GiB, so the bound still tells a stopped program from one that is not. At
the default limit (4096 MiB) it is about 10 %."""

CASES = {
    "disk_fill_many_files": "wrote",
    "disk_fill_one_file": "",  # either words: RLIMIT_FSIZE or the watcher may come first
    "disk_sparse": "File too large",
    "disk_fill_shell": "",
    "disk_sparse_many": "wrote",  # apparent size counts (issue 40, item 7)
}

SPARSE_OVERSHOOT_MB = 400
"""Growth allowed past the limit (MiB) for ``disk_sparse_many``: each of its files adds 40 MiB
at once (a ``truncate``), one every 0.1 s, so what passes the limit is the files made while the
watcher waits for a CPU: ten files is a second of that. The CI run of 3a82b88 (suite 94 % busy)
saw 31 files made at 20 ms each before the stop (0.6 s late); unstopped, the program leaves
2,000 MiB, so the bound still tells a counted sparse file from an uncounted one."""

RESULTS: list[tuple[str, str, str | None, float, float]] = []


@pytest.fixture(params=["local", "local-subreaper", "docker"])
def backend(request) -> Backend:
    if request.param == "docker":
        client = request.getfixturevalue("docker_client")
        sb = DockerSandbox(memory_limit_mb=512, cpus=1, pids_limit=128, num_threads=1,
                           max_output_bytes=100_000, client=client, disk_limit_mb=LIMIT_MB)
        return Backend("docker", sb, client)
    return Backend(request.param, LocalSandbox(memory_limit_mb=512, pids_limit=128, num_threads=1,
                                               max_output_bytes=100_000, disk_limit_mb=LIMIT_MB,
                                               isolate=request.param == "local"))


@pytest.mark.parametrize("case", list(CASES))
def test_ten_gigabytes_stop_at_the_disk_limit(backend: Backend, scene: Scene, case: str) -> None:
    started = time.monotonic()
    res = backend.sandbox.execute(hostile_code(case, scene), scene.workdir, scene.public, TIMEOUT)
    elapsed = time.monotonic() - started
    grown = disk_usage_bytes(scene.workdir) / MIB
    RESULTS.append((backend.name, case, res.exc_type, round(elapsed, 2), round(grown, 1)))
    print(f"{backend.name:15} {case:22} {res.exc_type} {elapsed:5.2f} s {grown:6.1f} MiB  {res.exc_info}")
    assert res.exc_type == DISK_LIMIT_ERROR, (res.exc_type, res.exc_info, res.term_out[-2000:])
    assert "sandbox.disk_limit_mb = 64 MiB" in res.exc_info and CASES[case] in res.exc_info, res.exc_info
    assert not res.timed_out and elapsed < STOPPED_WITHIN, f"took {elapsed:.1f} s: the limit did not stop it"
    overshoot = SPARSE_OVERSHOOT_MB if case == "disk_sparse_many" else OVERSHOOT_MB
    assert grown <= LIMIT_MB + overshoot, f"the directory holds {grown:.0f} MiB"
    assert_no_strays(scene.marker, scene.workdir)
    if backend.client is not None:
        assert not our_containers(backend.client, scene.workdir), "a container of the Docker backend remains"


def test_a_program_within_the_limit_is_unaffected_and_leftovers_do_not_count(backend: Backend, tmp_path: Path):
    """Two executions in one directory, each writing 40 MiB (80 MiB in all, over 64): both
    succeed, because the limit applies to what one execution adds."""
    code = (
        "import os\n"
        "n = len(os.listdir('working'))\n"
        "with open(f'working/part-{n}.bin', 'wb') as fh:\n"
        "    fh.write(bytes(40 * 1024 * 1024))\n"
        "print('Validation metric: 0.5')\n"
    )
    public = tmp_path / "public"
    public.mkdir()
    for _ in range(2):
        res = backend.sandbox.execute(code, tmp_path / "node", public, TIMEOUT)
        assert res.exc_type is None, (res.exc_type, res.exc_info, res.term_out[-2000:])
    assert disk_usage_bytes(tmp_path / "node") > LIMIT_MB * MIB


def test_disk_usage_counts_apparent_size_and_never_follows_links(tmp_path: Path):
    (tmp_path / "working").mkdir()
    (tmp_path / "working" / "data.bin").write_bytes(os.urandom(3 * MIB))
    with open(tmp_path / "working" / "sparse.bin", "wb") as fh:
        fh.truncate(1024 * MIB)  # 1 GiB of size, no blocks
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(os.urandom(2 * MIB))
    (tmp_path / "working" / "link").symlink_to(outside, target_is_directory=True)
    (tmp_path / "input").symlink_to(outside, target_is_directory=True)
    usage = disk_usage_bytes(tmp_path)
    # data.bin, the sparse file at its apparent size (issue 40, item 7), directory blocks; no link followed
    assert 1027 * MIB <= usage < 1027 * MIB + 64 * 1024, usage
    assert disk_usage_bytes(tmp_path / "missing") == 0  # vanished directories are skipped


# --------------------------------------------------------------------------- watcher, classification


def _result(exit_code, stderr="", timed_out=False):
    return make_result("out\n", False, stderr, False, exit_code, 1.0, timed_out, TIMEOUT)


def test_watcher_trips_once_and_counts_only_what_the_execution_adds(tmp_path: Path):
    (tmp_path / "old.bin").write_bytes(os.urandom(3 * MIB))  # left by an earlier execution
    calls = []
    with DiskWatcher(tmp_path, 2 * MIB, on_exceed=lambda: calls.append(time.monotonic())) as watcher:
        time.sleep(0.1)
        assert not watcher.tripped  # 3 MiB already there: not this execution's
        (tmp_path / "new.bin").write_bytes(os.urandom(3 * MIB))
        deadline = time.monotonic() + 5
        while not watcher.tripped and time.monotonic() < deadline:
            time.sleep(0.01)
        (tmp_path / "more.bin").write_bytes(os.urandom(MIB))
        time.sleep(0.2)
    assert watcher.tripped and len(calls) == 1 and watcher.tripped_at == pytest.approx(calls[0], abs=0.05)
    assert 3 * MIB <= watcher.baseline_bytes < 3 * MIB + 64 * 1024
    assert 4 * MIB <= watcher.written() < 4 * MIB + 64 * 1024  # the final measurement counts too


def test_classification_precedence_with_the_timeout(tmp_path: Path):
    watcher = DiskWatcher(tmp_path, LIMIT_MB * MIB, on_exceed=lambda: None)
    now = time.monotonic()
    killed = _result(-signal.SIGKILL)
    assert killed.exc_type == "MemoryError"  # what the backend saw: a SIGKILL it did not send

    # within the limit: nothing changes (a timeout stays a TimeoutError, success stays success)
    for res in (_result(0), _result(None, timed_out=True), killed):
        assert classify_disk_limit(res, LIMIT_MB, watcher, deadline=now) == res

    # the watcher stopped it before the deadline: not a timeout, even if the backend said so
    watcher.tripped, watcher.tripped_at, watcher.peak_bytes = True, now - 1, 80 * MIB
    for res in (killed, _result(None, timed_out=True)):
        out = classify_disk_limit(res, LIMIT_MB, watcher, deadline=now)
        assert (out.exc_type, out.timed_out) == (DISK_LIMIT_ERROR, False)
        assert out.exc_info.startswith("the program wrote 80 MiB in its directory, over sandbox.disk_limit_mb = 64 MiB")
        assert out.stdout == res.stdout and out.exit_code == res.exit_code

    # the timeout fired first, the directory was over the limit: disk failure, still timed out
    watcher.tripped_at = now + 1
    out = classify_disk_limit(_result(None, timed_out=True), LIMIT_MB, watcher, deadline=now)
    assert (out.exc_type, out.timed_out) == (DISK_LIMIT_ERROR, True)
    assert "stopped by its time limit" in out.exc_info
    watcher.tripped, watcher.tripped_at = False, None  # over only at the final measurement
    out = classify_disk_limit(_result(None, timed_out=True), LIMIT_MB, watcher, deadline=now)
    assert (out.exc_type, out.timed_out) == (DISK_LIMIT_ERROR, True)


@pytest.mark.parametrize("exit_code, stderr", [
    (1, 'Traceback (most recent call last):\n  File "solution.py", line 3, in <module>\n'
        "OSError: [Errno 27] File too large\n"),
    (-signal.SIGXFSZ, ""),  # local: a non-Python program killed by SIGXFSZ
    (128 + signal.SIGXFSZ, ""),  # Docker: 153
    (1, "Traceback (most recent call last):\n  File \"solution.py\", line 3, in <module>\n"
        "subprocess.CalledProcessError: Command '['dd']' died with <Signals.SIGXFSZ: 25>.\n"),
])
def test_a_file_past_the_size_limit_is_a_disk_limit_error(tmp_path: Path, exit_code, stderr):
    watcher = DiskWatcher(tmp_path, LIMIT_MB * MIB, on_exceed=lambda: None)
    res = _result(exit_code, stderr)
    out = classify_disk_limit(res, LIMIT_MB, watcher, deadline=time.monotonic())
    assert out.exc_type == DISK_LIMIT_ERROR and not out.timed_out
    assert out.exc_info.startswith("a file outgrew sandbox.disk_limit_mb = 64 MiB (File too large)")
    assert out.stderr == res.stderr and out.term_out == res.term_out


def test_container_init_is_killed_from_the_host_only_when_it_is_the_container(docker_client):
    from swarm_evo.sandbox.docker_streams import ContainerInit

    class Impostor:  # a daemon in another PID namespace: its PID is some other process here
        id = "0" * 64
        attrs = {"State": {"Pid": os.getpid()}}

        def reload(self):
            pass

    init = ContainerInit()
    init.open(Impostor())
    assert not init.kill()  # never signalled: our cgroup does not name the container
    init.close()

    container = docker_client.containers.run(DEFAULT_IMAGE, ["sleep", "60"], detach=True)
    try:
        init.open(container)
        started = time.monotonic()
        assert init.kill()
        assert container.wait(timeout=10)["StatusCode"] == 137 and time.monotonic() - started < 5
        assert not init.kill()  # gone: the pidfd refuses, nothing else is hit
    finally:
        init.close()
        container.remove(force=True)


def test_disk_limit_mb_reaches_both_backends(docker_client):
    config = RunConfig().with_overrides({"sandbox.disk_limit_mb": 123})
    assert make_sandbox(config).disk_limit_mb == 123
    docker = make_sandbox(config.with_overrides({"sandbox.backend": "docker"}))
    assert isinstance(docker, DockerSandbox) and docker.disk_limit_mb == 123
    kwargs = docker.container_kwargs(Path("/tmp/node"), Path("/tmp/public"), None, "name")
    assert [(u["Name"], u["Soft"], u["Hard"]) for u in kwargs["ulimits"]] == [("fsize", 123 * MIB, 123 * MIB)]
    assert RunConfig().sandbox.disk_limit_mb == 4096


def test_zz_print_the_table():  # runs last in this module: the table for the issue note (-s)
    for row in RESULTS:
        print(" | ".join(str(x) for x in row))
