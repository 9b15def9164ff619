"""The run's record of every model call: ``RUN_DIR/llm_calls.jsonl`` (issue 13, cost).

Nodes carry the usage of the calls that made them, but some calls make no node (the
preflight probe, agent evolutions, the auxiliary-metrics writer) and a call that fails
(timeout, HTTP 500, refused key) returns no usage at all. The ledger sees every call, because
:func:`swarm_evo.llm.client.call_model` appends one line per call, success or failure:

    {"at": 1732420000.1, "role": "code", "operation": "draft", "model": "openai/x",
     "ok": true, "error": null, "prompt_tokens": 812, "completion_tokens": 410,
     "cost_usd": 0.0021, "seconds": 3.2}

``cost_usd`` is litellm's ``response_cost`` (custom pricing included) or null when the model has
no price. The file is append-only, so a resumed run continues its totals; a half-written last
line (a killed process) is skipped. The run report's ``llm`` section and the ``max_cost_usd``
stop read :meth:`CallLedger.totals`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

LEDGER_FILE = "llm_calls.jsonl"


class LLMTotals(BaseModel):
    """Sums over calls: ``calls`` (all, failed included), ``failed_calls``, tokens, ``cost_usd``
    (USD; None when no call had a price) and ``seconds`` of waiting for the model."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0

    def add(self, entry: dict) -> None:
        """Fold one ledger line into the sums."""
        self.calls += 1
        self.failed_calls += 0 if entry.get("ok") else 1
        self.prompt_tokens += int(entry.get("prompt_tokens") or 0)
        self.completion_tokens += int(entry.get("completion_tokens") or 0)
        if entry.get("cost_usd") is not None:
            self.cost_usd = (self.cost_usd or 0.0) + float(entry["cost_usd"])
        self.seconds += float(entry.get("seconds") or 0.0)


class LedgerSummary(BaseModel):
    """The ``llm`` section of ``run_report.json``: totals, then the same per operation
    (draft, merge, mutate, debug, fix, review, evolve_agent, probe, ...) and per role."""

    totals: LLMTotals = Field(default_factory=LLMTotals)
    by_operation: dict[str, LLMTotals] = Field(default_factory=dict)
    by_role: dict[str, LLMTotals] = Field(default_factory=dict)

    def report(self) -> dict:
        """``{calls, failed_calls, prompt_tokens, completion_tokens, cost_usd, seconds,
        by_operation: {op: {...}}, by_role: {role: {...}}}`` (cost rounded to 1e-6 USD)."""
        def flat(t: LLMTotals) -> dict:
            data = t.model_dump()
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
    ) -> None:
        """Append one call (a failed one with ``ok`` False and the error's first line)."""
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


_LEDGERS: dict[str, CallLedger] = {}
_LEDGERS_LOCK = threading.Lock()


def ledger_for(path: str | Path) -> CallLedger:
    """The process's ledger of file ``path`` (created on first use; reads what the file holds)."""
    key = str(Path(path).resolve())
    with _LEDGERS_LOCK:
        if key not in _LEDGERS:
            _LEDGERS[key] = CallLedger(Path(key))
        return _LEDGERS[key]
