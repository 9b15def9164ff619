"""The final fit (issue 41, item 4): the run's chosen program trained once more on the full
public data for the hand-in, within the time the run has left."""

from __future__ import annotations

import logging
import time

from swarm_evo.population.node import Node
from swarm_evo.run.session import RunSession

FINAL_FIT_KEY = "final_fit"
"""``journal.info["final_fit"]``: what the run's last final fit did (see :func:`final_fit`)."""
MIN_FINAL_FIT_SECONDS = 5.0
"""Less time left than this and the final fit does not start."""
log = logging.getLogger(__name__)


def final_fit(session: RunSession, handed_in: Node | None) -> dict | None:
    """With a hidden split and ``search.final_refit``, run ``handed_in``'s program once more on
    the competition's full public data (:meth:`CompetitionObjective.final_fit`), its timeout the
    smaller of ``sandbox.exec_timeout`` and the run's time left; its submission becomes the
    hand-in when it runs and is valid, else the original stays.

    Records and returns ``{"status": "refit" | "original" | "skipped", "node_id", "seconds",
    "metric", "reason", "wall_seconds"}`` in ``journal.info["final_fit"]`` (saved); None (and
    nothing recorded) when the run has no hidden split, the key is off or nothing was handed in.
    """
    objective = session.objective
    if getattr(objective, "hidden", None) is None or not session.config.search.final_refit or handed_in is None:
        return None
    left = session.budget.time_left()
    timeout = session.config.sandbox.exec_timeout if left is None else min(session.config.sandbox.exec_timeout, left)
    started = time.perf_counter()
    if timeout < MIN_FINAL_FIT_SECONDS:
        outcome = {"status": "skipped", "node_id": handed_in.id, "seconds": 0.0, "metric": None,
                   "reason": f"no time left for it ({max(0.0, timeout):.0f} s of the time limit)"}
    else:
        outcome = objective.final_fit(session.sandbox, session.run_dir, handed_in, timeout)  # type: ignore[attr-defined]
    outcome["wall_seconds"] = round(time.perf_counter() - started, 3)
    (log.info if outcome["status"] == "refit" else log.warning)(
        "final fit of node %s: %s%s", handed_in.id[:8], outcome["status"],
        f" ({outcome['reason'][:300]}); the original submission is handed in" if outcome.get("reason") else "")
    with session.lock:
        session.journal.info[FINAL_FIT_KEY] = outcome
        session.journal.save()
    return outcome
