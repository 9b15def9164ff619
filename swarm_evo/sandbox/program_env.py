"""The program environment: the interpreter and libraries generated programs run with (issue 15).

Programs must not run in the agent's own environment: a real model writes LightGBM, XGBoost,
CatBoost or PyTorch code, and installing those beside litellm and Prefect mixes two
dependency sets. ``swarm-evo env build`` makes a separate virtual environment from a pinned
requirements file per profile (``deployments/requirements-<profile>.txt``, the same files the
Docker sandbox images are built from), by default ``.venv-programs`` beside the project's own
``.venv``; :func:`resolve_program_python` picks the interpreter the local backend runs:

1. ``sandbox.python`` (config, SandboxSettings block, ``--python``) when set;
2. else the default program environment when it has been built;
3. else the project's own interpreter, with a warning (only numpy, pandas, scikit-learn, scipy).

A build is cached by the requirements' hash: a marker file (``swarm-evo-env.json``) written
last, after every module of the profile imported, says which profile and hash the environment
holds; a build with the same hash does nothing, a changed pin rebuilds it from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from swarm_evo.sandbox.base import SandboxUnavailableError
from swarm_evo.sandbox.installer import choose_installer, explain_install_failure, stream

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = PROJECT_ROOT / "deployments"
DEFAULT_ENV_DIR = PROJECT_ROOT / ".venv-programs"
MARKER_FILE = "swarm-evo-env.json"

PROFILES: dict[str, tuple[str, ...]] = {
    "tabular": ("numpy", "pandas", "sklearn", "scipy", "lightgbm", "xgboost", "catboost", "optuna",
                "PIL", "skimage"),
    "deep": ("numpy", "pandas", "sklearn", "scipy", "lightgbm", "xgboost", "catboost", "optuna",
             "PIL", "skimage", "torch", "torchvision", "timm"),
}
"""Profile name -> the modules that must import once it is installed (the build's last check)."""

BARE_STACK_WARNING = (
    "programs run in the project's own interpreter ({python}), which lacks the libraries Kaggle solutions "
    "import (LightGBM, XGBoost, CatBoost, ...): such programs fail with ModuleNotFoundError; run `swarm-evo "
    "env build` to make the program environment ({default}), or set sandbox.python / --python"
)


class ProgramEnvError(SandboxUnavailableError):
    """The program environment cannot be used or built; the message names the file, the
    package or the setting, and the fix (bad input: the CLI exits 2)."""


@dataclass(frozen=True)
class ProgramInterpreter:
    """The interpreter the local backend runs programs with.

    ``path``: absolute path of the ``python`` executable; ``source``: ``"sandbox.python"``,
    ``"program environment"`` or ``"project interpreter"``; ``warning``: set for the project's
    own interpreter (logged once per run).
    """

    path: str
    source: str
    warning: str | None = None


def requirements_file(profile: str) -> Path:
    """``deployments/requirements-<profile>.txt``.

    Raises:
        ProgramEnvError: unknown profile, or the file is missing (an installed copy of the
            package without the project's ``deployments/`` folder).
    """
    if profile not in PROFILES:
        raise ProgramEnvError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
    path = DEPLOYMENTS / f"requirements-{profile}.txt"
    if not path.is_file():
        raise ProgramEnvError(f"{path} not found: build the program environment from a swarm-evo checkout")
    return path


def requirements_hash(profile: str) -> str:
    """16 hex digits of SHA-256 over the profile's requirements file and the files it includes
    with ``-r`` (so a pin changed in ``requirements-tabular.txt`` also rebuilds ``deep``)."""
    digest = hashlib.sha256()
    pending, seen = [requirements_file(profile)], set()
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text = path.read_text()
        digest.update(path.name.encode() + b"\0" + text.encode())
        pending += [path.parent / m for m in re.findall(r"^\s*-r\s+(\S+)", text, flags=re.MULTILINE)]
    return digest.hexdigest()[:16]


def env_python(env_dir: Path) -> Path:
    """The interpreter of a virtual environment: ``env_dir/bin/python``."""
    return Path(env_dir) / "bin" / "python"


def read_marker(env_dir: Path) -> dict | None:
    """The environment's marker (``{"profile", "requirements_hash", "python", "packages"}``),
    or None when it was never built completely."""
    try:
        return json.loads((Path(env_dir) / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None


def resolve_program_python(configured: str | None) -> ProgramInterpreter:
    """The interpreter programs run with on the local backend (order in the module docstring).

    ``configured`` may name an interpreter or a virtual environment's directory.

    Raises:
        ProgramEnvError: ``configured`` names nothing executable (the message says how to
            build an environment).
    """
    if configured:
        path = Path(configured).expanduser()
        if path.is_dir():
            path = env_python(path)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ProgramEnvError(
                f"sandbox.python {configured!r}: no Python interpreter there; build one with "
                f"`swarm-evo env build --path DIR` and set sandbox.python (or --python) to DIR, "
                "or leave it unset to use the default program environment"
            )
        return ProgramInterpreter(str(path.absolute()), "sandbox.python")
    default = env_python(DEFAULT_ENV_DIR)
    if read_marker(DEFAULT_ENV_DIR) is not None and os.access(default, os.X_OK):
        return ProgramInterpreter(str(default), "program environment")
    return ProgramInterpreter(sys.executable, "project interpreter",
                              BARE_STACK_WARNING.format(python=sys.executable, default=DEFAULT_ENV_DIR))


KAGGLE_LIBRARIES = ("lightgbm", "xgboost", "catboost")


def program_env_warning(interpreter: ProgramInterpreter, runtime) -> str | None:
    """The once-per-run warning for programs run by the project's own interpreter, or None.

    ``runtime`` is the sandbox's :class:`~swarm_evo.sandbox.runtime.RuntimeInfo`. No warning
    when that interpreter has the Kaggle libraries anyway (the flow image, deployments/
    flow.Dockerfile, installs the project into the sandbox image's environment on purpose).
    """
    if interpreter.warning is None or all(name in runtime.packages for name in KAGGLE_LIBRARIES):
        return None
    return interpreter.warning


def build_program_env(profile: str = "tabular", path: Path | None = None,
                      progress: Callable[[str], None] = print, rebuild: bool = False,
                      installer: str = "auto") -> dict:
    """Make (or keep) the program environment of ``profile`` at ``path``; returns its marker
    plus ``"built"`` (False when it was already up to date), ``"seconds"`` and ``"size_mb"``.

    Steps: ``venv``, the install of ``requirements-<profile>.txt`` (binary wheels only) by uv or
    pip (:mod:`.installer`; its progress lines passed to ``progress``), an import of every module
    of the profile, then the marker. Interrupted builds leave no marker, so the next build starts
    over.

    ``installer``: ``"auto"`` (uv when installed, else pip), ``"uv"`` or ``"pip"``
    (:func:`.installer.choose_installer`).

    Raises:
        ProgramEnvError: unknown profile, no such installer, the install failed (the package
            and the fix), or a module of the profile does not import.
    """
    env_dir = Path(path or DEFAULT_ENV_DIR).expanduser().absolute()
    requirements = requirements_file(profile)
    try:
        chosen = choose_installer(installer)
    except ValueError as exc:
        raise ProgramEnvError(str(exc)) from exc
    wanted = requirements_hash(profile)
    marker = read_marker(env_dir)
    started = time.monotonic()
    if not rebuild and marker and marker.get("requirements_hash") == wanted and marker.get("profile") == profile \
            and os.access(env_python(env_dir), os.X_OK):
        progress(f"{env_dir}: profile {profile} is up to date (requirements {wanted})")
        return {**marker, "built": False, "seconds": 0.0, "size_mb": _size_mb(env_dir)}
    if env_dir.exists():
        if marker is None and any(env_dir.iterdir()) and not (env_dir / "pyvenv.cfg").exists():
            raise ProgramEnvError(f"{env_dir} exists and is not a program environment: give another --path")
        progress(f"{env_dir}: removing the old environment ({(marker or {}).get('profile', 'incomplete')})")
        shutil.rmtree(env_dir)
    progress(f"[1/3] virtual environment {env_dir}")
    venv.EnvBuilder(with_pip=chosen.needs_pip, symlinks=True).create(env_dir)
    python = str(env_python(env_dir))
    progress(f"[2/3] {chosen.name} install -r {requirements} (profile {profile})")
    output = stream(chosen.command(python, requirements), progress)
    if output is not None:
        raise ProgramEnvError(explain_install_failure(output, requirements, chosen))
    progress(f"[3/3] import check: {', '.join(PROFILES[profile])}")
    check = subprocess.run([python, "-c", _IMPORT_CHECK, *PROFILES[profile]], capture_output=True, text=True)
    if check.returncode != 0:
        raise ProgramEnvError(f"{env_dir}: {check.stdout.strip() or check.stderr.strip()[-500:]}; fix: "
                              f"`swarm-evo env build --profile {profile} --rebuild`, or check the pins in {requirements}")
    marker = {"profile": profile, "requirements_hash": wanted, "python": python,
              "packages": json.loads(check.stdout)}
    tmp = env_dir / (MARKER_FILE + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    tmp.replace(env_dir / MARKER_FILE)
    seconds = time.monotonic() - started
    size = _size_mb(env_dir)
    progress(f"built {env_dir} (profile {profile}) in {seconds:.0f} s, {size:.0f} MB")
    return {**marker, "built": True, "seconds": seconds, "size_mb": size}


_IMPORT_CHECK = r"""
import importlib, json, sys
versions = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        print(f"module {name} does not import: {type(exc).__name__}: {exc}")
        sys.exit(1)
    versions[name] = getattr(module, "__version__", "")
print(json.dumps(versions))
"""


def _size_mb(path: Path) -> float:
    """Disk size of a directory tree in MB (10^6 bytes; files only, links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / 1e6
