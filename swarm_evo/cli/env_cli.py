"""``swarm-evo env build``: make the program environment generated programs run with (issue 15).

    swarm-evo env build [--profile tabular|deep] [--path DIR] [--rebuild] [--installer auto|uv|pip]

Exit codes: 0 built or already up to date, 2 bad input or a failed install (the message names
the package and the fix). See :mod:`swarm_evo.sandbox.program_env`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_env_parser(sub) -> None:
    """Add the ``env`` command and its ``build`` sub-command to the CLI's sub-parsers."""
    from swarm_evo.sandbox.program_env import DEFAULT_ENV_DIR, PROFILES

    e = sub.add_parser("env", help="the program environment: the libraries generated programs import")
    actions = e.add_subparsers(dest="env_command", required=True)
    b = actions.add_parser("build", help="create a virtual environment from deployments/requirements-<profile>.txt",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    b.add_argument("--profile", choices=tuple(PROFILES), default="tabular",
                   help="tabular: the Kaggle tabular stack (LightGBM, XGBoost, CatBoost, optuna, pillow, "
                   "scikit-image); deep: tabular plus torch, torchvision and timm (several GB)")
    b.add_argument("--path", type=Path, default=DEFAULT_ENV_DIR,
                   help="where the environment goes; a path other than the default needs sandbox.python / --python")
    b.add_argument("--rebuild", action="store_true", help="rebuild even if the requirements did not change")
    b.add_argument("--installer", choices=("auto", "uv", "pip"), default="auto",
                   help="auto: uv when it is installed (beside this Python or on PATH), else pip; pip reads "
                   "pip.conf / PIP_INDEX_URL, uv reads uv.toml / UV_DEFAULT_INDEX")


def run_env(args) -> int:
    """Run ``swarm-evo env build``; returns the exit code."""
    from swarm_evo.sandbox.program_env import DEFAULT_ENV_DIR, ProgramEnvError, build_program_env

    try:
        result = build_program_env(args.profile, args.path, progress=lambda line: print(line, flush=True),
                                   rebuild=args.rebuild, installer=args.installer)
    except ProgramEnvError as exc:
        print(f"swarm-evo: error: {exc}", file=sys.stderr)
        return 2
    packages = ", ".join(f"{k} {v}" for k, v in result["packages"].items())
    print(f"program environment: {result['python']} ({result['profile']}: {packages})")
    if Path(args.path).expanduser().absolute() != DEFAULT_ENV_DIR:
        print(f"runs use it with --python {result['python']} (or sandbox.python in the config)")
    return 0
