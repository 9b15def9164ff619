"""The Prefect state of a flow run: what the domain's liveness check (swarm_evo/store/liveness.py,
no Prefect there) asks the API about the flow run that holds a run's store location (issue 53,
item 3), and what a run asks about its own (flows/_state_watch.py, item 11)."""

from __future__ import annotations

import sys
import uuid


def read_flow_run_state(flow_run_id: str):
    """The current :class:`prefect.client.schemas.objects.State` of flow run ``flow_run_id`` on the
    configured Prefect API (``PREFECT_API_URL``, or the ephemeral API this process already runs:
    flows/_ephemeral.py), or None when it cannot tell: no API (this process starts no server just
    to ask), an id that is not a flow run's, a run the server does not know (another server's),
    or an API that does not answer. Never raises."""
    from prefect.settings import PREFECT_API_URL

    server = sys.modules.get("prefect.server.api.server")  # not imported: no ephemeral API runs here
    ephemeral = server is not None and any(getattr(s, "running", False)
                                           for s in server.SubprocessASGIServer._instances.values())
    if not PREFECT_API_URL.value() and not ephemeral:
        return None
    try:
        run_id = uuid.UUID(str(flow_run_id))
    except ValueError:
        return None
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return client.read_flow_run(run_id).state
    except Exception:  # noqa: BLE001 - not found, unreachable: the caller's other evidence decides
        return None


def flow_run_state(flow_run_id: str) -> str | None:
    """The state type (``"RUNNING"``, ``"CRASHED"``, ...) of flow run ``flow_run_id``
    (:func:`read_flow_run_state`), or None when it cannot tell. Never raises."""
    state = read_flow_run_state(flow_run_id)
    return state.type.value if state is not None else None
