"""A flow run in the process a worker started for it freezes the heap its imports left
(``swarm_evo/run/heap.py``): the worker's flow-run process imports Prefect, the flow's module and
everything under it (litellm, pandas, scikit-learn) and then runs the flow for minutes to hours,
while CPython's collector would walk that import-time heap in every full collection.

Only there: a flow called in a process that does other work (a ``swarm-evo run`` has settled its
own heap already, a sweep in one process runs its runs as subflows, a test calls the flow
in-process) is left alone. The worker names the flow run it started in the process's
environment (``PREFECT__FLOW_RUN_ID``, Prefect 3.8.8's process worker and ``prefect flow-run
execute``), which is how the run tells the two apart.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from prefect.context import FlowRunContext

from swarm_evo.run import heap


def settle_if_own_process() -> bool:
    """:func:`swarm_evo.run.heap.settle` when this process was started for the current flow run;
    returns whether it did."""
    context = FlowRunContext.get()
    run = context.flow_run if context else None
    if run is None or os.environ.get("PREFECT__FLOW_RUN_ID") != str(run.id):
        return False
    heap.settle()
    return True


def heap_settled(fn: Callable) -> Callable:
    """Decorator for a flow's function (under ``@flow``): :func:`settle_if_own_process` first, then
    the body. The signature is kept (``functools.wraps``)."""

    @functools.wraps(fn)
    def settled(*args, **kwargs):
        settle_if_own_process()
        return fn(*args, **kwargs)

    return settled
