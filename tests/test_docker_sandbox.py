"""The Docker sandbox against a real Docker engine (SPEC §10; issue 3).

Every test here creates real containers from the offline-built image ``swarm-evo-sandbox``;
the ``docker_client`` fixture checks at the end that none was left behind.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from swarm_evo.sandbox import (
    DockerSandbox,
    LocalSandbox,
    SandboxUnavailableError,
    describe_runtime,
)
from swarm_evo.sandbox.docker_sandbox import LABEL


@pytest.fixture()
def public_dir(tmp_path: Path) -> Path:
    d = tmp_path / "public"
    d.mkdir()
    (d / "train.csv").write_text("id,y\n1,2\n2,3\n")
    return d


@pytest.fixture(scope="module")
def sandbox(docker_client) -> DockerSandbox:
    return DockerSandbox(memory_limit_mb=512, cpus=1, pids_limit=128, num_threads=1, client=docker_client)


def run(sb, code: str, tmp_path: Path, public_dir: Path, timeout: float = 60, name: str = "node"):
    return sb.execute(textwrap.dedent(code), tmp_path / name, public_dir, timeout)


def test_program_runs_with_layout_as_non_root_and_files_come_back(sandbox, tmp_path, public_dir):
    res = run(sandbox, """
        import os, pandas as pd
        df = pd.read_csv('input/train.csv')
        os.makedirs('working/cache', exist_ok=True)
        open('working/cache/x.txt', 'w').write('x')
        df.assign(y=df.y * 2).to_csv('submission/submission.csv', index=False)
        print('uid', os.getuid(), 'cwd', os.getcwd())
        print('Validation metric: 0.5')
    """, tmp_path, public_dir)
    assert res.ok, res.term_out
    assert "cwd /workspace" in res.stdout
    uid = int(res.stdout.split("uid ")[1].split()[0])
    assert uid != 0, "the program must not run as root"
    node = tmp_path / "node"
    assert (node / "submission" / "submission.csv").read_text().splitlines() == ["id,y", "1,4", "2,6"]
    assert (node / "stdout.txt").read_text() == res.stdout
    # everything the container wrote is handed back to the caller
    for path in [node, *node.rglob("*")]:
        if path.name != "input" and path.parent.name != "input":
            assert path.stat().st_uid == os.getuid(), path


def test_network_is_off(sandbox, tmp_path, public_dir):
    res = run(sandbox, """
        import socket
        s = socket.create_connection(('1.1.1.1', 53), timeout=5)
        print('connected')
    """, tmp_path, public_dir)
    assert not res.ok and "connected" not in res.stdout
    assert res.exc_type in {"OSError", "TimeoutError", "ConnectionRefusedError"}
    assert "Network is unreachable" in res.exc_info or res.exc_type == "TimeoutError"


def test_allocation_past_memory_limit_is_memory_error(sandbox, tmp_path, public_dir):
    res = run(sandbox, """
        chunks = []
        for _ in range(40):
            chunks.append(b'x' * (50 * 1024 * 1024))   # touches 50 MB per step, 2 GB total
        print('survived')
    """, tmp_path, public_dir)
    assert res.exc_type == "MemoryError", res
    assert res.exit_code == 137 and "out-of-memory killer" in res.exc_info
    assert "survived" not in res.stdout


def test_timeout_kills_program_and_children(sandbox, tmp_path, public_dir):
    marker = f"sleep {7000 + os.getpid() % 1000}"
    start = time.monotonic()
    res = run(sandbox, f"""
        import subprocess, time
        for _ in range(3):
            subprocess.Popen(['sh', '-c', '{marker}'])
        print('children started', flush=True)
        time.sleep(600)
    """, tmp_path, public_dir, timeout=3)
    elapsed = time.monotonic() - start
    assert res.exc_type == "TimeoutError" and res.timed_out
    assert "children started" in res.stdout
    assert elapsed < 3 + 5, f"killed after {elapsed:.1f} s"
    ps = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "a child of the program survived the timeout"


def test_environment_has_no_secrets(sandbox, tmp_path, public_dir, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok")
    monkeypatch.setenv("DB_SECRET", "hunter2")
    monkeypatch.setenv("HARMLESS_SETTING", "kept-on-host")
    res = run(sandbox, """
        import os
        for k, v in sorted(os.environ.items()):
            print(f'{k}={v}')
    """, tmp_path, public_dir)
    assert res.ok
    names = [line.split("=", 1)[0] for line in res.stdout.splitlines()]
    assert not [n for n in names if any(p in n.upper() for p in ("KEY", "TOKEN", "SECRET"))], names
    assert "sk-should-not-leak" not in res.stdout and "hunter2" not in res.stdout
    assert "HARMLESS_SETTING" not in names, "no host variable is passed at all"
    assert "OMP_NUM_THREADS=1" in res.stdout


def test_public_data_is_read_only(sandbox, tmp_path, public_dir):
    # world-writable on the host: only the read-only mount can stop the program
    public_dir.chmod(0o777)
    (public_dir / "train.csv").chmod(0o666)
    res = run(sandbox, """
        open('input/train.csv', 'a').write('9,9\\n')
    """, tmp_path, public_dir)
    assert res.exc_type == "OSError" and "Read-only file system" in res.exc_info
    res = run(sandbox, "open('input/new.csv', 'w').write('x')", tmp_path, public_dir, name="node2")
    assert res.exc_type == "OSError" and "Read-only file system" in res.exc_info
    assert (public_dir / "train.csv").read_text() == "id,y\n1,2\n2,3\n"
    assert sorted(p.name for p in public_dir.iterdir()) == ["train.csv"]


def test_fork_bomb_is_contained(sandbox, tmp_path, public_dir):
    start = time.monotonic()
    res = run(sandbox, """
        import os, time
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    """, tmp_path, public_dir, timeout=8)
    assert time.monotonic() - start < 8 + 10
    assert res.exc_type == "TimeoutError"
    # the host still starts processes
    assert subprocess.run(["true"]).returncode == 0


def test_output_is_capped(docker_client, tmp_path, public_dir):
    sb = DockerSandbox(max_output_bytes=10_000, num_threads=1, client=docker_client)
    res = run(sb, """
        import sys
        for i in range(200_000):
            print(f'line {i:06d} ' + 'x' * 40)
        print('Validation metric: 1.0')
    """, tmp_path, public_dir)
    assert res.ok and res.output_truncated
    assert len(res.stdout.encode()) < 10_200 and len(res.term_out.encode()) < 10_200
    assert res.stdout.rstrip().endswith("Validation metric: 1.0"), "the tail is kept"


@pytest.mark.parametrize(
    "code, exc_type",
    [
        ("print('ok')", None),
        ("import pandas as pd\npd.DataFrame({'a': [1]})['b']", "KeyError"),
        ("def f(:\n    pass", "SyntaxError"),
        ("import sys\nsys.exit(3)", "ProcessError"),
        ("import numpy as np\nnp.linalg.inv(np.zeros((2, 2)))", "LinAlgError"),
    ],
)
def test_same_classification_as_local_backend(sandbox, tmp_path, public_dir, code, exc_type):
    docker_res = sandbox.execute(code, tmp_path / "d", public_dir, 60)
    local_res = LocalSandbox(num_threads=1).execute(code, tmp_path / "l", public_dir, 60)
    assert docker_res.exc_type == local_res.exc_type == exc_type
    assert docker_res.exit_code == local_res.exit_code


def test_runtime_probe_reports_the_image(sandbox):
    info = describe_runtime(sandbox)
    assert info.python.startswith("3.11")
    assert info.packages["numpy"] == "2.4.6" and info.packages["scikit-learn"] == "1.7.2"
    assert info.cpu_limit == 1 and info.memory_limit_mb == 512 and info.gpus == []
    assert info.device.startswith("CPU only, 1 CPU") and "512 MB memory limit" in info.device


def test_gpu_request_reaches_host_config(sandbox, tmp_path, public_dir, docker_client):
    for spec, expected in (("all", {"Count": -1, "DeviceIDs": []}), (("0", "2"), {"Count": 0, "DeviceIDs": ["0", "2"]})):
        container = sandbox.create_container(tmp_path, public_dir, spec)
        try:
            (request,) = docker_client.api.inspect_container(container.id)["HostConfig"]["DeviceRequests"]
        finally:
            container.remove(force=True)
        assert request["Driver"] == "nvidia" and request["Capabilities"] == [["gpu"]]
        assert {k: request[k] for k in expected} == expected


def test_gpu_request_on_host_without_nvidia_runtime_is_a_clear_error(docker_client):
    sb = DockerSandbox(gpus="all", num_threads=1, client=docker_client)
    created = []  # this sandbox's containers (under pytest-xdist other workers have theirs)
    create = sb.create_container

    def recorded(*args, **kwargs):
        container = create(*args, **kwargs)
        created.append(container.id)
        return container

    sb.create_container = recorded
    with pytest.raises(SandboxUnavailableError) as err:
        describe_runtime(sb)
    assert "nvidia-container-toolkit" in str(err.value) and "gpus to none" in str(err.value)
    assert created, "the probe created its container before the start failed"
    assert not [c for c in docker_client.containers.list(all=True, filters={"label": LABEL}) if c.id in created]


def test_missing_image_and_unreachable_daemon_are_clear_errors(docker_client, monkeypatch):
    with pytest.raises(SandboxUnavailableError, match="build-sandbox-image-offline.sh no-such-image:1"):
        DockerSandbox(image="no-such-image:1", client=docker_client)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailableError, match="cannot reach the Docker daemon"):
        DockerSandbox()
