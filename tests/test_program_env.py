"""The program environment (issue 15): which interpreter runs programs, how it is built, and
that programs importing the Kaggle stack run on both backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swarm_evo.sandbox import installer, program_env
from swarm_evo.sandbox.installer import Installer, explain_install_failure
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.program_env import (
    ProgramEnvError,
    build_program_env,
    program_env_warning,
    read_marker,
    resolve_program_python,
)
from swarm_evo.sandbox.runtime import RuntimeInfo, describe_runtime

KAGGLE_PROGRAM = r'''
import numpy as np, pandas as pd
import lightgbm, xgboost, catboost, optuna, PIL.Image, skimage.feature
X = np.random.RandomState(0).rand(300, 4)
y = (X[:, 0] + X[:, 1] > 1).astype(int)
scores = {
    "lightgbm": lightgbm.LGBMClassifier(n_estimators=20, verbose=-1, n_jobs=1).fit(X, y).score(X, y),
    "xgboost": xgboost.XGBClassifier(n_estimators=20, n_jobs=1).fit(X, y).score(X, y),
    "catboost": catboost.CatBoostClassifier(iterations=20, verbose=0, thread_count=1).fit(X, y).score(X, y),
}
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
study.optimize(lambda t: (t.suggest_float("x", -2, 2) - 1) ** 2, n_trials=5)
image = PIL.Image.fromarray((X[:16, :1].reshape(4, 4) * 255).astype("uint8"))
hog = skimage.feature.hog(np.asarray(image.resize((16, 16))) / 255.0, pixels_per_cell=(8, 8), cells_per_block=(1, 1))
pd.DataFrame({"id": [0], "score": [min(scores.values())]}).to_csv("submission/submission.csv", index=False)
print("SCORES", {k: round(v, 3) for k, v in scores.items()}, "optuna", len(study.trials), "hog", hog.shape)
'''


# --------------------------------------------------------------------------- which interpreter
def test_configured_interpreter_or_venv_dir(tmp_path, programs_python):
    env_dir = Path(programs_python).parents[1]
    assert resolve_program_python(str(env_dir)).path == str(Path(programs_python).absolute())
    chosen = resolve_program_python(programs_python)
    assert (chosen.path, chosen.source, chosen.warning) == (programs_python, "sandbox.python", None)


def test_missing_configured_interpreter_names_the_setting_and_the_fix(tmp_path):
    with pytest.raises(ProgramEnvError, match=r"sandbox.python '.*nope'.*swarm-evo env build --path DIR"):
        resolve_program_python(str(tmp_path / "nope"))


def test_default_is_the_built_environment_else_the_project_interpreter(tmp_path, monkeypatch, programs_python):
    monkeypatch.setattr(program_env, "DEFAULT_ENV_DIR", Path(programs_python).parents[1])  # the suite hides it
    built = resolve_program_python(None)
    assert (built.path, built.source, built.warning) == (programs_python, "program environment", None)
    monkeypatch.setattr(program_env, "DEFAULT_ENV_DIR", tmp_path / "absent")
    fallback = resolve_program_python(None)
    assert fallback.path == sys.executable and fallback.source == "project interpreter"
    assert "swarm-evo env build" in fallback.warning
    bare = RuntimeInfo(python="3.11", packages={"numpy": "2"})
    assert program_env_warning(fallback, bare) == fallback.warning
    full = RuntimeInfo(python="3.11", packages={"lightgbm": "4", "xgboost": "3", "catboost": "1"})
    assert program_env_warning(fallback, full) is None  # the flow image: one environment on purpose
    assert program_env_warning(resolve_program_python(programs_python), bare) is None


@pytest.mark.slow  # a `swarm-evo run` process
def test_run_with_a_missing_python_is_bad_input(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "swarm_evo.cli", "run", "--problem", "circle-packing", "--max-steps", "1",
         "--python", str(tmp_path / "venv"), "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "sandbox.python" in proc.stderr and "swarm-evo env build" in proc.stderr
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- building it
@pytest.fixture
def tiny_profile(tmp_path, monkeypatch):
    """A `tabular` profile whose requirements install nothing (no network): the build's steps,
    its marker and its cache run for real on an empty list."""
    deployments = tmp_path / "deployments"
    deployments.mkdir()
    (deployments / "requirements-tabular.txt").write_text("# nothing to install\n")
    monkeypatch.setattr(program_env, "DEPLOYMENTS", deployments)
    monkeypatch.setitem(program_env.PROFILES, "tabular", ("json", "sqlite3"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("UV_NO_INDEX", "1")
    return deployments / "requirements-tabular.txt"


@pytest.fixture(params=["uv", "pip"])
def each_installer(request, monkeypatch):
    """The build with uv (found beside this interpreter or on PATH) and with pip (no uv found)."""
    if request.param == "pip":
        monkeypatch.setattr(installer, "find_uv", lambda: None)
    elif installer.find_uv() is None:
        pytest.fail("uv is a dependency of the project: `pip install -e .` puts it beside this interpreter")
    return request.param


@pytest.mark.slow  # builds a virtual environment
def test_build_writes_a_marker_and_is_cached_by_the_requirements_hash(tmp_path, tiny_profile, each_installer):
    lines: list[str] = []
    env_dir = tmp_path / "env"
    first = build_program_env("tabular", env_dir, progress=lines.append)
    assert first["built"] and read_marker(env_dir)["requirements_hash"] == first["requirements_hash"]
    assert any(line.startswith("[1/3]") for line in lines) and any(line.startswith("[3/3]") for line in lines)
    assert f"[2/3] {each_installer} install -r" in "\n".join(lines)
    assert (env_dir / "bin" / "pip").exists() == (each_installer == "pip")  # uv needs no pip in the environment
    assert json.loads((env_dir / "swarm-evo-env.json").read_text())["packages"] == {"json": first["packages"]["json"],
                                                                                    "sqlite3": ""}
    again = build_program_env("tabular", env_dir, progress=lines.append)
    assert again["built"] is False and "up to date" in lines[-1]
    tiny_profile.write_text("# a changed pin\n")
    assert build_program_env("tabular", env_dir, progress=lines.append)["built"]
    assert resolve_program_python(str(env_dir)).path == str(env_dir / "bin" / "python")


def test_failed_install_names_the_package_and_leaves_no_marker(tmp_path, tiny_profile, each_installer):
    tiny_profile.write_text("no-such-package-swarm-evo==1.0\n")
    with pytest.raises(ProgramEnvError, match=r"no release of no-such-package-swarm-evo.*fix: change the pin of no-such-package-swarm-evo in"):
        build_program_env("tabular", tmp_path / "env", progress=lambda _line: None)
    assert read_marker(tmp_path / "env") is None  # the next build starts over


def test_build_refuses_a_directory_that_is_not_an_environment(tmp_path, tiny_profile):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    proc = subprocess.run([sys.executable, "-m", "swarm_evo.cli", "env", "build", "--path", str(tmp_path / "mine")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "is not a program environment" in proc.stderr
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"


def test_unknown_profile_and_installer_messages():
    with pytest.raises(ProgramEnvError, match="unknown profile 'gpu'"):
        program_env.requirements_file("gpu")
    req = Path("requirements-tabular.txt")
    pip, uv = Installer("pip"), Installer("uv", "/usr/bin/uv")
    offline = "WARNING: Retrying ... Failed to establish a new connection\nERROR: No matching distribution found for lightgbm==4.7.0"
    assert "package index cannot be reached" in explain_install_failure(offline, req, pip)
    assert "lightgbm==4.7.0" in explain_install_failure(offline, req, pip)
    assert explain_install_failure("ERROR: something odd\n", req, pip).endswith("ERROR: something odd")
    # uv's words (uv 0.13.9): a pin with no release, and an index it cannot reach
    no_release = ("error: No solution found when resolving dependencies\n  cause: Because there is no version of "
                  "lightgbm==99.0 and you require lightgbm==99.0, we can conclude that your requirements are unsatisfiable.")
    assert explain_install_failure(no_release, req, uv) == (
        "installing requirements-tabular.txt failed: no release of lightgbm==99.0 matches the pin for this "
        "Python/platform; fix: change the pin of lightgbm in requirements-tabular.txt (or install it by hand into "
        "the environment and set sandbox.python)")
    unreachable = ("error: Request failed after 3 retries in 7.3s\n  cause: Failed to fetch: http://127.0.0.1:9/simple/"
                   "lightgbm/\n  cause: tcp connect error\n  cause: Connection refused (os error 111)")
    assert "cannot be reached" in explain_install_failure(unreachable, req, uv)
    assert "UV_DEFAULT_INDEX" in explain_install_failure(unreachable, req, uv)


def test_installer_choice(monkeypatch):
    assert installer.choose_installer("pip") == Installer("pip")  # even with uv installed
    assert installer.choose_installer("auto").name == "uv"  # a dependency of the project
    assert installer.choose_installer("uv").command("/env/bin/python", Path("r.txt"))[1:4] == ["pip", "install",
                                                                                               "--python"]
    with pytest.raises(ValueError, match="choose auto, uv or pip"):
        installer.choose_installer("conda")
    monkeypatch.setattr(installer, "find_uv", lambda: None)
    assert installer.choose_installer("auto") == Installer("pip")
    with pytest.raises(ValueError, match="no uv beside this Python nor on PATH; `pip install uv`, or choose pip"):
        installer.choose_installer("uv")


def test_installers_run_without_prompts_and_uv_with_the_system_certificates(monkeypatch):
    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    show = [sys.executable, "-c", "import os; print(os.environ['UV_SYSTEM_CERTS'], os.environ['PIP_NO_INPUT']); "
            "print('ERROR: stop'); raise SystemExit(1)"]
    lines: list[str] = []
    assert installer.stream(show, lines.append) == "1 1\nERROR: stop\n"  # a failure returns the whole output
    assert lines == ["  ERROR: stop"]  # progress: the lines an installer starts its news with
    monkeypatch.setenv("UV_SYSTEM_CERTS", "0")  # the user's own setting wins
    assert installer.stream(show, lines.append).startswith("0 1")


def test_deep_profile_includes_the_tabular_pins():
    deep = program_env.requirements_file("deep").read_text()
    assert "-r requirements-tabular.txt" in deep and "torch==" in deep and "timm==" in deep
    tabular_hash = program_env.requirements_hash("tabular")
    assert program_env.requirements_hash("deep") != tabular_hash


# --------------------------------------------------------------------------- programs on both backends
def _run_kaggle_program(sandbox, tmp_path: Path) -> str:
    public = tmp_path / "public"
    public.mkdir(exist_ok=True)
    result = sandbox.execute(KAGGLE_PROGRAM, tmp_path / "node", public, timeout=300)
    assert result.ok, result.term_out[-3000:]
    assert (tmp_path / "node" / "submission" / "submission.csv").exists()
    return result.stdout


def test_kaggle_stack_runs_on_the_local_backend_and_the_probe_lists_it(tmp_path, programs_python):
    sandbox = LocalSandbox(python=programs_python, parallel_workers=1)
    out = _run_kaggle_program(sandbox, tmp_path)
    assert "'lightgbm': " in out and "optuna 5" in out and "hog (36,)" in out
    runtime = describe_runtime(sandbox)
    for name in ("lightgbm", "xgboost", "catboost", "optuna", "pillow", "scikit-image"):
        assert name in runtime.packages, runtime.packages
    assert runtime.executable == programs_python
    assert "lightgbm==" in runtime.package_list


def test_kaggle_stack_runs_in_the_docker_image_built_from_the_same_requirements(tmp_path, docker_client,
                                                                              programs_python):
    from swarm_evo.sandbox import DEFAULT_IMAGE, DockerSandbox

    labels = docker_client.images.get(DEFAULT_IMAGE).labels
    assert labels.get("org.swarm-evo.requirements") == _file_hash(program_env.requirements_file("tabular"))
    sandbox = DockerSandbox(image=DEFAULT_IMAGE, parallel_workers=1)
    out = _run_kaggle_program(sandbox, tmp_path)
    assert "'catboost': " in out
    docker_runtime = describe_runtime(sandbox)
    local_runtime = describe_runtime(LocalSandbox(python=programs_python, parallel_workers=1))
    assert docker_runtime.packages == local_runtime.packages  # one requirements file, one stack


def _file_hash(path: Path) -> str:
    """The offline image build's label: ``sha256sum FILE | cut -c1-16``."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_programs_python_is_not_the_project_interpreter(programs_python):
    assert os.path.realpath(Path(programs_python).parents[1]) != os.path.realpath(sys.prefix)
