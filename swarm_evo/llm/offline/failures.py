"""Injected model failures of the offline model, for reliability testing (issue 7).

With ``model.injected_failure_rate`` = r > 0 (the client adds ``injected_failure_rate`` to the
CTX), each call to the offline model fails on purpose with probability r, in one of these ways,
chosen uniformly among the kinds the call can take:

==================  ===================================================  ==========  ==========
kind                what the caller sees                                 code calls  tool calls
==================  ===================================================  ==========  ==========
timeout             ``litellm.Timeout`` (status 408)                     yes         yes
rate_limit          ``litellm.RateLimitError`` (429)                     yes         yes
server_error        ``litellm.InternalServerError`` (500) or             yes         yes
                    ``litellm.ServiceUnavailableError`` (503), 50/50
no_code_block       a prose reply without a fenced code block            yes         no
invalid_tool_json   a tool call whose arguments are truncated JSON       no          yes
empty               an empty reply (no text, no tool call)               yes         yes
==================  ===================================================  ==========  ==========

Tool calls are the calls made with ``tools`` (review, evolve_agent); the others are code calls.
The decision has its own random generator, ``random.Random(f"failures:{seed}:{call_key}:{n}")``
with n the number of earlier calls with the same seed and call key in this process, so it is
independent of the reply's generator and a repeated call (litellm's ``num_retries``, a re-ask,
a Prefect task retry) decides afresh: a retried call can succeed. A fresh process repeats the
same decisions for the same calls.

Each injection is logged (WARNING, logger ``swarm_evo.llm.offline.failures``) and counted;
a later call with the same call key that gets a real reply counts the earlier injections as
recovered. :func:`stats` returns the counts, :func:`reset` clears them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from dataclasses import dataclass

import litellm

from .respond import Reply

log = logging.getLogger(__name__)

TRANSIENT_KINDS = ("timeout", "rate_limit", "server_error")
"""Kinds raised as litellm exceptions (all in swarm_evo.llm.errors.transient_errors())."""
CODE_KINDS = TRANSIENT_KINDS + ("no_code_block", "empty")
"""Kinds a code call (draft, mutate, merge, debug, fix, auxiliary_metrics) can take."""
TOOL_KINDS = TRANSIENT_KINDS + ("invalid_tool_json", "empty")
"""Kinds a tool call (review, evolve_agent) can take."""
FAILURE_KINDS = TRANSIENT_KINDS + ("no_code_block", "invalid_tool_json", "empty")

PROSE_REPLY = (
    "I would start from the sample submission, engineer a few features from the training data and "
    "fit a gradient-boosted tree model, validating it with 5-fold cross-validation."
)
"""The text of a ``no_code_block`` reply: a plan with no program."""


@dataclass(frozen=True)
class Injection:
    """One decided failure: its kind (one of :data:`FAILURE_KINDS`, a server error as
    ``server_error:500`` or ``server_error:503``), the call key and the 1-based try of that
    call key in this process."""

    kind: str
    call_key: str
    attempt: int


class FailureInjector:
    """Per-process state: how often each (seed, call key) was called, the pending injections
    per call key and the counts. Thread-safe (steps run in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget all calls and counts."""
        with self._lock:
            self._tries: Counter = Counter()
            self._pending: dict[tuple, list[str]] = {}
            self.calls = 0
            self.injected: Counter = Counter()
            self.recovered: Counter = Counter()

    def decide(self, ctx: dict, tool_call: bool) -> Injection | None:
        """Whether this call fails (probability ``ctx["injected_failure_rate"]``) and how.

        Args:
            ctx: the call's CTX; uses ``injected_failure_rate`` (float in [0, 1], absent = 0),
                ``seed`` and ``call_key``.
            tool_call: the call was made with ``tools`` (review, evolve_agent).
        Returns:
            None for a normal reply (pending injections of the call key then count as
            recovered), else the :class:`Injection`.
        """
        rate = float(ctx.get("injected_failure_rate") or 0.0)
        if rate <= 0:
            return None
        key = (ctx.get("seed", 0), str(ctx.get("call_key", "")))
        injection = None
        with self._lock:
            self._tries[key] += 1
            attempt = self._tries[key]
            self.calls += 1
            rng = random.Random(f"failures:{key[0]}:{key[1]}:{attempt}")
            if rng.random() < rate:
                kind = rng.choice(TOOL_KINDS if tool_call else CODE_KINDS)
                if kind == "server_error":
                    kind = rng.choice(("server_error:500", "server_error:503"))
                base = kind.split(":")[0]
                self.injected[base] += 1
                self._pending.setdefault(key, []).append(base)
                injection = Injection(kind=kind, call_key=key[1], attempt=attempt)
            else:
                pending = self._pending.pop(key, [])
                for kind in pending:
                    self.recovered[kind] += 1
        if injection is not None:
            log.warning("offline model: injected %s on call %s (try %d)", injection.kind, key[1], attempt)
        elif pending:
            log.warning("offline model: call %s answered on try %d after injected %s",
                        key[1], attempt, ", ".join(pending))
        return injection

    def stats(self) -> dict:
        """``{"calls": n, "injected": {kind: n}, "recovered": {kind: n}}``: calls seen with a
        non-zero rate, failures injected and those whose call key later got a real reply."""
        with self._lock:
            return {"calls": self.calls, "injected": dict(self.injected), "recovered": dict(self.recovered)}


INJECTOR = FailureInjector()


def stats() -> dict:
    """Counts of the process's injector, see :meth:`FailureInjector.stats`."""
    return INJECTOR.stats()


def reset() -> None:
    """Clear the process's injector (tests)."""
    INJECTOR.reset()


def apply(injection: Injection, model: str, tool_name: str | None) -> Reply:
    """Carry out ``injection``: raise the litellm exception of a transient kind, or return the
    bad :class:`Reply` (``tool_name`` names the forced tool of a tool call).

    Raises:
        litellm.Timeout | litellm.RateLimitError | litellm.InternalServerError |
        litellm.ServiceUnavailableError: for ``timeout``, ``rate_limit``, ``server_error``.
    """
    where = dict(llm_provider="offline", model=model)
    note = f"offline model: injected failure on call {injection.call_key} (try {injection.attempt})"
    if injection.kind == "timeout":
        raise litellm.Timeout(f"{note}: request timed out", **where)
    if injection.kind == "rate_limit":
        raise litellm.RateLimitError(f"{note}: rate limit reached, retry later", **where)
    if injection.kind == "server_error:500":
        raise litellm.InternalServerError(f"{note}: internal server error", **where)
    if injection.kind == "server_error:503":
        raise litellm.ServiceUnavailableError(f"{note}: service unavailable", **where)
    if injection.kind == "no_code_block":
        return Reply(content=PROSE_REPLY)
    if injection.kind == "invalid_tool_json":
        return Reply(tool_name=tool_name or "submit_review",
                     tool_arguments_text='{"is_bug": false, "summary": "The program ran and')
    return Reply(content="")


def inject(ctx: dict, model: str, tools: list | None) -> Reply | None:
    """The provider's hook: None for a normal call, else the bad reply of an injected failure.

    Raises:
        litellm exceptions: an injected transient failure (see :func:`apply`).
    """
    injection = INJECTOR.decide(ctx, tool_call=bool(tools))
    if injection is None:
        return None
    tool_name = None
    if tools:
        tool_name = ((tools[0] or {}).get("function") or {}).get("name")
    return apply(injection, model, tool_name)
