"""The run's record of every model call: ``RUN_DIR/llm_calls.jsonl`` (issue 13, cost).

Nodes carry the usage of the calls that made them, but some calls make no node (the
preflight probe, agent evolutions, the auxiliary-metrics writer) and a call that fails
(timeout, HTTP 500, refused key) returns no usage at all. The ledger sees every call, because
:func:`swarm_evo.llm.client.call_model` appends one line per call, success or failure:

    {"at": 1732420000.1, "role": "code", "operation": "draft", "model": "openai/x",
     "ok": true, "error": null, "prompt_tokens": 812, "completion_tokens": 410,
     "cost_usd": 0.0021, "seconds": 3.2, "scope": "<node id>/generate"}

``cost_usd`` is litellm's ``response_cost`` (custom pricing included; 0 for the built-in offline
model) or null when the model has no price. A successful call without a price makes the run's
cost unknown (issue 31): the totals' ``cost_usd`` is then None and ``unpriced_calls`` counts
those calls, never a sum that silently leaves them out; ``known_cost_usd`` is what the priced
calls cost. A failed call returned no tokens and has nothing to price. ``scope`` (or null) is
what the call was made for (:func:`call_scope`, e.g. a node's generation), so a node's usage
counts every call made for it, failed tries and Prefect task retries too (:meth:`CallLedger.usage_of`).

The file is append-only, so a resumed run continues its totals; a half-written last line (a
killed process) is skipped. The run report's ``llm`` section and the ``max_cost_usd`` stop read
:meth:`CallLedger.totals`.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field, computed_field

from swarm_evo.population.node import LLMUsage

LEDGER_FILE = "llm_calls.jsonl"

_SCOPE: ContextVar[str | None] = ContextVar("swarm_evo_call_scope", default=None)


@contextmanager
def call_scope(scope: str, ledger_path: str | Path | None = None) -> Iterator[None]:
    """Model calls made inside the block (this thread's context) are recorded under ``scope``,
    a string naming what they are for, e.g. ``"<node id>/generate"`` (:func:`node_scope`).
    With the run's ``ledger_path``, an exception leaving the block carries the scope's usage
    so far as ``usage`` (:func:`scope_usage`), for the dead node or failed attempt it makes."""
    token = _SCOPE.set(scope)
    try:
        yield
    except Exception as exc:
        if ledger_path is not None:
            try:
                exc.usage = scope_usage(ledger_path, scope)  # type: ignore[attr-defined]
            except AttributeError:  # an exception class that takes no attributes
                pass
        raise
    finally:
        _SCOPE.reset(token)


def scope_usage(ledger_path: str | Path | None, scope: str, reported: LLMUsage | None = None) -> LLMUsage:
    """Every call the run's ledger recorded under ``scope`` (:meth:`CallLedger.usage_of`:
    failed ones and earlier Prefect task attempts included); without a ledger, ``reported``
    (what the calls returned; zero when None)."""
    if ledger_path is None:
        return reported or LLMUsage()
    return ledger_for(ledger_path).usage_of(scope)


def current_scope() -> str | None:
    """The innermost :func:`call_scope` around the caller, or None."""
    return _SCOPE.get()


def node_scope(node_id: str, part: str) -> str:
    """The scope of one part of a node's calls: ``"<node id>/<part>"`` (part e.g. ``generate``,
    ``debug1``, ``review0``). Unique per node and part, so Prefect retries of that part add up."""
    return f"{node_id}/{part}"


def _is_offline(model: str) -> bool:
    return model == "offline" or model.startswith("offline/")


def _entry_cost(entry: dict) -> float | None:
    """The call's cost in USD; the built-in offline model is free (ledgers written before it
    recorded 0 have null there)."""
    cost = entry.get("cost_usd")
    if cost is None and _is_offline(str(entry.get("model") or "")):
        return 0.0
    return None if cost is None else float(cost)


class LLMTotals(BaseModel):
    """Sums over calls: ``calls`` (all, failed included), ``failed_calls``, ``unpriced_calls``
    (successful calls without a price), tokens, ``known_cost_usd`` (USD of the priced calls),
    ``cost_usd`` (USD of all calls; None while any call is unpriced) and ``seconds`` of waiting
    for the model."""

    calls: int = 0
    failed_calls: int = 0
    unpriced_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    known_cost_usd: float = 0.0
    seconds: float = 0.0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_usd(self) -> float | None:
        """USD of every call, or None when ``unpriced_calls`` > 0 (the cost is unknown)."""
        return None if self.unpriced_calls else self.known_cost_usd

    def add(self, entry: dict) -> None:
        """Fold one ledger line into the sums."""
        ok = bool(entry.get("ok"))
        cost = _entry_cost(entry)
        self.calls += 1
        self.failed_calls += 0 if ok else 1
        self.prompt_tokens += int(entry.get("prompt_tokens") or 0)
        self.completion_tokens += int(entry.get("completion_tokens") or 0)
        if cost is not None:
            self.known_cost_usd += cost
        elif ok:
            self.unpriced_calls += 1
        self.seconds += float(entry.get("seconds") or 0.0)

    def usage(self) -> LLMUsage:
        """The same sums as a node's :class:`~swarm_evo.population.node.LLMUsage`: ``calls`` counts failed
        ones too; ``cost`` is None when an answered call was unpriced (unknown, never counted as
        free) or no call was made, 0.0 when every call failed (a failed call has nothing to price)."""
        return LLMUsage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cost=self.cost_usd if self.calls else None,
            calls=self.calls,
            seconds=self.seconds,
        )


class LedgerSummary(BaseModel):
    """The ``llm`` section of ``run_report.json``: totals, then the same per operation
    (draft, merge, mutate, debug, fix, review, evolve_agent, probe, ...) and per role."""

    totals: LLMTotals = Field(default_factory=LLMTotals)
    by_operation: dict[str, LLMTotals] = Field(default_factory=dict)
    by_role: dict[str, LLMTotals] = Field(default_factory=dict)

    def report(self) -> dict:
        """``{calls, failed_calls, unpriced_calls, prompt_tokens, completion_tokens,
        known_cost_usd, seconds, cost_usd, by_operation: {op: {...}}, by_role: {role: {...}}}``
        (costs rounded to 1e-6 USD; ``cost_usd`` null while ``unpriced_calls`` > 0)."""
        def flat(t: LLMTotals) -> dict:
            data = t.model_dump()
            data["known_cost_usd"] = round(t.known_cost_usd, 6)
            data["cost_usd"] = None if t.cost_usd is None else round(t.cost_usd, 6)
            data["seconds"] = round(t.seconds, 3)
            return data

        return {
            **flat(self.totals),
            "by_operation": {k: flat(v) for k, v in sorted(self.by_operation.items())},
            "by_role": {k: flat(v) for k, v in sorted(self.by_role.items())},
        }


class CallLedger:
    """Append-only JSONL ledger of one run's model calls, with running totals in memory.

    Thread-safe; one instance per file per process (:func:`ledger_for`), so parallel steps of
    a run share the totals that the ``max_cost_usd`` check reads.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._summary = LedgerSummary()
        self._by_scope: dict[str, LLMTotals] = {}
        for entry in self._read():
            self._fold(entry)

    def _read(self) -> list[dict]:
        if not self.path.exists():
            return []
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:  # the half-written last line of a killed process
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries

    def _fold(self, entry: dict) -> None:
        self._summary.totals.add(entry)
        op = str(entry.get("operation") or "other")
        self._summary.by_operation.setdefault(op, LLMTotals()).add(entry)
        role = str(entry.get("role") or "code")
        self._summary.by_role.setdefault(role, LLMTotals()).add(entry)
        if entry.get("scope"):
            self._by_scope.setdefault(str(entry["scope"]), LLMTotals()).add(entry)

    def record(
        self,
        *,
        role: str,
        operation: str | None,
        model: str,
        ok: bool,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = None,
        seconds: float = 0.0,
        error: str | None = None,
        scope: str | None = None,
    ) -> None:
        """Append one call (a failed one with ``ok`` False and the error's first line);
        ``cost_usd`` None means the call had no price; ``scope`` as :func:`call_scope`."""
        entry = {
            "at": round(time.time(), 3),
            "role": role,
            "operation": operation or "other",
            "model": model,
            "ok": ok,
            "error": None if error is None else (error.splitlines() or [""])[0][:300],
            "prompt_tokens": int(prompt_tokens),
            "completion_tokens": int(completion_tokens),
            "cost_usd": cost_usd,
            "seconds": round(seconds, 3),
            "scope": scope,
        }
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry) + "\n")
            self._fold(entry)

    def totals(self) -> LLMTotals:
        """A copy of the running totals."""
        with self._lock:
            return self._summary.totals.model_copy()

    def summary(self) -> LedgerSummary:
        """A copy of totals, per operation and per role."""
        with self._lock:
            return self._summary.model_copy(deep=True)

    def usage_of(self, scope: str) -> LLMUsage:
        """Every call recorded under ``scope`` (:func:`call_scope`), failed ones and those of
        earlier Prefect task attempts included, as a node's :class:`~swarm_evo.population.node.LLMUsage`
        (zero when none)."""
        with self._lock:
            totals = self._by_scope.get(scope)
            return totals.usage() if totals is not None else LLMUsage()


_LEDGERS: dict[str, CallLedger] = {}
_LEDGERS_LOCK = threading.Lock()


def ledger_for(path: str | Path) -> CallLedger:
    """The process's ledger of file ``path`` (created on first use; reads what the file holds)."""
    key = str(Path(path).resolve())
    with _LEDGERS_LOCK:
        if key not in _LEDGERS:
            _LEDGERS[key] = CallLedger(Path(key))
        return _LEDGERS[key]


def cost_text(totals: dict | LLMTotals, digits: int = 4) -> str:
    """A cost for people: ``$0.4200``, or, with unpriced calls, ``unknown (3 call(s) without a
    price; $0.0100 for the priced ones)`` (issue 31: never a number that leaves calls out).
    ``totals``: :class:`LLMTotals` or a row of :meth:`LedgerSummary.report`."""
    row = totals.model_dump() if isinstance(totals, LLMTotals) else totals
    if row.get("cost_usd") is not None:
        return f"${row['cost_usd']:.{digits}f}"
    unpriced = int(row.get("unpriced_calls") or 0)
    known = float(row.get("known_cost_usd") or 0.0)
    return f"unknown ({unpriced} call(s) without a price; ${known:.{digits}f} for the priced ones)"

