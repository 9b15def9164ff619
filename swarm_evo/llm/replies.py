"""Reading model replies: the program in a code reply (issue 13); the JSON object of a review
is read by :mod:`swarm_evo.llm.json_reply`.

Pure functions, no litellm calls (the calls are in :mod:`swarm_evo.llm.client`). Real models
do not answer as tidily as the offline model: replies carry reasoning (``<think>...</think>``,
also an unclosed ``<think>`` or a lone ``</think>`` when the chat template opened the block),
several fenced blocks (```` ```python ````, ```` ```py ````, ```` ```python3 ````, bare
```` ``` ````, rarely ``~~~``), a snippet or a quoted faulty line before the full program, prose
after it, and replies cut off at the output limit. The rules here read them the way a careful
reader would (:func:`choose_program`, :func:`cut_off_reason`, :func:`read_code_reply`). ``reasoning_content`` on a message is never read: callers pass
only ``message.content``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from pydantic import BaseModel

from swarm_evo.population.genes import split_program


PLAN_MAX_CHARS = 4000
"""The plan (text before the program) is cut to this many characters (head kept)."""

CODE_LANGS = frozenset({"", "python", "py", "python3", "py3", "ipython", "python2"})
"""Fence languages that may hold the program (bare fences included)."""

LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens"})
"""``finish_reason`` values that mean the reply hit the output limit (litellm maps
Anthropic's ``max_tokens`` to ``length``; both are accepted)."""

_REASONING_TAGS = ("think", "thinking", "reasoning")
_CLOSED_REASONING = re.compile(
    r"<(?P<tag>" + "|".join(_REASONING_TAGS) + r")>.*?</(?P=tag)>[ \t]*\n?", re.S | re.I
)
_OPEN_REASONING = re.compile(r"<(?:" + "|".join(_REASONING_TAGS) + r")>", re.I)
_CLOSE_REASONING = re.compile(r"</(?:" + "|".join(_REASONING_TAGS) + r")>[ \t]*\n?", re.I)
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*\r?\n?$")


def strip_reasoning(text: str) -> str:
    """``text`` without reasoning blocks.

    Removes every ``<think>…</think>`` (also ``<thinking>``, ``<reasoning>``; case-insensitive)
    block; then a ``</think>`` with no opening tag (the chat template opened the block in the
    prompt, as DeepSeek-R1 distills and Qwen3 do) drops everything before it; then an unclosed
    ``<think>`` drops everything from it to the end (the reasoning never ended: the reply was
    cut off inside it). Returns the remaining text (possibly empty).
    """
    text = _CLOSED_REASONING.sub("", text or "")
    closes = list(_CLOSE_REASONING.finditer(text))
    if closes:
        text = text[closes[-1].end():]
    opened = _OPEN_REASONING.search(text)
    if opened:
        text = text[: opened.start()]
    return text


@dataclass(frozen=True)
class Block:
    """One fenced block of a reply: ``lang`` (the info string's first word, lowercase, ""
    for a bare fence), ``start``/``end`` offsets of the whole block in the text, ``body``
    (without the fences; the fence's indentation removed from each line), ``closed`` (False
    when the text ended before the closing fence)."""

    lang: str
    start: int
    end: int
    body: str
    closed: bool

    @property
    def is_code(self) -> bool:
        """True when the block may hold the program (python or bare fence)."""
        return self.lang in CODE_LANGS


def _lang(info: str) -> str:
    word = info.strip().split()[0] if info.strip() else ""
    return re.split(r"[:{,;]", word.strip("{}."), maxsplit=1)[0].lower()


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of ``text``, in order (CommonMark rules, line by line).

    An opening fence is 3+ backticks or tildes followed by an optional info string (a
    backtick fence's info has no backtick, so ```` ```inline``` ```` is not a fence); the
    block closes at a line of the same character, at least as long, with nothing after it.
    A fence line with a language inside an open block is body text. A block still open at
    the end of the text is returned with ``closed=False`` (a cut-off reply).
    """
    blocks: list[Block] = []
    offset = 0
    current: dict[str, Any] | None = None
    for line in (text or "").splitlines(keepends=True):
        m = _FENCE_OPEN.match(line)
        if current is None:
            if m and not (m.group("fence")[0] == "`" and "`" in m.group("info")):
                current = dict(fence=m.group("fence"), indent=len(m.group("indent").expandtabs()),
                               lang=_lang(m.group("info")), start=offset, body=[])
        elif (m and not m.group("info") and m.group("fence")[0] == current["fence"][0]
              and len(m.group("fence")) >= len(current["fence"])):
            blocks.append(Block(current["lang"], current["start"], offset + len(line),
                                "".join(current["body"]), True))
            current = None
        else:
            current["body"].append(_dedent(line, current["indent"]))
        offset += len(line)
    if current is not None:
        blocks.append(Block(current["lang"], current["start"], offset, "".join(current["body"]), False))
    return blocks


def _dedent(line: str, indent: int) -> str:
    if not indent:
        return line
    strip = len(line) - len(line.lstrip(" \t"))
    return line[min(strip, indent):]


def count_markers(code: str, loci: Sequence[str] | None = None) -> int:
    """How many distinct section markers (``# [SECTION: NAME]`` lines, swarm_evo.population.genes) the
    code holds: of ``loci`` when given, else of any name."""
    names = set(split_program(code)[1])
    return len(names & set(loci)) if loci is not None else len(names)


def compiles(code: str) -> bool:
    """True when ``compile(code, "<reply>", "exec")`` succeeds."""
    try:
        compile(code, "<reply>", "exec")
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return False
    return True


Rule = Literal["markers", "compiles", "longest", "unfenced"]


class ProgramChoice(BaseModel):
    """The program chosen from a reply (:func:`choose_program`).

    Fields: ``plan`` (the text before the program, reasoning removed, at most
    :data:`PLAN_MAX_CHARS`), ``code`` (ends with one newline), ``rule`` (why this block:
    ``markers`` it holds the most section markers, ``compiles`` the longest block that
    compiles, ``longest`` the longest block, ``unfenced`` the whole reply is the program),
    ``markers`` (distinct markers in it), ``compiles``, ``closed`` (its fence was closed),
    ``candidates`` (usable python/bare blocks in the reply), ``complete`` (a whole program:
    it compiles and holds every marker of ``loci``; without loci: it compiles and no code
    block cut off before its closing fence follows it), ``followed_by_cut`` (such a cut block
    follows it: the reply was still writing a program when it ended).
    """

    plan: str
    code: str
    rule: Rule
    markers: int = 0
    compiles: bool = False
    closed: bool = True
    candidates: int = 1
    complete: bool = False
    followed_by_cut: bool = False


def _bounded_plan(text: str, limit: int = PLAN_MAX_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n[... plan cut: {len(text) - limit} more characters]"


def _all_markers(markers: int, loci: Sequence[str] | None) -> bool:
    return markers >= len(set(loci)) if loci else markers > 0


def choose_program(
    text: str, loci: Sequence[str] | None = None, finish_reason: str | None = None
) -> ProgramChoice | None:
    """The program in a code reply, chosen as a careful reader would (issue 13, item 1).

    Reasoning is removed first (:func:`strip_reasoning`); programs inside closed reasoning
    blocks are drafts and never chosen. When the reasoning block was never closed and the rest
    holds no program, the text of that block is read (so a program written by a server that
    never closes the block is not lost; the static check judges it). Candidates are the non-empty python or bare
    fenced blocks (:data:`CODE_LANGS`; ```` ```bash ````, ```` ```text ````… are ignored). A
    block whose fence never closed is a candidate only when it compiles and holds every marker
    of ``loci`` (without ``loci``: compiles and the reply did not stop at the output limit):
    then only the closing fence is missing.

    The rule, in order:
      1. the block holding the most section markers (``# [SECTION: NAME]`` of ``loci``, or of
         any name without ``loci``); ties go to a block that compiles, then to the later one
         (a fixed program after the original);
      2. with no markers anywhere: the longest block that compiles;
      3. else the longest block;
      4. with no candidate block at all: the whole reply (reasoning removed), when it compiles
         and holds every marker of ``loci`` (rule ``unfenced``).

    Returns None when no program is found. The plan is the text before the chosen block.
    """
    for source in reply_sources(text):
        choice = _choose(source, loci, finish_reason)
        if choice is not None:
            return choice
    return None


def reply_sources(text: str) -> list[str]:
    """The texts to read, in order: the reply without reasoning, then — only when a reasoning
    block was never closed — the reply from that block's start with only the tag removed (a
    server that never closes the block would otherwise hide the whole answer)."""
    stripped = strip_reasoning(text or "")
    rest = _CLOSED_REASONING.sub("", text or "")
    closes = list(_CLOSE_REASONING.finditer(rest))
    if closes:
        rest = rest[closes[-1].end():]
    opened = _OPEN_REASONING.search(rest)
    if opened is None:
        return [stripped]
    return [stripped, rest[: opened.start()] + rest[opened.end():]]


def _choose(text: str, loci: Sequence[str] | None, finish_reason: str | None) -> ProgramChoice | None:
    stopped_at_limit = finish_reason in LENGTH_FINISH_REASONS
    scored, lost_tail = [], False
    for index, block in enumerate(fenced_blocks(text)):
        if not block.is_code or not block.body.strip():
            continue
        markers, ok = count_markers(block.body, loci), compiles(block.body)
        if not block.closed:
            usable = ok and (_all_markers(markers, loci) if loci else not stopped_at_limit)
            if not usable:
                lost_tail = True  # the program the reply was writing when it was cut
                continue
        scored.append((block, index, markers, ok))
    if not scored:
        body = text.strip()
        if body and loci and compiles(body) and _all_markers(count_markers(body, loci), loci):
            return ProgramChoice(plan="", code=body + "\n", rule="unfenced", markers=count_markers(body, loci),
                                 compiles=True, closed=True, candidates=0, complete=True)
        return None
    if max(s[2] for s in scored) > 0:
        block, _, markers, ok = max(scored, key=lambda s: (s[2], s[3], s[1]))
        rule: Rule = "markers"
    elif any(s[3] for s in scored):
        block, _, markers, ok = max((s for s in scored if s[3]), key=lambda s: (len(s[0].body.strip()), s[1]))
        rule = "compiles"
    else:
        block, _, markers, ok = max(scored, key=lambda s: (len(s[0].body.strip()), s[1]))
        rule = "longest"
    # With loci, a block holding every marker is a whole program even if the reply went on
    # (and was cut) after it; without loci, a cut block after the choice may be the program.
    complete = ok and (_all_markers(markers, loci) if loci else not lost_tail)
    return ProgramChoice(
        plan=_bounded_plan(text[: block.start]),
        code=block.body.rstrip("\n") + "\n",
        rule=rule,
        markers=markers,
        compiles=ok,
        closed=block.closed,
        candidates=len(scored),
        complete=complete,
        followed_by_cut=lost_tail,
    )


def cut_off_reason(text: str, finish_reason: str | None = None) -> str | None:
    """Why a reply looks cut off, or None when it ended normally.

    Cut off (issue 13, item 1): ``finish_reason`` is ``length`` (the output limit was
    reached; :data:`LENGTH_FINISH_REASONS`), or the reply (reasoning removed) ends inside a
    fenced block that was never closed, or it ends inside an unclosed reasoning block with
    nothing after it.
    """
    if finish_reason in LENGTH_FINISH_REASONS:
        return "the output limit was reached"
    stripped = strip_reasoning(text or "")
    blocks = fenced_blocks(stripped)
    if blocks and not blocks[-1].closed:
        return "its last code block was never closed"
    if (text or "").strip() and not stripped.strip() and _OPEN_REASONING.search(text or ""):
        return "it ended inside its reasoning"
    return None


class CodeReading(BaseModel):
    """A code reply as read by :func:`read_code_reply`: the ``choice`` (None when no program
    was found), ``cut_off`` (why it looks cut off, None when it ended normally), ``chars``
    (length of the reply text)."""

    choice: ProgramChoice | None = None
    cut_off: str | None = None
    chars: int = 0

    @property
    def usable(self) -> bool:
        """True when the program can be taken without asking again: one was found, and the
        reply was not cut off or the chosen block is a complete program anyway (the cut hit
        the prose after it, or only the closing fence is missing)."""
        return self.choice is not None and (self.cut_off is None or self.choice.complete)

    @property
    def problem(self) -> str | None:
        """What was wrong, phrased after "the reply" (e.g. "was cut off (...)"); None when
        :attr:`usable`."""
        if self.usable:
            return None
        if self.cut_off is not None:
            what = "no complete program" if self.choice is None else "an incomplete program"
            return f"was cut off ({self.cut_off}; {self.chars} characters) with {what}"
        if self.chars == 0:
            return "was empty"
        return f"had no fenced code block ({self.chars} characters)"


def read_code_reply(
    text: str | None, finish_reason: str | None = None, loci: Sequence[str] | None = None
) -> CodeReading:
    """Read a code reply: :func:`choose_program` and :func:`cut_off_reason` together.

    ``text`` is the message's ``content`` only (never ``reasoning_content``); an empty reply
    (whitespace only) reads as ``chars == 0``.
    """
    text = text or ""
    return CodeReading(
        choice=choose_program(text, loci, finish_reason),
        cut_off=cut_off_reason(text, finish_reason),
        chars=len(text) if text.strip() else 0,
    )


def extract_code(text: str, loci: Sequence[str] | None = None) -> tuple[str, str] | None:
    """``(plan, code)`` of a reply by :func:`choose_program`, or None when it holds no
    program."""
    choice = choose_program(text or "", loci)
    return None if choice is None else (choice.plan, choice.code)
