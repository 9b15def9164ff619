"""The installer that fills the program environment: uv when it is there, else pip (issues 15, 33).

``swarm-evo env build`` installs ``deployments/requirements-<profile>.txt`` (about 60 wheels,
940 MB) into a fresh virtual environment. uv (`docs.astral.sh/uv`, a dependency of the project,
so ``.venv/bin/uv`` is there after ``pip install -e .``) does it in ≈ 9 s on this project's
2-core machine, pip in ≈ 27 s (both measured on 2026-11-27, uv from an empty cache). Both get the
same wheels (``--only-binary :all:``) and leave compiled bytecode: programs run with
``PYTHONDONTWRITEBYTECODE`` in a read-only view of the environment, so a module without its
``.pyc`` would be compiled again by every program that imports it (pip compiles by default, uv
with ``--compile-bytecode``).

Which one (:func:`choose_installer`, ``swarm-evo env build --installer auto|uv|pip``): by
default :func:`find_uv` — the ``uv`` beside this interpreter (the project's virtual environment),
else the first on ``PATH``; none: pip, run by the new environment's own interpreter. Each reads its own settings: ``PIP_INDEX_URL`` and ``pip.conf`` for pip,
``UV_DEFAULT_INDEX`` / ``UV_INDEX_URL`` and ``uv.toml`` for uv. uv trusts the platform's
certificate store (``UV_SYSTEM_CERTS=1`` unless set), as pip does through truststore: behind a
TLS-inspecting proxy whose CA the system trusts, uv's own bundle fails with "invalid peer
certificate: UnknownIssuer" (seen on this project's machines without ``SSL_CERT_FILE``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Installer:
    """An installer: ``name`` (``"uv"`` or ``"pip"``) and, for uv, the executable ``uv``."""

    name: str
    uv: str | None = None

    @property
    def needs_pip(self) -> bool:
        """Whether the new environment needs pip in it (pip installs with the environment's own)."""
        return self.uv is None

    def command(self, python: str, requirements: Path) -> list[str]:
        """The command that installs ``requirements`` (binary wheels only) into ``python``'s environment."""
        if self.uv:
            return [self.uv, "pip", "install", "--python", python, "--only-binary", ":all:", "--compile-bytecode",
                    "-r", str(requirements)]
        return [python, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
                "--only-binary=:all:", "-r", str(requirements)]

    @property
    def index_settings(self) -> str:
        """The settings that name another package index, for a message's fix."""
        return "UV_DEFAULT_INDEX (uv.toml)" if self.uv else "PIP_INDEX_URL / PIP_EXTRA_INDEX_URL (pip.conf)"


def find_uv() -> str | None:
    """The ``uv`` executable beside this interpreter, else the first on ``PATH``; None when neither."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


def choose_installer(name: str = "auto") -> Installer:
    """The installer called ``name``: ``"auto"`` is uv when :func:`find_uv` finds it, else pip.

    Raises:
        ValueError: ``name`` is not auto, uv or pip, or it is uv and no uv is installed (the
            message says how to get it).
    """
    if name not in ("auto", "uv", "pip"):
        raise ValueError(f"installer {name!r}: choose auto, uv or pip")
    uv = find_uv() if name != "pip" else None
    if name == "uv" and uv is None:
        raise ValueError("installer uv: no uv beside this Python nor on PATH; `pip install uv`, or choose pip")
    return Installer("uv", uv) if uv else Installer("pip")


_FAILURES = (  # (pattern whose group 1 is the package, what happened); pip's lines, then uv's
    (r"No matching distribution found for (\S+)", "no release of {pkg} matches the pin for this Python/platform"),
    (r"Could not find a version that satisfies the requirement (\S+)", "no release of {pkg} matches the pin"),
    (r"Failed (?:to build|building wheel for) `?([^\s`]+)", "{pkg} could not be built"),
    (r"Cannot install (\S+)", "{pkg} conflicts with another pin"),
    (r"Because there is no version of (\S+) and", "no release of {pkg} matches the pin for this Python/platform"),
    (r"Because (\S+) was not found in the package registry", "no release of {pkg} is in the package index"),
)
_NETWORK = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|"
                      r"Could not fetch URL|ConnectionError|ReadTimeoutError|"
                      r"Failed to fetch|error sending request|dns error|tcp connect error", re.IGNORECASE)


def explain_install_failure(output: str, requirements: Path, installer: Installer = Installer("pip")) -> str:
    """One message for a failed install: the package and the fix, read from the installer's output."""
    for pattern, what in _FAILURES:
        match = re.search(pattern, output)
        if match:
            pkg = match.group(1).rstrip(".,;:")
            fix = (f"the package index cannot be reached: check the network or set {installer.index_settings}"
                   if _NETWORK.search(output) else
                   f"change the pin of {pkg.split('==')[0]} in {requirements} (or install it by hand into the "
                   "environment and set sandbox.python)")
            return f"installing {requirements.name} failed: {what.format(pkg=pkg)}; fix: {fix}"
    if _NETWORK.search(output):
        return (f"installing {requirements.name} failed: the package index cannot be reached; fix: check the "
                f"network or set {installer.index_settings}")
    tail = " | ".join(line.strip() for line in output.strip().splitlines()[-3:])
    return f"installing {requirements.name} failed: {tail}"


_PROGRESS_LINES = ("Collecting", "Downloading", "Installing", "Successfully", "ERROR",  # pip
                   "Resolved", "Prepared", "Installed", "Bytecode compiled", "error")  # uv
"""The installers' lines worth showing while they work (their warnings stay in a failure's output)."""


def stream(argv: list[str], progress: Callable[[str], None]) -> str | None:
    """Run ``argv`` (no prompts; uv with the system's certificates), passing its progress lines
    to ``progress``; None on success, else its whole output (standard output and error, in order)."""
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={"UV_SYSTEM_CERTS": "1", **os.environ, "PIP_NO_INPUT": "1", "UV_NO_PROGRESS": "1"}) as proc:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(_PROGRESS_LINES):
                progress("  " + line.rstrip())
    return None if proc.returncode == 0 else "".join(lines)
