"""``swarm-evo pool setup``: a work pool, and the automation that turns dead runs Crashed (issue 34, item 5).

A flow run whose machine dies stays Running for ever: nothing on the server notices. Prefect's
answer ("How to detect and respond to zombie flows", docs.prefect.io/v3/advanced/detect-zombie-flows)
is two halves:

- the flow runs emit ``prefect.flow-run.heartbeat`` events every
  ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` seconds (Prefect 3.8.8 refuses values under 30,
  ``prefect.settings.models.flows``; the default is 180). Every deployment of prefect.yaml sets
  it to 30 in its job variables (``env``), which the worker passes to the flow run's process,
  so a worker started with no extra variable is right (issue 40, item 1); a run of ours that
  comes out slower anyway sends its own (flows/_heartbeat_guard.py);
- an automation on the server with a *proactive* trigger: after a heartbeat of a flow run
  tagged ``swarm-evo`` (``match_related``: the tag every deployment of prefect.yaml and every
  run a sweep starts carries; the rest of the server is never watched), ``for_each``
  ``prefect.resource.id`` (each run on its own), expect another heartbeat or a final state
  within ``within`` seconds; when none comes, change the run's state to CRASHED.

:func:`setup_pool` creates both through Prefect's client (``create_work_pool``,
``create_automation``), idempotently. A heartbeat event names the run, its flow, deployment and
tags, not its work pool, so there is one automation per server, named :data:`AUTOMATION_NAME`.

Timing (measured in tests/test_pool_server.py): the server evaluates proactive triggers every
5 s (``prefect.server.events.triggers``, ``periodic_granularity``), so a run whose process died
turns Crashed between ``within - frequency`` and ``within + 5`` seconds after its death.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import httpx

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.exceptions import ObjectNotFound

from flows._heartbeat_guard import MIN_HEARTBEAT_FREQUENCY, POOL_TAG

AUTOMATION_NAME = "swarm-evo: crash flow runs whose heartbeats stop"
DEFAULT_HEARTBEAT_FREQUENCY = MIN_HEARTBEAT_FREQUENCY
MISSED_HEARTBEATS = 2
"""``within`` = this many heartbeat intervals: one missed heartbeat (a busy machine, a slow event
pipeline) never crashes a live run; a dead one is Crashed 1-2 intervals (+5 s) after it died.
Prefect's documented example uses 3 (heartbeats every 30 s, within 90 s)."""
POOL_TYPES = ("process", "docker")
HEARTBEAT_EVENT = "prefect.flow-run.heartbeat"
FINAL_EVENTS = ("prefect.flow-run.Completed", "prefect.flow-run.Failed", "prefect.flow-run.Cancelled",
                "prefect.flow-run.Crashed")


class PoolSetupError(ValueError):
    """Bad input or an unreachable server; the message is one line naming the fix."""


@dataclass
class SetupResult:
    """What :func:`setup_pool` did: ``pool_created`` / ``automation_action`` (``created``,
    ``found`` or ``updated``), the pool's type and the automation's id and ``within`` seconds."""

    pool: str
    pool_type: str
    pool_created: bool
    automation_id: str
    automation_action: str
    within: int
    heartbeat_frequency: int
    api_url: str = ""


def zombie_automation(heartbeat_frequency: int = DEFAULT_HEARTBEAT_FREQUENCY) -> AutomationCore:
    """The automation of Prefect's "detect zombie flows" guide for heartbeats every
    ``heartbeat_frequency`` seconds, with ``within`` = :data:`MISSED_HEARTBEATS` intervals, for
    the flow runs tagged :data:`~flows._heartbeat_guard.POOL_TAG` only.

    Raises:
        PoolSetupError: ``heartbeat_frequency`` under :data:`MIN_HEARTBEAT_FREQUENCY`.
    """
    if heartbeat_frequency < MIN_HEARTBEAT_FREQUENCY:
        raise PoolSetupError(f"--heartbeat-frequency must be >= {MIN_HEARTBEAT_FREQUENCY} seconds "
                             f"(Prefect's minimum for PREFECT_FLOWS_HEARTBEAT_FREQUENCY), got {heartbeat_frequency}")
    within = MISSED_HEARTBEATS * heartbeat_frequency
    return AutomationCore(
        name=AUTOMATION_NAME,
        description=(f"Marks a flow run tagged {POOL_TAG} Crashed when no heartbeat (or final state) follows its last "
                     f"heartbeat within {within} s: its machine or process died. The deployments of swarm-evo's "
                     f"prefect.yaml heartbeat every {MIN_HEARTBEAT_FREQUENCY} s (their job variables). Made by "
                     "`swarm-evo pool setup`."),
        enabled=True,
        trigger=EventTrigger(
            after={HEARTBEAT_EVENT},
            expect={HEARTBEAT_EVENT, *FINAL_EVENTS},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification({"prefect.resource.role": "tag",
                                                 "prefect.resource.id": f"prefect.tag.{POOL_TAG}"}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=within),
        ),
        actions=[ChangeFlowRunState(state=StateType.CRASHED,
                                    message=f"no heartbeat for {within} s: the flow run's machine or process died")],
    )


def _same_rule(found: AutomationCore, wanted: AutomationCore) -> bool:
    keys = {"trigger", "actions", "enabled"}  # python mode: sets stay sets (JSON lists follow the hash seed)
    return found.model_dump(include=keys) == wanted.model_dump(include=keys)


async def _setup(pool: str, pool_type: str, heartbeat_frequency: int) -> SetupResult:
    from prefect.workers.utilities import get_default_base_job_template_for_infrastructure_type

    wanted = zombie_automation(heartbeat_frequency)
    async with get_client() as client:
        await _check_database(client)
        try:
            existing = await client.read_work_pool(pool)
        except ObjectNotFound:
            existing = None
        if existing is not None:
            if existing.type != pool_type:
                raise PoolSetupError(f"work pool {pool} exists with type {existing.type}, not {pool_type}: "
                                     f"give --type {existing.type} or another --pool name")
            created = False
        else:
            template = await get_default_base_job_template_for_infrastructure_type(pool_type)
            if template is None:
                raise PoolSetupError(f"--type {pool_type}: no worker type {pool_type!r} installed here "
                                     f"(install it, e.g. `pip install -e '.[docker-worker]'` for docker)")
            await client.create_work_pool(WorkPoolCreate(name=pool, type=pool_type, base_job_template=template))
            created = True
        found = await client.read_automations_by_name(AUTOMATION_NAME)
        if not found:
            automation_id, action = await client.create_automation(wanted), "created"
        else:
            automation_id, action = found[0].id, "found"
            if not _same_rule(found[0], wanted):
                await client.update_automation(found[0].id, wanted)
                action = "updated"
    return SetupResult(pool=pool, pool_type=pool_type, pool_created=created, automation_id=str(automation_id),
                       automation_action=action, within=int(wanted.trigger.within.total_seconds()),
                       heartbeat_frequency=heartbeat_frequency)


POSTGRES_DRIVER = "postgresql+asyncpg"


async def _check_database(client) -> None:
    """Refuse a server that does not run on PostgreSQL (issue 53, item 11): on the stock ``prefect
    server start`` (SQLite) "database is locked" stalled the server for about 60 s, the heartbeats of
    a live run arrived late and the automation marked it Crashed while its process lived. The API
    hides the database URL (a secret) but shows ``server.database.driver``, which
    deployments/start-prefect-server.sh sets.

    Raises:
        PoolSetupError: the server's driver is not PostgreSQL's (one line: the command that starts it).
    """
    response = await client._client.get("/admin/settings")
    response.raise_for_status()
    driver = ((response.json().get("server") or {}).get("database") or {}).get("driver")
    if driver != POSTGRES_DRIVER:
        raise PoolSetupError(
            f"the Prefect server at PREFECT_API_URL does not run on PostgreSQL (server.database.driver: "
            f"{driver or 'unset, so SQLite unless its URL says otherwise'}): on SQLite the automation this command makes "
            "marks live runs Crashed when the database stalls; start the server with `bash "
            "deployments/start-prefect-server.sh` (PostgreSQL; docs/many-machines.md#server), or, for a server "
            f"already on PostgreSQL, give it PREFECT_SERVER_DATABASE_DRIVER={POSTGRES_DRIVER}")


def setup_pool(pool: str, pool_type: str = "process",
               heartbeat_frequency: int = DEFAULT_HEARTBEAT_FREQUENCY) -> SetupResult:
    """Create work pool ``pool`` of ``pool_type`` when missing, and the zombie automation
    (:func:`zombie_automation`) when missing (updated when its rule differs); on the server
    of ``PREFECT_API_URL``. Running it again changes nothing.

    Raises:
        PoolSetupError: no PREFECT_API_URL, the server does not answer or does not run on
            PostgreSQL, a bad pool name or type, an existing pool of another type, a heartbeat
            frequency under 30 s.
    """
    from prefect.settings import PREFECT_API_URL

    if not pool or not pool.strip():
        raise PoolSetupError("--pool must name a work pool, e.g. --pool swarm-evo-process")
    if pool_type not in POOL_TYPES:
        raise PoolSetupError(f"--type must be one of {', '.join(POOL_TYPES)} (got {pool_type!r})")
    api_url = PREFECT_API_URL.value()
    if not api_url:
        raise PoolSetupError("no Prefect server: set PREFECT_API_URL to the shared server's /api URL "
                             "(e.g. http://HOST:4200/api, from deployments/start-prefect-server.sh)")
    zombie_automation(heartbeat_frequency)  # bad frequency before any request
    try:
        result = asyncio.run(_setup(pool, pool_type, heartbeat_frequency))
    except (httpx.TransportError, httpx.HTTPStatusError) as exc:  # refused, timed out, not a Prefect API
        raise _unreachable(api_url, exc) from None
    result.api_url = api_url
    return result


def _unreachable(api_url: str, exc: BaseException) -> PoolSetupError:
    return PoolSetupError(f"the Prefect server at PREFECT_API_URL={api_url} did not answer "
                          f"({type(exc).__name__}: {exc}): start it (deployments/start-prefect-server.sh) "
                          "or fix PREFECT_API_URL")


def worker_command(result: SetupResult) -> str:
    """The command that starts a worker of the pool (shell syntax): nothing about heartbeats,
    which the deployments carry. The API URL is the one this machine used: on another machine,
    its host must name this server. A server that asks for credentials (this process has
    ``PREFECT_API_AUTH_STRING``) gets the variable named, never its value: it is read from the
    server's credentials file (deployments/start-prefect-server.sh)."""
    from prefect.settings import get_current_settings

    auth = ('PREFECT_API_AUTH_STRING="$(cat prefect-api-auth)" '
            if get_current_settings().api.auth_string is not None else "")
    return f"PREFECT_API_URL={result.api_url or '<the server /api URL>'} {auth}prefect worker start --pool {result.pool}"
