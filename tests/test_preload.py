"""The pre-imported program server (swarm_evo/sandbox/preload.py, preload_server.py; issue 40's
suite time): a program forked from it sees what ``python solution.py`` sees, is confined the same,
and dies with the run process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from swarm_evo.sandbox import LocalSandbox
from swarm_evo.sandbox.preload import DEFAULT_PRELOAD, imports_any, stop_servers

WORLD = """
import json, os, random, sys
first = "pandas" in sys.modules  # before the program imports anything itself
import pandas
print(json.dumps({"preloaded": first, "argv": sys.argv, "file": __file__, "name": __name__,
                  "path0": sys.path[0], "cwd": os.getcwd(), "uid": os.getuid(), "env": dict(os.environ),
                  "spec": __spec__, "random": random.random(), "pid1": os.getpid() == 1}))
"""

FAILURES = {  # each imports numpy, so the preloaded sandbox forks it
    "exit3": ("import sys, numpy\nsys.exit(3)\n", 3),
    "exit_text": ("import sys, numpy\nsys.exit('leaving now')\n", 1),
    "raise": ("import numpy\ndef f():\n    raise KeyError('missing column')\nf()\n", 1),
    "syntax": ("import numpy\ndef broken(:\n    pass\n", 1),
    "killed": ("import os, signal, numpy\nprint('bye', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n", -9),
    "thread": ("import threading, time, numpy\n"
               "def late():\n    time.sleep(0.5)\n    print('thread done', flush=True)\n"
               "threading.Thread(target=late).start()\nprint('main done')\n", 0),
    "atexit": ("import atexit\natexit.register(lambda: print('atexit ran'))\n"
               "import numpy as np\nprint(np.arange(3).sum())\n", 0),
}


@pytest.fixture()
def public_dir(tmp_path: Path) -> Path:
    d = tmp_path / "public"
    d.mkdir()
    (d / "train.csv").write_text("id,y\n1,2\n")
    for path in (tmp_path, d):
        path.chmod(0o755)
    (d / "train.csv").chmod(0o644)
    return d


def _run(code: str, workdir: Path, public_dir: Path, preload, **kw):
    return LocalSandbox(preload=preload, **kw).execute(textwrap.dedent(code), workdir, public_dir, 60)


def test_a_preloaded_program_sees_what_a_new_interpreter_sees(tmp_path, public_dir):
    seen = {}
    for name, preload in (("exec", ()), ("preloaded", DEFAULT_PRELOAD), ("again", DEFAULT_PRELOAD)):
        result = _run(WORLD, tmp_path / name, public_dir, preload)
        assert result.exit_code == 0, result.stderr
        seen[name] = json.loads(result.stdout)
    assert not seen["exec"]["preloaded"] and seen["preloaded"]["preloaded"] and seen["again"]["preloaded"]
    for name, world in seen.items():
        workdir = str((tmp_path / name).resolve())
        assert world["argv"] == ["solution.py"] and world["file"] == f"{workdir}/solution.py", world
        assert world["name"] == "__main__" and world["spec"] is None and world["path0"] == workdir
        assert world["cwd"] == workdir and world["env"]["HOME"] == f"{workdir}/working/.home"
        assert world["uid"] == seen["exec"]["uid"] and world["pid1"] == seen["exec"]["pid1"]
        env = {k: v for k, v in world["env"].items() if k != "HOME"}
        assert env == {k: v for k, v in seen["exec"]["env"].items() if k != "HOME"}
    assert len({world["random"] for world in seen.values()}) == 3, "each fork draws its own seed"


def test_a_preloaded_program_collects_its_garbage_without_walking_the_preloaded_modules(tmp_path, public_dir):
    """The server freezes what its imports made before it forks (gc.freeze, swarm_evo/run/heap.py):
    the program's collector is on, and the pre-imported modules are in the permanent generation
    that its collections never visit; a new interpreter has nothing frozen."""
    code = "import gc, json, numpy\nprint(json.dumps([gc.isenabled(), gc.get_freeze_count()]))\n"
    execed, forked = (_run(code, tmp_path / name, public_dir, preload) for name, preload in
                      (("exec", ()), ("preloaded", DEFAULT_PRELOAD)))
    assert execed.exit_code == 0 and json.loads(execed.stdout) == [True, 0], execed.stderr
    enabled, frozen = json.loads(forked.stdout)
    assert enabled is True and frozen > 50_000, (enabled, frozen)  # numpy, pandas, scikit-learn's objects


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_exit_status_output_and_traceback_are_the_interpreters(tmp_path, public_dir, case):
    code, expected = FAILURES[case]
    plain = _run(code, tmp_path / "exec", public_dir, ())
    forked = _run(code, tmp_path / "forked", public_dir, DEFAULT_PRELOAD)
    assert plain.exit_code == forked.exit_code == expected, (plain.stderr, forked.stderr)
    assert forked.stdout == plain.stdout
    assert forked.stderr.replace(str((tmp_path / "forked").resolve()), "W") == \
        plain.stderr.replace(str((tmp_path / "exec").resolve()), "W")
    assert forked.exc_type == plain.exc_type


def test_a_preloaded_program_is_confined_as_an_execed_one(tmp_path, public_dir):
    secret = tmp_path / "private" / "answers.csv"
    secret.parent.mkdir()
    secret.write_text("id,y\n1,42\n")
    probe = f"""
    import os, socket, sys
    print("preloaded", "pandas" in sys.modules)
    import pandas
    for path in ({str(secret)!r}, "/etc/shadow", {str(Path.home())!r}):
        try:
            print(path, "READ" if os.path.isfile(path) and open(path).read(1) is not None else
                  ("LISTED " + str(len(os.listdir(path)))) if os.path.isdir(path) else "absent")
        except OSError as exc:
            print(path, "refused", type(exc).__name__)
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        print("network REACHED")
    except OSError:
        print("network refused")
    print("uid", os.getuid(), "pid", os.getpid())
    """
    result = _run(probe, tmp_path / "node", public_dir, DEFAULT_PRELOAD)
    assert result.exit_code == 0, result.stderr
    assert "preloaded True" in result.stdout
    assert "READ" not in result.stdout and "REACHED" not in result.stdout, result.stdout
    if os.geteuid() == 0:
        assert f"uid {65534}" in result.stdout and "pid 2" in result.stdout, result.stdout


def test_only_programs_that_import_a_preloaded_package_are_forked(tmp_path, public_dir):
    assert imports_any("import os\nfrom sklearn.ensemble import RandomForestClassifier\n", DEFAULT_PRELOAD)
    assert imports_any("def f():\n    import pandas as pd\n", DEFAULT_PRELOAD)
    assert not imports_any("import os, math\nfrom .numpy import x\n", DEFAULT_PRELOAD)
    assert not imports_any("import os, (\n", DEFAULT_PRELOAD), "what does not tokenize gets a new interpreter"
    assert not imports_any("x = 'import pandas'  # import numpy\nfrom . import sklearn\n", DEFAULT_PRELOAD)
    assert imports_any("import os; import json as j, numpy.linalg\n", DEFAULT_PRELOAD)
    plain = WORLD.replace("import pandas\n", "")
    result = _run(plain, tmp_path / "node", public_dir, DEFAULT_PRELOAD)
    assert result.exit_code == 0 and json.loads(result.stdout)["preloaded"] is False, result.stderr


def test_one_server_serves_executions_whose_environments_differ_only_in_their_own_variables(tmp_path, public_dir,
                                                                                               monkeypatch):
    from swarm_evo.sandbox import preload

    stop_servers()
    code = WORLD + "print(os.environ.get('PER_EXECUTION'))\n"
    seen = []
    for n in range(2):
        monkeypatch.setenv("PER_EXECUTION", str(n))
        result = _run(code, tmp_path / f"node{n}", public_dir, DEFAULT_PRELOAD)
        assert result.exit_code == 0, result.stderr
        seen.append(result.stdout.splitlines()[-1])
    assert seen == ["0", "1"] and len(preload._servers) == 1
    _run(code, tmp_path / "threads", public_dir, DEFAULT_PRELOAD, num_threads=7)  # read at numpy's import
    assert len(preload._servers) == 2


def test_a_preloaded_program_never_sees_the_run_processs_secrets(tmp_path, public_dir, monkeypatch):
    stop_servers()  # the server starts now, from this environment
    monkeypatch.setenv("OPENAI_API_KEY", "sk-run-secret")
    monkeypatch.setenv("SWARM_EVO_STORE", "s3://user:hunter2@bucket/x")
    result = _run(WORLD, tmp_path / "node", public_dir, DEFAULT_PRELOAD)
    assert result.exit_code == 0, result.stderr
    world = json.loads(result.stdout.splitlines()[0])
    assert world["preloaded"] and "OPENAI_API_KEY" not in world["env"] and "SWARM_EVO_STORE" not in world["env"]
    assert "sk-run-secret" not in result.stdout and "hunter2" not in result.stdout


def test_parallel_executions_share_one_server(tmp_path, public_dir):
    from concurrent.futures import ThreadPoolExecutor

    sandbox = LocalSandbox(preload=DEFAULT_PRELOAD)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda n: sandbox.execute(WORLD + f"print({n})\n", tmp_path / f"node{n}", public_dir, 60),
                                range(6)))
    assert [r.exit_code for r in results] == [0] * 6, [r.stderr for r in results]
    assert [r.stdout.splitlines()[-1] for r in results] == [str(n) for n in range(6)]
    assert all(json.loads(r.stdout.splitlines()[0])["preloaded"] for r in results)


def test_the_cores_program_parses_never_run_two_at_once():
    """gh-106905: two threads in ``ast.parse`` at once fail on CPython 3.11; every parse of a
    program in the core goes through ``parse_program``'s lock (and the program server's import
    check reads tokens)."""
    import ast as ast_module
    import re

    root = Path(__file__).resolve().parents[1] / "swarm_evo"
    direct = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                    if re.search(r"\bast\.parse\(", p.read_text()) and p.name != "source.py")
    assert not direct, f"parse programs with swarm_evo.population.source.parse_program: {direct}"
    from swarm_evo.population.source import parse_program

    assert isinstance(parse_program("import numpy\n"), ast_module.Module)
    with pytest.raises(SyntaxError):
        parse_program("def broken(:\n")


def test_a_memory_limit_too_small_for_a_fork_starts_a_new_interpreter(tmp_path, public_dir):
    result = _run(WORLD, tmp_path / "node", public_dir, DEFAULT_PRELOAD, memory_limit_mb=256)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["preloaded"] is False


def test_the_timeout_kills_a_preloaded_programs_tree(tmp_path, public_dir):
    code = """
    import subprocess, sys, time, numpy
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # preload-orphan"], start_new_session=True)
    print("spawned", flush=True)
    time.sleep(600)
    """
    started = time.monotonic()
    result = LocalSandbox().execute(textwrap.dedent(code), tmp_path / "node", public_dir, 3)
    assert result.timed_out and "spawned" in result.stdout and time.monotonic() - started < 3 + 10
    assert not _alive("preload-orphan")


def _alive(marker: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in proc.info["cmdline"] or ()):
            found.append(proc.pid)
    return found


def test_a_killed_run_process_takes_the_server_and_every_program_with_it(tmp_path, public_dir):
    runner = f"""
import sys, textwrap
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from pathlib import Path
from swarm_evo.sandbox import LocalSandbox
code = '''
import subprocess, sys, time, sklearn.metrics
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # preload" + "-daemon"], start_new_session=True)
print("started", flush=True)
time.sleep(600)
'''
LocalSandbox().execute(code, Path({str(tmp_path / "node")!r}), Path({str(public_dir)!r}), 600)
"""
    proc = subprocess.Popen([sys.executable, "-c", runner])
    try:
        deadline = time.monotonic() + 60
        while not _alive("preload-daemon"):
            assert time.monotonic() < deadline and proc.poll() is None, "the program never started"
            time.sleep(0.2)
        servers = [p.pid for p in psutil.Process(proc.pid).children() if "preload_server.py" in " ".join(p.cmdline())]
        assert servers, "the execution went through a program server"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while _alive("preload-daemon") or any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                                              for pid in servers):
            assert time.monotonic() < deadline, "the program or its server outlived the run process"
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()


def teardown_module():
    stop_servers()
