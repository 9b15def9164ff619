"""Tests for the local sandbox backend and the shared helpers (SPEC §10)."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from swarm_evo.sandbox import ExecutionResult, LocalSandbox, Sandbox, scrub_env
from swarm_evo.sandbox.failure import classify_failure, last_exception_line
from swarm_evo.sandbox.output import bound_utf8, read_bounded


@pytest.fixture()
def public_dir(tmp_path: Path) -> Path:
    d = tmp_path / "public"
    d.mkdir()
    (d / "train.csv").write_text("id,y\n1,2\n")
    return d


def run(code: str, tmp_path: Path, public_dir: Path, timeout: float = 30, **kw) -> ExecutionResult:
    return LocalSandbox(**kw).execute(textwrap.dedent(code), tmp_path / "node", public_dir, timeout)


def test_protocol_and_layout(tmp_path, public_dir):
    sb = LocalSandbox()
    assert isinstance(sb, Sandbox)
    res = run(
        """
        import os
        print(open('input/train.csv').read().splitlines()[1])
        os.makedirs('submission', exist_ok=True)
        open('submission/submission.csv', 'w').write('id,y\\n1,2\\n')
        print(sorted(os.listdir('.')))
        print('Validation metric: 0.5')
        """,
        tmp_path,
        public_dir,
    )
    assert res.exit_code == 0 and res.exc_type is None and res.exc_info is None and res.ok
    assert "1,2" in res.stdout
    node = tmp_path / "node"
    assert (node / "solution.py").exists()
    assert (node / "input").is_symlink() and (node / "working").is_dir()
    assert (node / "submission" / "submission.csv").exists()
    assert (node / "stdout.txt").read_text() == res.stdout
    assert res.term_out.strip().endswith("Validation metric: 0.5")
    assert res.exec_time > 0 and not res.timed_out and not res.output_truncated


def test_existing_input_is_kept(tmp_path, public_dir):
    node = tmp_path / "node"
    (node / "input").mkdir(parents=True)
    (node / "input" / "mine.txt").write_text("x")
    res = LocalSandbox().execute("import os; print(os.listdir('input'))", node, public_dir, 30)
    assert "mine.txt" in res.stdout and not (node / "input").is_symlink()


def test_exit_codes(tmp_path, public_dir):
    res = run("import sys; sys.exit(3)", tmp_path, public_dir)
    assert res.exit_code == 3 and res.exc_type == "ProcessError" and "code 3" in res.exc_info
    res = run("import sys; print('hi', file=sys.stderr); sys.exit(0)", tmp_path, public_dir)
    assert res.exit_code == 0 and res.exc_type is None and "hi" in res.term_out


def test_keyerror_classified(tmp_path, public_dir):
    res = run("print('start')\nd = {}\nd['target']\n", tmp_path, public_dir)
    assert res.exit_code == 1
    assert res.exc_type == "KeyError"
    assert res.exc_info == "KeyError: 'target'"
    assert res.term_out.index("start") < res.term_out.index("Traceback")


def test_syntax_error_classified(tmp_path, public_dir):
    res = run("x = (1,\nprint(x\n", tmp_path, public_dir)
    assert res.exc_type == "SyntaxError"
    assert res.exc_info.startswith("SyntaxError")


def test_dotted_and_chained_exception(tmp_path, public_dir):
    code = """
    import json
    try:
        {}['a']
    except KeyError as e:
        json.loads('{bad')
    """
    res = run(code, tmp_path, public_dir)
    assert res.exc_type == "JSONDecodeError"
    assert res.exc_info.startswith("json.decoder.JSONDecodeError")


def test_memory_error_via_rlimit(tmp_path, public_dir):
    res = run("x = bytearray(2 * 1024**3)\n", tmp_path, public_dir, memory_limit_mb=512)
    assert res.exc_type == "MemoryError"


def test_sigkill_self_is_a_memory_error_only_without_a_memory_cgroup(tmp_path, public_dir):
    """With a memory cgroup per execution (issue 42) its OOM-kill counter says that this SIGKILL
    did not come from the OOM killer; without one a SIGKILL nobody asked for is guessed to be memory."""
    from swarm_evo.sandbox.cgroup_home import cgroup_home

    res = run("import os, signal\nprint('x', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n", tmp_path, public_dir)
    assert res.exit_code == -9 and not res.timed_out and "SIGKILL" in res.exc_info
    if isinstance(cgroup_home(), str):
        assert res.exc_type == "MemoryError", res.exc_info
    else:
        assert res.exc_type == "ProcessError" and "not by the out-of-memory killer" in res.exc_info


def _alive_with(marker: str) -> list[int]:
    """Host pids of live (non-zombie) processes whose command line contains ``marker``."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(proc.info["cmdline"] or []):
                found.append(proc.pid)
        except (psutil.Error, TypeError):
            continue
    return found


def test_timeout_kills_children(tmp_path, public_dir):
    # The program sees pids of its own PID namespace (as root): find the child by a marker.
    marker = f"swarm-evo-child-{os.getpid()}-{time.monotonic_ns()}"
    code = f"""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])
    print('spawned', flush=True)
    time.sleep(300)
    """
    t0 = time.monotonic()
    res = run(code, tmp_path, public_dir, timeout=2)
    elapsed = time.monotonic() - t0
    assert elapsed < 2 + 5
    assert res.timed_out and res.exc_type == "TimeoutError" and "2 s" in res.exc_info
    assert "spawned" in res.stdout
    deadline = time.monotonic() + 5
    while _alive_with(marker):
        if time.monotonic() > deadline:
            pytest.fail("child process survived the timeout")
        time.sleep(0.1)


def test_output_cap_50mb(tmp_path, public_dir):
    code = """
    import sys
    line = 'x' * 999 + '\\n'
    for _ in range(50_000):
        sys.stdout.write(line)
    print('Validation metric: 0.25')
    """
    res = run(code, tmp_path, public_dir, max_output_bytes=100_000)
    # The file on disk keeps 10 x max_output_bytes: head, marker, tail (not 50 MB).
    on_disk = (tmp_path / "node" / "stdout.txt").read_bytes()
    total = 50_000 * 1000 + len("Validation metric: 0.25\n")
    assert 1_000_000 <= len(on_disk) < 1_000_100
    assert f"[... {total - 1_000_000} bytes truncated ...]".encode() in on_disk
    assert on_disk.startswith(b"x" * 999 + b"\n") and on_disk.endswith(b"Validation metric: 0.25\n")
    assert res.output_truncated
    assert len(res.stdout.encode()) < 101_000 and len(res.term_out.encode()) < 101_000
    assert f"[... {total - 100_000} bytes truncated ...]" in res.stdout, "the marker counts every byte cut"
    assert res.stdout.rstrip().endswith("Validation metric: 0.25")


def test_env_scrubbed(tmp_path, public_dir, monkeypatch):
    monkeypatch.setenv("FOO_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_Token", "t")
    monkeypatch.setenv("PREFECT_API_URL", "http://localhost:4200/api")
    monkeypatch.setenv("DB_URL", "postgres://user:hunter2@host/db")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("HARMLESS_SETTING", "ok")
    res = run("import os\nfor k, v in sorted(os.environ.items()): print(k, '=', v)\n", tmp_path, public_dir)
    out = res.stdout
    for bad in ("FOO_API_KEY", "sk-should-not-leak", "MY_Token", "PREFECT_API_URL", "hunter2", "PYTHONPATH"):
        assert bad not in out
    assert "HARMLESS_SETTING = ok" in out and "PATH = " in out
    assert "PYTHONUNBUFFERED = 1" in out and "OMP_NUM_THREADS = " in out


def test_scrub_env_pure():
    env = scrub_env({"PATH": "/bin", "OPENAI_API_KEY": "x", "Aws_Secret_Access_Key": "y", "HOME": "/h",
                     "GITHUB_TOKEN": "z", "X_AUTH": "a", "LANG": "C"}, num_threads=2, extra={"CUDA_VISIBLE_DEVICES": "0"})
    assert {"PATH", "HOME", "LANG", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"} <= set(env)
    assert not {"OPENAI_API_KEY", "Aws_Secret_Access_Key", "GITHUB_TOKEN", "X_AUTH"} & set(env)
    assert env["OMP_NUM_THREADS"] == "2"


def test_parallel_executions(tmp_path, public_dir):
    sb = LocalSandbox()
    code = "import os, time\ntime.sleep(0.5)\nprint('Validation metric:', open('tag.txt').read())\n"

    def one(i: int) -> ExecutionResult:
        d = tmp_path / f"node{i}"
        d.mkdir()
        (d / "tag.txt").write_text(str(i))
        return sb.execute(code, d, public_dir, 30)

    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(4)))
    assert time.monotonic() - t0 < 4 * 0.5 + 3
    for i, res in enumerate(results):
        assert res.ok and res.stdout.strip() == f"Validation metric: {i}"


def test_read_bounded_and_bound_text(tmp_path):
    p = tmp_path / "big.txt"
    p.write_bytes(b"HEAD" + b"m" * 10_000 + b"TAIL")
    text, cut = read_bounded(p, 2000)
    assert cut and text.startswith("HEAD") and text.endswith("TAIL") and "truncated" in text
    assert read_bounded(tmp_path / "missing.txt") == ("", False)
    s, cut = bound_utf8("abc", 2000)
    assert s == "abc" and not cut


def test_classify_failure_rules():
    assert classify_failure(0, "", False) == (None, None)
    assert classify_failure(-9, "", True, 5)[0] == "TimeoutError"
    assert classify_failure(137, "", False)[0] == "MemoryError"  # Docker-style 128+9
    assert classify_failure(1, "", False, oom_killed=True)[0] == "MemoryError"
    tb = 'Traceback (most recent call last):\n  File "s.py", line 1, in <module>\nnumpy._core._exceptions._ArrayMemoryError: Unable to allocate 8 GiB\n'
    assert classify_failure(1, tb, False)[0] == "MemoryError"
    tb = 'Traceback (most recent call last):\n  File "s.py", line 3\nModuleNotFoundError: No module named \'lightgbm\'\n'
    assert classify_failure(1, tb, False) == ("ModuleNotFoundError", "ModuleNotFoundError: No module named 'lightgbm'")
    assert classify_failure(-11, "", False)[0] == "ProcessError"
    assert last_exception_line("just some log\nwarning: x\n") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="programs run as nobody only when the orchestrator is root")
def test_root_runs_programs_as_nobody_in_private_namespaces(tmp_path, public_dir):
    # pytest's tmp_path sits under /tmp/pytest-of-root (mode 700): nobody reaches only the
    # node directory and the public data through it, and sees no other entry of tmp_path.
    (tmp_path / "secret.txt").write_text("root only")
    marker = f"escape-{os.getpid()}-{time.monotonic_ns()}"
    res = run(
        f"""
        import os
        print('uid', os.getuid(), os.getgid(), os.getgroups())
        print('home', os.environ['HOME'], os.environ['TMPDIR'])
        print('siblings', sorted(os.listdir('..')))
        print('pids', len([p for p in os.listdir('/proc') if p.isdigit()]))
        open('/tmp/{marker}', 'w').write('x')     # the private /tmp
        print(open('input/train.csv').read().splitlines()[0])
        """,
        tmp_path,
        public_dir,
    )
    assert res.ok, res.term_out
    node = tmp_path / "node"
    assert "uid 65534 65534 []" in res.stdout
    assert f"home {node}/working/.home /tmp" in res.stdout
    assert "siblings ['node', 'public']" in res.stdout, "tmp_path's other entries (secret.txt) stay hidden"
    assert "pids 2" in res.stdout or "pids 1" in res.stdout  # its own PID namespace
    assert "id,y" in res.stdout
    assert not Path(f"/tmp/{marker}").exists()
    assert all(p.lstat().st_uid == 0 for p in [node, *node.rglob("*")])


def test_missing_interpreter_is_a_sandbox_error(tmp_path, public_dir):
    from swarm_evo.sandbox import SandboxError

    with pytest.raises(SandboxError, match="cannot start"):
        LocalSandbox(python=str(tmp_path / "no-python")).execute("print(1)", tmp_path / "node", public_dir, 10)


def test_the_supervisor_gets_the_interpreters_site_paths_although_it_starts_without_site(tmp_path, public_dir):
    """The supervisor runs with ``-S`` (issue 16: no ``site``, ≈ 15 ms less per execution); the
    paths the program needs (mounted for it in namespace mode) come from the interpreter itself,
    asked once: its site-packages included, as a program importing an installed package shows."""
    import sysconfig

    from swarm_evo.sandbox.local import interpreter_paths

    paths = interpreter_paths(sys.executable)
    assert os.path.realpath(sysconfig.get_paths()["purelib"]) in paths
    assert interpreter_paths(sys.executable) is paths, "asked once per interpreter"
    res = LocalSandbox().execute("import pandas, numpy\nprint('pandas', pandas.__version__)\n",
                                 tmp_path / "node", public_dir, 60)
    assert res.exit_code == 0, res.term_out
    assert "pandas " in res.stdout
