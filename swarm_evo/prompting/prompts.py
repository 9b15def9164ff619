"""Prompt rendering: Jinja2 templates in ``prompt_templates/`` (SPEC §7).

Templates keep the seeds' section order (role, output format, task, context, strategy,
examples, guidelines) and share partials under ``prompt_templates/skills/``. Rendering is
strict: a variable a template uses but the caller did not pass is an error, not a blank.

Every text that enters a prompt is bounded (issue 13): templates apply the filters ``bound``
(:func:`swarm_evo.prompting.text_bounds.bound_text`: ``{{ term_out|bound(limits.term_out, "output") }}``),
``bound_items`` (:func:`swarm_evo.prompting.text_bounds.bound_items`), ``bound_join``
(:func:`~swarm_evo.prompting.text_bounds.bound_join`) and, around a rendered list, the block filter
``fit_lines`` (:func:`~swarm_evo.prompting.text_bounds.fit_lines`) with the run's
:class:`~swarm_evo.prompting.text_bounds.PromptLimits`, passed as ``limits`` by ``model_context.prompt_context``.
Every prompt fits ``limits.prompt_chars`` (issue 31): :func:`render` measures the template's
fixed text (:func:`measure`) and shrinks the parts when they would not fit beside it.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from swarm_evo.prompting.text_bounds import PROMPT_PARTS, PromptLimits, bound_items, bound_join, bound_text, fit_lines

log = logging.getLogger(__name__)


def templates_dir() -> Path:
    """The ``prompt_templates`` directory (next to the package in a checkout, or installed)."""
    try:
        import prompt_templates  # installed as package data

        return Path(next(iter(prompt_templates.__path__)))
    except (ImportError, StopIteration):  # pragma: no cover - fallback for odd installs
        return Path(__file__).resolve().parents[2] / "prompt_templates"


@lru_cache(maxsize=4)
def _environment(root: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(root),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["bound"] = _bound_filter
    env.filters["bound_items"] = _bound_items_filter
    env.filters["bound_join"] = bound_join
    env.filters["fit_lines"] = fit_lines
    return env


def _bound_filter(text: Any, max_chars: int, what: str = "text") -> str:
    """Jinja filter ``bound``: :func:`bound_text` of ``text`` (None → "")."""
    return bound_text("" if text is None else str(text), int(max_chars), what=what)


def _bound_items_filter(items: Any, max_item_chars: int, max_total_chars: int, what: str = "problems") -> list[str]:
    """Jinja filter ``bound_items``: :func:`bound_items` of a list (None → [])."""
    return bound_items(items, int(max_item_chars), int(max_total_chars), what=what)


class _PartsRecorder:
    """Stands in for ``limits`` while a template's fixed text is measured: every part of
    :data:`~swarm_evo.prompting.text_bounds.PROMPT_PARTS` reads as 0 (so the part renders nothing) and
    each read is counted; other fields read as in ``limits``."""

    def __init__(self, limits: PromptLimits) -> None:
        self._limits = limits
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name in PROMPT_PARTS:
            self.reads.append(name)
            return 0
        return getattr(self._limits, name)


def _render_text(template: str, context: dict[str, Any]) -> str:
    text = _environment(str(templates_dir())).get_template(template).render(**context)
    # Collapse the blank-line runs that optional blocks leave behind.
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip() and lines and not lines[-1].strip():
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"


SLACK_PER_PART = 2
"""Characters allowed per part beyond its bound: an empty part's line break can merge with a
blank line when the fixed text is measured, and comes back when the part has text."""


def measure(template: str, context: dict[str, Any]) -> tuple[int, list[str]]:
    """``(fixed characters, parts read)`` of ``template`` rendered with ``context`` (which holds
    ``limits``, a :class:`~swarm_evo.prompting.text_bounds.PromptLimits`): the prompt's
    length with every part of :data:`~swarm_evo.prompting.text_bounds.PROMPT_PARTS` bounded to 0 (the
    headings, instructions and run constants a prompt shows whatever its inputs), and the parts
    the template read, once per read (a role and a strategy text read ``agent_text`` twice).

    Raises:
        jinja2.TemplateNotFound, jinja2.UndefinedError: as :func:`render`.
    """
    recorder = _PartsRecorder(context["limits"])
    fixed = len(_render_text(template, {**context, "limits": recorder}))
    return fixed, recorder.reads


def fit_limits(template: str, context: dict[str, Any]) -> PromptLimits:
    """The limits with which ``template`` fits ``limits.prompt_chars`` (issue 31); ``limits``
    is ``context["limits"]``.

    The template's fixed text F and the parts it reads are measured (:func:`measure`); when F
    plus the parts' bounds (plus :data:`SLACK_PER_PART` each) exceed ``prompt_chars``, every part
    is scaled by ``(prompt_chars - F - slack) / parts`` (:meth:`PromptLimits.scaled`), else
    ``limits`` is returned as it is. When F alone exceeds ``prompt_chars`` (a window too small
    for the fixed text, refused at start by :func:`swarm_evo.run.prompt_budget.check_prompt_window`)
    the parts are 0.
    """
    limits = context["limits"]
    fixed, reads = measure(template, context)
    parts = sum(getattr(limits, name) for name in reads)
    room = limits.prompt_chars - fixed - SLACK_PER_PART * len(reads)
    if parts <= room or not parts:
        return limits
    return limits.scaled(max(0.0, room / parts))


def render(template: str, **context: Any) -> str:
    """Render ``prompt_templates/<template>`` with ``context``.

    When ``context`` holds ``limits`` (:class:`~swarm_evo.prompting.text_bounds.PromptLimits`) the
    template is rendered with :func:`fit_limits`: the prompt fits ``limits.prompt_chars``
    whatever its inputs, as long as the window holds its fixed text (otherwise a warning is
    logged and the prompt is returned as rendered).

    Raises:
        jinja2.TemplateNotFound: no such template.
        jinja2.UndefinedError: the template uses a variable missing from ``context``.
    """
    limits = context.get("limits")
    if isinstance(limits, PromptLimits):
        context = {**context, "limits": fit_limits(template, context)}
    prompt = _render_text(template, context)
    budget = getattr(limits, "prompt_chars", None)
    if budget is not None and len(prompt) > budget:
        log.warning("the %s prompt has %s characters, over the %s the model's context window allows "
                    "(model.context_window %s tokens)", template, f"{len(prompt):,}", f"{budget:,}",
                    f"{limits.context_window:,}")
    return prompt
