"""A competition description as prompts show it: Kaggle boilerplate dropped (issue 13).

Kaggle descriptions (``description.md``, as MLE-bench copies them) carry sections that tell a
program nothing: the FAQ about teams, notebooks and the rolling leaderboard, how to contact
support, prizes and their eligibility, the timeline, the citation, photo credits. On
spaceship-titanic they are ~4,700 of 7,600 characters. :func:`prompt_description` drops them
and keeps the overview, the evaluation (metric, submission format) and the dataset
description.
"""

from __future__ import annotations

import re

BOILERPLATE_HEADINGS: tuple[str, ...] = (
    r"faqs?",
    r"frequently asked questions",
    r"teams?",
    r"team (formation|mergers?|limits?)",
    r"(kaggle )?support",
    r"(how do i )?contact( us| support)?",
    r"getting help",
    r"getting started",
    r"(kernels? |discussion |notebooks? )?prizes?",
    r"prize (pool|eligibility)",
    r"eligibility",
    r"timeline",
    r"citation",
    r"acknowledge?ments?",
    r"(kaggle )?discussion( forum)?s?",
    r"code requirements",
)
"""Headings (whole heading text, case-insensitive, trailing punctuation ignored) whose
sections are dropped, with their sub-sections. From the descriptions under
``/work/shared/data/*/description.md`` (spaceship-titanic, spooky-author-identification) and
MLE-bench's Kaggle pages."""

BOILERPLATE_PARAGRAPHS: tuple[str, ...] = (
    r"\**a reminder about playground competitions",
)
"""Paragraph openings (case-insensitive) of boilerplate paragraphs outside such sections."""

_HEADING = re.compile(r"^(#{1,6})\s*(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_IMAGE_LINE = re.compile(r"^\s*!\[[^\]]*\]\([^)]*\)\s*$")
_BOILERPLATE = re.compile(r"^(?:" + "|".join(BOILERPLATE_HEADINGS) + r")$", re.I)
_PARAGRAPH = re.compile(r"^\s*(?:" + "|".join(BOILERPLATE_PARAGRAPHS) + r")", re.I)


def is_boilerplate_heading(title: str) -> bool:
    """True when a markdown heading's text names a boilerplate section
    (:data:`BOILERPLATE_HEADINGS`), e.g. "Frequently Asked Questions", "Prizes", "Timeline"."""
    text = re.sub(r"[*_`:?!.]+", "", title).strip()
    return bool(_BOILERPLATE.match(text))


def prompt_description(markdown: str, demote: int = 0) -> str:
    """``markdown`` without Kaggle boilerplate: what prompts show of a competition description.

    Drops every section whose heading :func:`is_boilerplate_heading` (up to the next heading of
    the same or a higher level), image-only lines (``![...](...)``), and paragraphs opening
    with :data:`BOILERPLATE_PARAGRAPHS`. Lines inside fenced blocks (a submission format
    example) are never taken for headings. Runs of blank lines collapse to one. A description
    with no boilerplate comes back unchanged except for that collapsing; ``""`` stays ``""``.

    ``demote`` adds that many ``#`` to every kept heading (at most level 6), so that the
    description nests under the prompt's own ``# Task`` heading instead of opening top-level
    sections of its own.
    """
    kept: list[str] = []
    drop_level: int | None = None
    in_fence = False
    for line in (markdown or "").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            if drop_level is None:
                kept.append(line)
            continue
        if not in_fence:
            heading = _HEADING.match(line)
            if heading and heading.group(2):
                level = len(heading.group(1))
                if drop_level is not None and level > drop_level:
                    continue
                drop_level = level if is_boilerplate_heading(heading.group(2)) else None
                if drop_level is not None:
                    continue
                if demote:
                    line = "#" * min(6, level + demote) + " " + heading.group(2)
            elif drop_level is None and _IMAGE_LINE.match(line):
                continue
        if drop_level is None:
            kept.append(line.rstrip())
    return _drop_paragraphs("\n".join(kept)).strip()


def _drop_paragraphs(text: str) -> str:
    """``text`` without :data:`BOILERPLATE_PARAGRAPHS` paragraphs, blank-line runs collapsed."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip() and not _PARAGRAPH.match(p)]
    return "\n\n".join(p.strip("\n") for p in paragraphs)
