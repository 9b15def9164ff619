"""Prompt rendering: Jinja2 templates in ``prompt_templates/`` (SPEC §7).

Templates keep the seeds' section order (role, output format, task, context, strategy,
examples, guidelines) and share partials under ``prompt_templates/skills/``. Rendering is
strict: a variable a template uses but the caller did not pass is an error, not a blank.

Every text that enters a prompt is bounded (issue 13): templates apply the filters ``bound``
(:func:`swarm_evo.text_bounds.bound_text`: ``{{ term_out|bound(limits.term_out, "output") }}``)
and ``bound_items`` (:func:`swarm_evo.text_bounds.bound_items`) with the run's
:class:`~swarm_evo.text_bounds.PromptLimits`, passed as ``limits`` by ``model_context.prompt_context``.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from swarm_evo.text_bounds import bound_items, bound_text

log = logging.getLogger(__name__)


def templates_dir() -> Path:
    """The ``prompt_templates`` directory (next to the package in a checkout, or installed)."""
    try:
        import prompt_templates  # installed as package data

        return Path(next(iter(prompt_templates.__path__)))
    except (ImportError, StopIteration):  # pragma: no cover - fallback for odd installs
        return Path(__file__).resolve().parent.parent / "prompt_templates"


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
    return env


def _bound_filter(text: Any, max_chars: int, what: str = "text") -> str:
    """Jinja filter ``bound``: :func:`bound_text` of ``text`` (None → "")."""
    return bound_text("" if text is None else str(text), int(max_chars), what=what)


def _bound_items_filter(items: Any, max_item_chars: int, max_total_chars: int, what: str = "problems") -> list[str]:
    """Jinja filter ``bound_items``: :func:`bound_items` of a list (None → [])."""
    return bound_items(items, int(max_item_chars), int(max_total_chars), what=what)


def render(template: str, **context: Any) -> str:
    """Render ``prompt_templates/<template>`` with ``context``.

    When ``context`` holds ``limits`` (:class:`~swarm_evo.text_bounds.PromptLimits`) and the
    prompt still exceeds ``limits.prompt_chars`` (a context window too small for the fixed
    text), a warning is logged; the prompt is returned as rendered.

    Raises:
        jinja2.TemplateNotFound: no such template.
        jinja2.UndefinedError: the template uses a variable missing from ``context``.
    """
    text = _environment(str(templates_dir())).get_template(template).render(**context)
    # Collapse the blank-line runs that optional blocks leave behind.
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip() and lines and not lines[-1].strip():
            continue
        lines.append(line.rstrip())
    prompt = "\n".join(lines).strip() + "\n"
    limits = context.get("limits")
    budget = getattr(limits, "prompt_chars", None)
    if budget is not None and len(prompt) > budget:
        log.warning("the %s prompt has %s characters, over the %s the model's context window allows "
                    "(model.context_window %s tokens)", template, f"{len(prompt):,}", f"{budget:,}",
                    f"{limits.context_window:,}")
    return prompt
