"""A generated program's environment: the orchestrator's minus every secret, with thread counts set."""

from __future__ import annotations

import os
import re
from typing import Mapping


SECRET_NAME_PARTS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
)
"""Any variable whose name contains one of these (case-insensitive) is dropped."""

DROPPED_PREFIXES: tuple[str, ...] = (
    "PREFECT_",
    "LITELLM_",
    "OPENAI_",
    "ANTHROPIC_",
    "AZURE_",
    "AWS_",
    "GOOGLE_",
    "GEMINI_",
    "DEEPSEEK_",
    "HF_",
    "HUGGING",
    "GITHUB_",
    "DOCKER_",
    "KAGGLE_",
    "SWARM_EVO_",
)
"""Variables of services the generated program must not talk to (case-insensitive prefixes)."""

DROPPED_NAMES: frozenset[str] = frozenset(
    {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONINSPECT", "DATABASE_URL", "REDIS_URL"}
)

_URL_WITH_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def is_secret_env(name: str, value: str = "") -> bool:
    """True when an environment variable must not reach generated code (SPEC §10)."""
    upper = name.upper()
    if upper in DROPPED_NAMES:
        return True
    if any(part in upper for part in SECRET_NAME_PARTS):
        return True
    if any(upper.startswith(prefix) for prefix in DROPPED_PREFIXES):
        return True
    return bool(_URL_WITH_CREDENTIALS.search(value or ""))


def scrub_env(
    env: Mapping[str, str] | None = None,
    num_threads: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a generated program: ``env`` (default ``os.environ``) minus secrets.

    Drops every variable for which :func:`is_secret_env` holds (names containing KEY, TOKEN,
    SECRET, PASSWORD, CREDENTIAL, AUTH, ...; PREFECT_*, provider prefixes; PYTHONPATH and
    friends; values holding ``user:password@`` URLs). Sets ``PYTHONUNBUFFERED=1``,
    ``MPLBACKEND=Agg`` and, unless already set, the BLAS/OpenMP thread counts to
    ``num_threads`` (default: the CPU count). ``extra`` is applied last, unscrubbed (for
    deliberate settings such as ``CUDA_VISIBLE_DEVICES``).
    """
    source = os.environ if env is None else env
    out = {k: v for k, v in source.items() if not is_secret_env(k, v)}
    out["PYTHONUNBUFFERED"] = "1"
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    out.setdefault("MPLBACKEND", "Agg")
    threads = str(max(1, num_threads or os.cpu_count() or 1))
    for name in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
    ):
        out.setdefault(name, threads)
    if extra:
        out.update(extra)
    return out
