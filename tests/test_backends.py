"""One home for the sandbox backends (issue 43, item 2): swarm_evo/sandbox/backends.py.

The configuration's choices and key checks, the CLI's ``--executor`` choices, the Eval Service
flow and the factory read the registry; the ``SandboxSettings`` block takes its fields from
``SandboxConfig``; and a backend that wraps a command runs it through the local backend's
runner (swarm_evo/sandbox/process_runner.py) — the same timeout, kill and confinement — with
no subprocess loop of its own.
"""

from __future__ import annotations

import os
import textwrap
import time
import typing
from pathlib import Path

import pytest
from test_sandbox import _alive_with, public_dir  # noqa: F401 - the local backend's fixture and helper

from swarm_evo.config import ConfigError, RunConfig, SandboxConfig
from swarm_evo.sandbox import LocalSandbox, backends
from swarm_evo.sandbox.confinement import describe_confinement, is_confined
from swarm_evo.sandbox.factory import make_sandbox


def test_the_backends_and_their_keys():
    assert backends.NAMES == ("local", "docker", "pool")
    assert backends.get("docker").keys == ("image", "cpus") and backends.get("pool").keys == ("work_pool", "pool_wait")
    assert backends.readers("gpus") == backends.NAMES and backends.readers("exec_timeout") == backends.NAMES
    with pytest.raises(ValueError, match="unknown sandbox backend 'apptainer': use one of local, docker, pool"):
        backends.get("apptainer")
    every_key = set(SandboxConfig.model_fields)
    for backend in backends.BACKENDS.values():
        assert set(backend.keys) <= every_key, f"{backend.name} names a key SandboxConfig lacks"


def test_the_config_reads_the_registry():
    assert typing.get_args(SandboxConfig.model_fields["backend"].annotation) == backends.NAMES
    assert SandboxConfig().backend == backends.NAMES[0]
    for name, backend in backends.BACKENDS.items():
        assert backend.summary in SandboxConfig.model_fields["backend"].description
    assert RunConfig().with_overrides({"sandbox.gpus": "all"}).sandbox.gpus == "all"  # every backend (issue 52)
    with pytest.raises(ConfigError, match="slots_per_gpu=2 shares GPUs, but sandbox.gpus is none"):
        RunConfig().with_overrides({"sandbox.slots_per_gpu": 2})


def test_the_cli_offers_the_registrys_backends():
    from swarm_evo.cli.commands import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for command in ("run", "resume", "eval", "sweep"):
        found = []
        stack = [sub[command]]
        while stack:
            p = stack.pop()
            for action in p._actions:
                if action.dest == "executor":
                    found.append(tuple(action.choices))
                if getattr(action, "choices", None) and isinstance(action.choices, dict):
                    stack.extend(action.choices.values())
        assert found and set(found) == {backends.NAMES}, f"swarm-evo {command} --executor: {found}"


def test_the_block_takes_its_fields_from_the_config():
    from blocks import SandboxSettings

    config_fields = SandboxConfig.model_fields
    block_fields = SandboxSettings.model_fields
    assert set(block_fields) == set(config_fields)
    for name, field in config_fields.items():
        mine = block_fields[name]
        assert (mine.annotation, mine.default, mine.description, mine.metadata) == (
            field.annotation, field.default, field.description, field.metadata), name
    block = SandboxSettings(backend="docker", gpus="0,1", memory_limit_mb=2048)
    assert RunConfig().with_overrides(block.overrides()).sandbox == SandboxConfig(
        backend="docker", gpus=["0", "1"], memory_limit_mb=2048)


def test_the_factory_builds_the_named_backend(monkeypatch, tmp_path):
    built = []

    def build(config, threads):
        built.append((config.sandbox.backend, threads))
        return LocalSandbox()

    monkeypatch.setitem(backends.BACKENDS, "local", backends.Backend("local", "test", (), build))
    sandbox = make_sandbox(RunConfig().with_overrides({"search.parallel_workers": 1}))
    assert isinstance(sandbox, LocalSandbox) and built == [("local", os.cpu_count() or 1)]


# ---------------------------------------------------------------------------- a backend that wraps a command
class WrappingSandbox(LocalSandbox):
    """A backend that runs the program through a wrapper command (``env``, standing in for a
    container runtime such as ``apptainer exec IMAGE``): only its argv differs."""

    def command(self) -> list[str]:
        return ["/usr/bin/env", "SWARM_EVO_WRAPPED=1", self.python, "solution.py"]


def test_a_wrapped_command_runs_confined_through_the_same_runner(tmp_path, public_dir):
    sandbox = WrappingSandbox()
    code = "import os\nprint('wrapped', os.environ.get('SWARM_EVO_WRAPPED'), open('input/train.csv').read().split()[1])\n"
    result = sandbox.execute(code, tmp_path / "node", public_dir, timeout=30)
    assert result.ok and result.stdout.split() == ["wrapped", "1", "1,2"]
    assert sandbox.last_mode in ("namespaces", "userns")
    assert is_confined(sandbox) and describe_confinement(sandbox) == describe_confinement(LocalSandbox())


def test_a_wrapped_commands_timeout_kills_its_whole_tree(tmp_path, public_dir):
    marker = f"swarm-evo-wrapped-{os.getpid()}-{time.monotonic_ns()}"
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])
        print('spawned', flush=True)
        time.sleep(300)
        """)
    started = time.monotonic()
    result = WrappingSandbox().execute(code, tmp_path / "node", public_dir, timeout=2)
    assert time.monotonic() - started < 2 + 5
    assert result.timed_out and result.exc_type == "TimeoutError" and "spawned" in result.stdout
    deadline = time.monotonic() + 5
    while _alive_with(marker):
        assert time.monotonic() < deadline, "the wrapped program's child survived the timeout"
        time.sleep(0.1)


def test_the_runner_is_the_only_popen_of_a_program():
    """Issue 43: one Popen/timeout/kill loop. The sandbox's other subprocesses are probes and
    installers with no program of the run in them, and the pre-imported program server, which
    forks supervisors on request and has no timeout or kill loop of its own: the runner drives
    each forked supervisor exactly as it drives a started one."""
    root = Path(__file__).resolve().parents[1] / "swarm_evo" / "sandbox"
    popens = sorted(p.name for p in root.glob("*.py") if "subprocess.Popen(" in p.read_text())
    assert popens == ["installer.py", "preload.py", "process_runner.py"]
    waits = sorted(p.name for p in root.glob("*.py") if "_read_report(" in p.read_text() or "killpg(" in p.read_text())
    assert waits == ["process_runner.py", "supervisor.py"]  # the run process's loop; the supervisor's own kill


# ---------------------------------------------------------------------------- the pool backend (issue 52, item 4)
def test_the_pool_backend_names_what_it_lacks(monkeypatch):
    """Bad input: no work pool, no run store, no Prefect server: each names the key and the fix."""
    from swarm_evo.sandbox import SandboxUnavailableError

    monkeypatch.delenv("SWARM_EVO_STORE", raising=False)
    pool = RunConfig().with_overrides({"sandbox.backend": "pool"})
    with pytest.raises(SandboxUnavailableError, match="needs sandbox.work_pool"):
        make_sandbox(pool)
    with pytest.raises(SandboxUnavailableError, match="needs a run store .* --store URL, store.url"):
        make_sandbox(pool.with_overrides({"sandbox.work_pool": "swarm-evo-process"}))
    assert pool.with_overrides({"sandbox.pool_wait": 5}).sandbox.pool_wait == 5
    with pytest.raises(ConfigError, match="pool_wait"):
        pool.with_overrides({"sandbox.pool_wait": 0})


def test_what_travels_through_the_store_for_a_pool_execution(tmp_path):
    """The store half of an execution on a worker (swarm_evo/store/pool.py), on a local folder store:
    the data goes up once per digest and down once per worker cache; the node directory's files
    travel but for input/, working/ and links; the worker runs in its own sandbox and its result
    comes back whole; a superseded writer's execution is refused."""
    from swarm_evo.store import open_store
    from swarm_evo.store.lease import Lease, write_lease
    from swarm_evo.store.pool import (
        RESULT_FILE, data_digest, download_files, execution_location, node_files, read_json, run_on_worker,
        upload_data, upload_files, worker_identity,
    )

    store = open_store(tmp_path / "store")
    public = tmp_path / "public"
    public.mkdir()
    (public / "train.csv").write_text("a,b\n1,2\n")
    digest = upload_data(store, public)
    assert upload_data(store, public) == digest == data_digest(public)
    node = tmp_path / "node"
    for rel in ("solution.py", "notes.txt", "working/model.bin", "input/x.csv"):
        (node / rel).parent.mkdir(parents=True, exist_ok=True)
        (node / rel).write_text(rel)
    (node / "link").symlink_to(tmp_path / "public" / "train.csv")
    files, left_out = node_files(node)
    assert sorted(files) == ["notes.txt", "solution.py"] and left_out == []
    location = execution_location(store, "run-1", "k1")
    upload_files(location, "in", files)
    location.fs.pipe_file(location.path("in.json"), b'{"files": ["notes.txt", "solution.py"]}')
    code = "import os\nprint(open('input/train.csv').read().split()[1], open('notes.txt').read())\n" \
           "os.makedirs('submission', exist_ok=True)\nopen('submission/submission.csv', 'w').write('id\\n1\\n')\n"
    out = run_on_worker(LocalSandbox(), store, run_id="run-1", key="k1", code=code, data_digest_=digest, timeout=30,
                        lease=None, identity=worker_identity(), cache_root=tmp_path / "cache")
    assert out["result"]["stdout"].split() == ["1,2", "notes.txt"] and read_json(location, RESULT_FILE) == out
    assert (tmp_path / "cache" / "pool" / digest / "train.csv").is_file()
    assert "submission/submission.csv" in out["files"] and not any(f.startswith("input") for f in out["files"])
    back = tmp_path / "back"
    download_files(location, "out", out["files"], back)
    assert (back / "submission" / "submission.csv").read_text() == "id\n1\n"

    run_location = store.run("r")
    write_lease(run_location, Lease(run_id="run-1", generation=2, owner={"token": "new"}))
    stale = {"url": run_location.url, "generation": 1, "token": "old"}
    refused = run_on_worker(LocalSandbox(), store, run_id="run-1", key="k2", code="print(1)", data_digest_=digest,
                            timeout=30, lease=stale, identity=worker_identity(), cache_root=tmp_path / "cache")
    assert refused["result"] is None and "superseded" in refused["superseded"]
