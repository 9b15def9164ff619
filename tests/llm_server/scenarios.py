"""Scenario schedules of the stand-in model server: how each reply is shaped (issue 13, item 8).

A :class:`Scenario` is one pydantic model holding every knob: the "voice" of code replies
(reasoning blocks, ```py fences, a snippet before the program, no section markers, prose after
the code, cut-off replies), of debug replies (a quoted faulty line before the fix), of reviews
(tool calls, ```json-wrapped tool arguments, string metrics, JSON in the reply text, fenced or
bare), whether the server supports tools (``supported``; ``ignored``: it drops ``tools`` and
answers in text; ``rejected``: it answers 400 "tools not supported"), the reviewer's honesty,
transport failures (HTTP 500 for some requests, hangs, a required API key: 401 otherwise) and
faults planted in drafts (a program that prints 2 MB before crashing, a NameError).

Everything is deterministic: shapes rotate by the index of the reply of their kind (the n-th
code reply gets ``code_shapes[n % len]``), failures are keyed by the request index (0 is the
first request the server sees in the scenario, normally the run's preflight probe), faults by
the draft index. Re-asks (a prompt that ends with the client's "Your previous reply ..."
reminder) always get a tidy shape, as a model that was told what it did wrong would.

Scenarios compose with :meth:`Scenario.with_` (``TIDY.with_(tools="rejected")``); the named
presets are in :data:`SCENARIOS`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CodeShape = Literal[
    "tidy",           # short plan, one ```python block, nothing after
    "think",          # <think>...</think> (with a stray code block inside) before the answer
    "reasoning",      # reasoning in the reasoning_content field (vLLM / Ollama "thinking")
    "py_fence",       # ```py instead of ```python
    "bare_fence",     # ``` with no language tag
    "snippet_first",  # a short python snippet block before the full program
    "no_markers",     # the program without its `# [SECTION: X]` lines (still correct)
    "prose_after",    # a paragraph of prose after the code block
    "cut_off",        # finish_reason "length": the program is truncated, the fence unclosed
]
DebugShape = Literal[
    "tidy",
    "quoted_line",    # the faulty line quoted in its own ```python block, then the fixed program
    "think",
]
ReviewShape = Literal[
    "tool_call",        # a proper tool call, JSON-string arguments
    "tool_json_fenced", # a tool call whose arguments are wrapped in ```json ... ```
    "string_metric",    # a tool call with "metric": "0.79" (a string)
    "json_fenced",      # no tool call: a ```json block in the text
    "json_bare",        # no tool call: prose, then a bare JSON object
    "think_json",       # <think>...</think> then a fenced JSON object
]
Fault = Literal["chatty_crash", "name_error", "submission_fifo", "submission_dir", "disk_fill", "answer_hunt", "liar"]

CHATTY_BYTES = 2_000_000
"""How much a ``chatty_crash`` program prints before it raises (issue 13: "2 MB")."""


class Scenario(BaseModel):
    """How the stand-in server answers, request by request (see the module docstring).

    Fields are grouped as: voice (``code_shapes``, ``debug_shapes``, ``review_shapes``),
    capabilities (``tools``, ``context_window``), reviewer (``reviewer``), transport
    (``http_500_requests``, ``hang_from_request``, ``hang_seconds``, ``expected_key``,
    ``latency``), faults (``draft_faults``) and brain settings (``fast_programs``, ``seed``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "tidy"
    description: str = "tidy replies: plan + one ```python block; reviews as tool calls"
    seed: int = 0

    code_shapes: list[CodeShape] = Field(default_factory=lambda: ["tidy"])
    """Shapes of code replies (draft, mutate, merge, fix), in rotation by code-reply index."""
    debug_shapes: list[DebugShape] = Field(default_factory=lambda: ["tidy"])
    """Shapes of debug replies, in rotation by debug-reply index."""
    review_shapes: list[ReviewShape] = Field(default_factory=lambda: ["tool_call"])
    """Shapes of reviews, in rotation by review index. A tool-call shape becomes ``json_fenced``
    when the request carried no tools (or the server does not support them)."""

    tools: Literal["supported", "ignored", "rejected"] = "supported"
    """``supported``: tool calls when ``tools`` are sent; ``ignored``: the server drops
    ``tools`` and the model answers in text; ``rejected``: HTTP 400 "tools are not supported"."""
    context_window: int = 32_768
    """What ``/api/show`` reports as the model's context length (Ollama)."""

    reviewer: Literal["honest", "always_bug"] = "honest"
    """``honest``: the offline model's deterministic review; ``always_bug``: every review says
    is_bug with no metric (a strict reviewer)."""

    debug_fixes: Literal["repair", "crash_at_import"] = "repair"
    """``repair``: debug replies repair the program (planted faults removed, else the offline
    model's debug); ``crash_at_import``: every debug reply is the program it was given with a
    misspelt scikit-learn import at the top (ImportError before anything runs), a different
    name each time, as a model's hasty "fix" can be (issue 31)."""

    http_500_requests: list[int] = Field(default_factory=list)
    """Request indices answered with HTTP 500 (a server that fails for a while)."""
    model_gone_from_request: int | None = None
    """From this request index on, every request gets HTTP 404 "the model does not exist" (a
    server that unloaded the model; not a transient error, so no retry waits); choosing a
    scenario again (:meth:`StandInServer.use`) brings the model back."""
    hang_from_request: int | None = None
    """From this request index on, every request hangs for ``hang_seconds`` (None: never)."""
    hang_seconds: float = 3600.0
    expected_key: str | None = None
    """When set, requests without ``Authorization: Bearer <expected_key>`` get 401."""
    latency: float = 0.0
    """Seconds each answered request waits before replying (a slow model)."""

    draft_faults: dict[int, Fault] = Field(default_factory=dict)
    """Faults planted in the n-th draft (0-based draft index): ``chatty_crash`` prints
    :data:`CHATTY_BYTES` then raises RuntimeError; ``name_error`` uses an undefined name;
    ``submission_fifo`` / ``submission_dir`` leave a FIFO / a directory where the program wrote
    ``submission/submission.csv`` when it exits (issue 18: a hostile program the host must read
    safely); ``disk_fill`` writes 10 GB into ``working/``; ``answer_hunt`` (issue 32) looks for the
    competition's answers (``/proc/self/mountinfo``, ``..`` of ``input``, ``/proc/*/root``, usual
    roots) and for the host's listening ports, prints ``HUNT: answers=...; ports=...`` and, when it
    found the answers, hands them in as its submission at exit (the program runs fine otherwise); ``liar`` (issue 41)
    hands in the sample submission (a constant) at exit and prints ``Validation metric: 0.99`` as
    its last line (the program runs fine otherwise). The debug brain always repairs them (the planted lines carry a ``# stand-in:``
    comment)."""

    fast_programs: bool = True
    """Prefer quick model families and 3-fold CV, so test runs stay short."""
    program_seconds: tuple[float, float, float, float] | None = None
    """``(median, sigma, low, high)``: every program the brain writes first sleeps a lognormal
    number of seconds (``median · exp(sigma · N(0, 1))`` clipped to ``[low, high]``, drawn from the
    scenario's seed and the program's index): the heavy-tailed run times of a real model's
    programs, for the scheduler's tests and benchmarks (issue 52). None: no sleep."""

    def with_(self, **changes) -> "Scenario":
        """A copy with ``changes`` applied (scenarios compose: ``TIDY.with_(tools="rejected")``)."""
        return self.model_copy(update=changes)


TIDY = Scenario()

EVERYTHING = Scenario(
    name="everything",
    description="every reply imperfection of issue 13 in one schedule",
    code_shapes=["think", "snippet_first", "py_fence", "cut_off", "no_markers", "prose_after",
                 "reasoning", "bare_fence"],
    debug_shapes=["quoted_line", "think"],
    review_shapes=["tool_json_fenced", "string_metric", "json_fenced", "json_bare", "think_json",
                   "tool_call"],
    http_500_requests=[3],
    draft_faults={0: "chatty_crash", 2: "name_error"},
)

NO_TOOLS = Scenario(
    name="no_tools",
    description="a server that does not support tools: 400 'tools are not supported'",
    tools="rejected",
    review_shapes=["json_fenced", "json_bare", "think_json"],
)

IGNORES_TOOLS = NO_TOOLS.with_(
    name="ignores_tools",
    description="a server that silently drops `tools` and answers reviews as JSON text",
    tools="ignored",
)

HANGS = Scenario(
    name="hangs",
    description="the server answers the probe and three calls, then hangs on every request",
    hang_from_request=4,
)

STRICT_REVIEWER = Scenario(
    name="strict_reviewer",
    description="the reviewer always says is_bug with no metric",
    reviewer="always_bug",
)

BROKEN_FIXES = STRICT_REVIEWER.with_(
    name="broken_fixes",
    description="the reviewer always says is_bug; every debug reply crashes at import time",
    debug_fixes="crash_at_import",
)

CHATTY = Scenario(
    name="chatty",
    description="the first draft prints 2 MB before crashing; the debug repairs it",
    draft_faults={0: "chatty_crash"},
    debug_shapes=["quoted_line"],
)

HOSTILE_SUBMISSION = Scenario(
    name="hostile_submission",
    description="the first draft leaves a FIFO as its submission.csv, the second a directory, the third "
    "writes 10 GB",
    draft_faults={0: "submission_fifo", 1: "submission_dir", 2: "disk_fill"},
)

ANSWER_HUNT = Scenario(
    name="answer_hunt",
    description="every draft hunts for the answers and the host's services, and hands the answers in if found",
    draft_faults={i: "answer_hunt" for i in range(64)},
)

LIAR = Scenario(
    name="liar",
    description="the second and fourth drafts hand in a constant and print 'Validation metric: 0.99' (issue 41)",
    draft_faults={1: "liar", 3: "liar"},
)

BAD_KEY = Scenario(
    name="bad_key",
    description="the server wants another API key: 401 on every request",
    expected_key="the-right-key",
)

SERVER_ERRORS = Scenario(
    name="server_errors",
    description="HTTP 500 for a while (requests 1-2), then tidy",
    http_500_requests=[1, 2],
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    TIDY, EVERYTHING, NO_TOOLS, IGNORES_TOOLS, HANGS, STRICT_REVIEWER, ANSWER_HUNT, BROKEN_FIXES, CHATTY, HOSTILE_SUBMISSION, BAD_KEY,
    SERVER_ERRORS, LIAR,
)}
"""The named presets, selectable per test (``llm_server.use("everything")``)."""
