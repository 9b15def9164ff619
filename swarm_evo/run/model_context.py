"""What a model call is given: the offline model's structured context (docs/CONTRACTS.md) and
the variables every prompt template may use (the objective, loci, time and steps left, the
prompt budget). Steps, agent evolution and problem setup share them."""

from __future__ import annotations

from typing import Any

from swarm_evo.prompting.text_bounds import prompt_limits
from swarm_evo.run.session import RunSession


def offline_context(session: RunSession, purpose: str, call_key: str) -> dict[str, Any]:
    """The structured context the offline model receives (docs/CONTRACTS.md): purpose, seed,
    call key, fault and repair rates, the loci, the objective's ``competition`` or
    ``problem`` entry, and ``packages``: what the sandbox's interpreter has installed (name ->
    version, from the runtime probe), so the offline model only imports what is there."""
    return {
        "purpose": purpose,
        "seed": session.config.seed,
        "call_key": call_key,
        "fault_rate": session.config.model.fault_rate,
        "repair_rate": session.config.model.repair_rate,
        **session.objective.offline_view(),
        "loci": list(session.loci),
        "packages": dict(session.runtime.packages),
    }


def format_seconds(seconds: float | None) -> str:
    """Human duration, e.g. ``1h 05m`` or ``42s``; ``unlimited`` for None."""
    if seconds is None:
        return "unlimited"
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def exec_timeout(session: RunSession) -> float:
    """This execution's timeout: the configured one, capped by the run's remaining time."""
    return max(1.0, session.budget.exec_timeout(session.config.sandbox.exec_timeout))


def prompt_context(session: RunSession) -> dict[str, Any]:
    """Variables every template may use: objective (the competition or problem), loci,
    guidelines (time, steps, device), and ``limits``: the run's prompt budget
    (:func:`swarm_evo.prompting.text_bounds.prompt_limits`, from the model's context window), with which
    the templates bound every text they show (issue 13)."""
    return {
        "limits": prompt_limits(session.config.model),
        "objective": session.objective.prompt_view(),
        "loci": list(session.loci),
        "time_remaining": format_seconds(session.budget.time_left()),
        "exec_timeout": format_seconds(exec_timeout(session)),
        "steps_remaining": session.budget.remaining,
        "device_info": session.device,
        "packages": session.packages,
    }


def memory_limit_text(session: RunSession) -> str | None:
    """The memory limit programs run under, for debug prompts: the configured limit, else the
    sandbox's cgroup limit from the runtime probe (Docker's default), else None."""
    limit = session.config.sandbox.memory_limit_mb or session.runtime.memory_limit_mb
    return f"{limit} MB" if limit else None
