"""The checks a run makes before its first step, shared by the CLI's preflight and the session:
the sandbox and its runtime probe, and one small call to each model the run uses."""

from __future__ import annotations

import threading
from pathlib import Path

from swarm_evo.config import RunConfig
from swarm_evo.llm.endpoint import ModelEndpoint
from swarm_evo.llm.ledger import LEDGER_FILE, ledger_for
from swarm_evo.llm.probe import ProbeResult, check_model_access, probe_model
from swarm_evo.sandbox import RuntimeInfo, Sandbox, describe_runtime
from swarm_evo.sandbox.factory import make_sandbox

_RUNTIMES: dict[str, RuntimeInfo] = {}
_LOCK = threading.Lock()


def open_sandbox(config: RunConfig) -> tuple[Sandbox, RuntimeInfo]:
    """Build the sandbox and probe it (the preflight check): ``(sandbox, runtime)``.

    The probe runs one tiny program through the sandbox with the run's limits and GPU
    request (once per process and sandbox configuration: the CLI's preflight and the flow's
    session share it), so a missing image, a dead daemon or a host without the NVIDIA runtime stops the
    run here, before any step.

    Raises:
        SandboxUnavailableError: the backend cannot run programs (the message names the fix).
        RuntimeProbeError: the probe ran but failed (e.g. no Python in the image).
    """
    sandbox = make_sandbox(config)
    key = f"{config.search.parallel_workers}:{config.sandbox.model_dump_json()}"
    with _LOCK:
        runtime = _RUNTIMES.get(key)
    if runtime is None:
        runtime = describe_runtime(sandbox)
        with _LOCK:
            _RUNTIMES[key] = runtime
    return sandbox, runtime


def probe_endpoints(endpoint: ModelEndpoint, config: RunConfig) -> list[ProbeResult]:
    """The preflight call (:func:`swarm_evo.llm.probe.probe_model`) of each distinct model
    the run uses: the code model, and the review and evolution models when they differ.

    Raises:
        ModelAccessError: a model's endpoint is unreachable, refuses the key or lacks the model.
    """
    names = [endpoint.name, config.model.review_name, config.model.evolution_name]
    results = []
    for role, name in zip(("code", "review", "evolution"), names):
        if name and name not in names[: ("code", "review", "evolution").index(role)]:
            role_endpoint = endpoint if role == "code" else endpoint.for_role(role, name)
            check_model_access(role_endpoint)
            results.append(probe_model(role_endpoint))
    return results


def record_probe(run_dir: Path, probe: ProbeResult) -> None:
    """Count a preflight call in the run's ledger, once (a cached probe is shared by runs in one process)."""
    if probe.recorded or not (probe.usage.calls or probe.warning):
        return
    ledger_for(run_dir / LEDGER_FILE).record(
        role="code", operation="probe", model=probe.model, ok=probe.warning is None, seconds=probe.seconds,
        prompt_tokens=probe.usage.prompt_tokens, completion_tokens=probe.usage.completion_tokens,
        cost_usd=probe.usage.cost, error=probe.warning,
    )
    probe.recorded = True


