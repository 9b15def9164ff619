"""Prompts within the model's context (issue 13): bounded texts and the per-run prompt budget.

Every text that enters a prompt — program output, code, the competition description, the data
preview, plans and summaries, error lists — is bounded with :func:`bound_text` (head + tail
around one marker line that says what was cut; the tail gets the larger share because errors
and final scores are at the end). The sizes come from :class:`PromptLimits`, derived once per
run from the model's context window (:func:`context_window_tokens`: ``model.context_window``
when configured, else litellm's ``max_input_tokens`` for the model, else
:data:`DEFAULT_CONTEXT_WINDOW`).

Issue 31: every variable part of every prompt has a field of :class:`PromptLimits` (agent
texts, the draft history, the evolution log, the examples, the target columns and the agent
evolution's texts too); lists are cut by whole lines (:func:`fit_lines`, :func:`bound_items`,
:func:`bound_join`) keeping the best or newest entries and saying how many were cut. The
prompt renderer (:func:`swarm_evo.prompting.prompts.render`) measures each template's fixed text and
shrinks the parts it uses by one factor when they would not fit beside it.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_WINDOW = 32_768
"""Tokens assumed when the model's context window is neither configured nor known to litellm."""

CHARS_PER_TOKEN = 3.5
"""Characters per token for code, logs and English prose (a conservative average: real
tokenizers give 3.5–4.5 for English and Python, fewer for logs full of numbers)."""

REPLY_SHARE = 0.25
"""Share of the context window kept for the reply when ``model.max_tokens`` is not set."""

TERM_OUT_CAP = 24_000
"""Characters of program output a debug or review prompt shows at most, whatever the window:
beyond that, long logs are noise."""

HEAD_SHARE = 0.25
"""Share of a cut text's kept characters taken from its head (the rest is its tail)."""


def _marker(cut: int, head: int, tail: int, what: str) -> str:
    return (
        f"[... {cut:,} characters of {what} cut: showing the first {head:,} and the last {tail:,} ...]"
    )


def bound_text(text: str | None, max_chars: int, *, what: str = "output", head_share: float = HEAD_SHARE) -> str:
    """``text`` cut to at most ``max_chars`` characters: its head, one marker line, its tail.

    The marker line reads e.g. ``[... 1,234,567 characters of output cut: showing the first
    2,000 and the last 6,000 ...]``. The head gets ``head_share`` of the kept characters and
    the tail the rest (errors and final metrics are at the end of a log); both are snapped to
    line boundaries when one is near (within half of their share), so lines are not split.
    A text that fits is returned unchanged; ``None`` gives ``""``. When ``max_chars`` is too
    small for the marker (under ~120) the last ``max_chars`` characters are returned.

    Args:
        text: any text (program output, code, a description, ...).
        max_chars: the bound in characters (≥ 0); the result's ``len`` never exceeds it.
        what: what the text is, for the marker ("output", "code", "description", ...).
        head_share: the head's share of the kept characters, in [0, 1].

    Raises:
        ValueError: ``max_chars`` is negative or ``head_share`` is outside [0, 1].
    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    if not 0.0 <= head_share <= 1.0:
        raise ValueError(f"head_share must be in [0, 1], got {head_share}")
    text = text or ""
    if len(text) <= max_chars:
        return text
    n = len(text)
    # The marker's longest form: the real numbers are never larger than these.
    room = max_chars - len(_marker(n, n, n, what)) - 2
    if room < 40:
        return text[n - max_chars:] if max_chars else ""
    head_n = int(room * head_share)
    tail_n = room - head_n
    head = text[:head_n]
    newline = head.rfind("\n")
    if newline >= head_n // 2:
        head = head[: newline + 1]
    tail = text[n - tail_n:] if tail_n else ""
    newline = tail.find("\n")
    if 0 <= newline < tail_n // 2:
        tail = tail[newline + 1:]
    cut = n - len(head) - len(tail)
    head_text = head.rstrip("\n")
    parts = [head_text] if head_text else []
    parts.append(_marker(cut, len(head), len(tail), what))
    if tail:
        parts.append(tail)
    return "\n".join(parts)


ITEM_OVERHEAD = 3
"""Characters a template adds around each listed item: ``"- "`` before it, a line break after."""


def bound_items(
    items: Iterable[Any] | None, max_item_chars: int, max_total_chars: int, *, what: str = "problems"
) -> list[str]:
    """A list of texts (errors, problems, reasons) bounded item by item and in total.

    Each item becomes ``str(item)`` bounded by :func:`bound_text` to ``max_item_chars``
    (``what`` = "text"); items are kept in order while their total length, each counted with
    :data:`ITEM_OVERHEAD` (the bullet and line break a template puts around it), stays within
    ``max_total_chars``; when some are left out, a last item ``[... N more <what> cut ...]``
    says how many, within the same total. The first item is kept (bounded to what the total
    leaves) unless even the marker does not fit.

    Returns:
        The bounded items (``[]`` for None, an empty iterable or ``max_total_chars`` ≤ 0).
    """
    texts = [str(i) for i in (items or [])]
    if max_total_chars <= 0 or not texts:
        return []

    def marker(n: int) -> str:
        return f"[... {n} more {what} cut ...]"

    out: list[str] = []
    total = 0
    for item in texts:
        limit = min(max_item_chars, max_total_chars - ITEM_OVERHEAD) if not out else max_item_chars
        text = bound_text(item, max(0, limit), what="text")
        if out and total + len(text) + ITEM_OVERHEAD > max_total_chars:
            break
        out.append(text)
        total += len(text) + ITEM_OVERHEAD
    if len(out) == len(texts):
        return out
    while out and total + len(marker(len(texts) - len(out))) + ITEM_OVERHEAD > max_total_chars:
        total -= len(out.pop()) + ITEM_OVERHEAD
    if not out:  # the marker alone, or the first item cut to what the marker leaves
        room = max_total_chars - 2 * ITEM_OVERHEAD - len(marker(len(texts) - 1))
        if room >= 40:
            return [bound_text(texts[0], min(max_item_chars, room), what="text"), marker(len(texts) - 1)]
        return [marker(len(texts))] if len(marker(len(texts))) + ITEM_OVERHEAD <= max_total_chars else []
    return out + [marker(len(texts) - len(out))]


def fit_lines(text: str | None, max_chars: int | None, what: str = "lines", keep: str = "head") -> str:
    """A block of one-item lines (a list a template rendered) cut to ``max_chars`` by whole lines.

    ``keep="head"`` keeps the first lines (lists ordered best or most important first) and ends
    with ``[... N more <what> cut ...]``; ``keep="tail"`` keeps the last lines (lists ordered
    oldest first, so the newest stay) and starts with ``[... N earlier <what> cut ...]``. A
    trailing line break is kept. When not even one line fits, the block is cut by
    :func:`bound_text`. A text that fits, or ``max_chars`` None (no bound), is returned unchanged.

    Returns:
        The text, ``len`` ≤ ``max_chars`` (``""`` for ``max_chars`` ≤ 0).

    Raises:
        ValueError: ``keep`` is not "head" or "tail".
    """
    if keep not in ("head", "tail"):
        raise ValueError(f"keep must be 'head' or 'tail', got {keep!r}")
    text = text or ""
    if max_chars is None or len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    lines = [line.rstrip("\n") + "\n" for line in text.splitlines()]
    ending = "\n" if text.endswith("\n") else ""
    room = max_chars - len(f"[... {len(lines)} more {what} cut ...]") - 10  # the marker's longest form
    kept: list[str] = []
    for line in (lines if keep == "head" else reversed(lines)):
        if len(line) > room:
            break
        kept.append(line)
        room -= len(line)
    if not kept:
        return bound_text(text, max_chars, what=what)
    cut = len(lines) - len(kept)
    if keep == "head":
        return "".join(kept) + f"[... {cut} more {what} cut ...]" + ending
    return f"[... {cut} earlier {what} cut ...]\n" + "".join(reversed(kept))[: None if ending else -1]


def bound_join(items: Iterable[Any] | None, max_chars: int, what: str = "items") -> str:
    """Items as ```a`, `b`, `c``` (each in backticks, comma-separated), within ``max_chars``.

    Items are kept in order while they fit; the rest are named by a closing ``... and N more
    <what>`` within the bound. ``""`` for no items or ``max_chars`` ≤ 0.
    """
    names = [f"`{item}`" for item in (items or [])]
    text = ", ".join(names)
    if len(text) <= max_chars:
        return text
    room = max_chars - len(f", ... and {len(names)} more {what}")
    kept: list[str] = []
    for name in names:
        if len(", ".join(kept + [name])) > room:
            break
        kept.append(name)
    tail = f"... and {len(names) - len(kept)} more {what}"
    text = ", ".join(kept + [tail])
    return text if len(text) <= max_chars else ""


class PromptLimits(BaseModel):
    """Character bounds for the parts of a prompt, derived from a context window.

    All sizes are characters, except ``context_window`` and ``reply_tokens`` (tokens). Build it
    with :meth:`for_context_window`; templates use it as ``limits`` (``|bound(limits.code,
    "code")``). Every variable part of every template is bounded by one of the fields in
    :data:`PROMPT_PARTS` (``item`` and ``summary`` bound single entries inside such a part);
    :func:`swarm_evo.prompting.prompts.render` measures a template's fixed text and, when the fixed text
    plus the parts the template uses exceed ``prompt_chars``, shrinks those parts by one factor
    (:meth:`scaled`), so every prompt fits ``prompt_chars`` (issue 31).
    """

    model_config = ConfigDict(frozen=True)

    context_window: int
    reply_tokens: int
    prompt_chars: int
    code: int
    genes: int
    term_out: int
    parent_output: int
    description: int
    data_preview: int
    items: int
    item: int
    summary: int
    packages: int
    agent_text: int
    history: int
    evolution_log: int
    experience: int
    targets: int
    evolve_texts: int

    @classmethod
    def for_context_window(cls, tokens: int, reply_tokens: int | None = None) -> "PromptLimits":
        """The limits for a ``tokens``-token context window.

        The reply keeps ``reply_tokens`` (``model.max_tokens``; at most half the window) or,
        when None, :data:`REPLY_SHARE` of the window. The rest, × :data:`CHARS_PER_TOKEN`, is
        ``prompt_chars``, shared out as: code 25 % (one program: a parent, the scaffold, the
        program being debugged), genes 20 % (all of a merge's planned sections together), term_out
        15 % but at most :data:`TERM_OUT_CAP` (debug and review output), parent_output 3 %
        (≤ 3,000: a merge's or mutate's parent output), description 8 % (≤ 12,000),
        data_preview 8 % (≤ 8,000, SPEC §6), items 5 % (≤ 8,000: an error list, a list of
        metrics, a review, an output's keys) with item ≤ 2,000 each, packages 3 % (≤ 4,000);
        summary (one plan line) is 300. Issue 31 adds: agent_text 5 % (≤ 4,000: a role or a
        strategy text), history 25 % (≤ 14,000: the draft history), evolution_log 10 %
        (≤ 14,000), experience 3 % (≤ 8,000: the examples, or an agent's best or worst plans),
        targets 1 % (≤ 4,000: the target-column list), evolve_texts 60 % (≤ 48,000: the eight
        texts of an agent-evolution prompt). The caps are the sizes the templates showed before
        issue 31, so a 128K-token window shows what it showed. The older parts keep floors so
        tiny windows still show something; :meth:`scaled` makes any window's prompts fit.

        Raises:
            ValueError: ``tokens`` < 1 or ``reply_tokens`` < 0.
        """
        if tokens < 1:
            raise ValueError(f"a context window has at least 1 token, got {tokens}")
        if reply_tokens is not None and reply_tokens < 0:
            raise ValueError(f"reply_tokens must be >= 0, got {reply_tokens}")
        reply = min(reply_tokens, tokens // 2) if reply_tokens is not None else int(tokens * REPLY_SHARE)
        prompt = int((tokens - reply) * CHARS_PER_TOKEN)

        def share(fraction: float, floor: int = 0, cap: int | None = None) -> int:
            value = int(prompt * fraction)
            if cap is not None:
                value = min(value, cap)
            return max(floor, value)

        items = share(0.05, 1_000, 8_000)
        return cls(
            context_window=tokens,
            reply_tokens=reply,
            prompt_chars=prompt,
            code=share(0.25, 4_000),
            genes=share(0.20, 3_000),
            term_out=share(0.15, 2_000, TERM_OUT_CAP),
            parent_output=share(0.03, 800, 3_000),
            description=share(0.08, 1_500, 12_000),
            data_preview=share(0.08, 1_500, 8_000),
            items=items,
            item=min(2_000, items),
            summary=300,
            packages=share(0.03, 500, 4_000),
            agent_text=share(0.05, cap=4_000),
            history=share(0.25, cap=14_000),
            evolution_log=share(0.10, cap=14_000),
            experience=share(0.03, cap=8_000),
            targets=share(0.01, cap=4_000),
            evolve_texts=share(0.60, cap=48_000),
        )

    def scaled(self, factor: float) -> "PromptLimits":
        """These limits with every part of :data:`PROMPT_PARTS` multiplied by ``factor`` (0–1,
        rounded down); ``item`` is kept within the new ``items``, the rest is unchanged.

        Raises:
            ValueError: ``factor`` is outside [0, 1].
        """
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"factor must be in [0, 1], got {factor}")
        parts = {name: int(getattr(self, name) * factor) for name in PROMPT_PARTS}
        return self.model_copy(update={**parts, "item": min(self.item, parts["items"])})


PROMPT_PARTS: tuple[str, ...] = (
    "code", "genes", "term_out", "parent_output", "description", "data_preview", "items", "packages",
    "agent_text", "history", "evolution_log", "experience", "targets", "evolve_texts",
)
"""The fields of :class:`PromptLimits` that bound a whole variable part of a prompt; a template
reads each such field once per part it shows (``item`` and ``summary`` bound entries inside one)."""


def context_window_tokens(model: str, configured: int | None = None) -> int:
    """The context window (tokens) prompts for ``model`` must fit.

    ``configured`` (``model.context_window``) when given; else litellm's ``max_input_tokens``
    (or ``max_tokens``) for the model when litellm knows it (``litellm.get_model_info`` raises
    for unknown models, e.g. ``offline`` or a local server's name); else
    :data:`DEFAULT_CONTEXT_WINDOW`.
    """
    return _window(model, configured)[0]


def _window(model: str, configured: int | None) -> tuple[int, str]:
    """``(tokens, where the number comes from)`` for :func:`context_window_tokens`."""
    if configured:
        return int(configured), "model.context_window"
    if model and model != "offline" and not model.startswith("offline/"):
        try:
            import litellm

            # as swarm_evo.llm.import_litellm does (this layer is below llm): litellm prints a
            # "Provider List" banner for a model it does not know unless told not to
            litellm.suppress_debug_info = True
            info = litellm.get_model_info(model)
            tokens = info.get("max_input_tokens") or info.get("max_tokens")
            if tokens:
                return int(tokens), "litellm"
        except Exception:  # litellm raises for models it does not know
            pass
    return DEFAULT_CONTEXT_WINDOW, "the default (litellm does not know the model; set model.context_window)"


@lru_cache(maxsize=16)
def _limits(model: str, configured: int | None, reply_tokens: int | None) -> PromptLimits:
    tokens, source = _window(model, configured)
    limits = PromptLimits.for_context_window(tokens, reply_tokens)
    log.info("prompts for %s are bounded to %s characters (context window %s tokens from %s)",
             model, f"{limits.prompt_chars:,}", f"{tokens:,}", source)
    return limits


def prompt_limits(model_config: Any, name: str | None = None) -> PromptLimits:
    """The run's :class:`PromptLimits` from its ``model`` config section (``name``,
    ``context_window``, ``max_tokens``; missing attributes count as None). ``name`` overrides
    the model's name, for a role with its own model (``model.review_name``); a configured
    ``context_window`` applies to every role. Computed once per (model, window, max_tokens)
    and cached."""
    return _limits(
        str(name or getattr(model_config, "name", "") or ""),
        getattr(model_config, "context_window", None),
        getattr(model_config, "max_tokens", None),
    )
