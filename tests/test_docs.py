"""The documentation works as written (issue 33): every ``swarm-evo …`` command in a fenced
shell block of the README and of ``docs/*.md`` parses with the CLI's own parser, and every
relative link between the pages points at a file that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from swarm_evo.cli import _parser

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_FENCE = re.compile(r"^```(?:bash|sh|shell|console)[ \t]*\n(.*?)^```", re.M | re.S)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def shell_commands(markdown: str) -> list[str]:
    """The commands of the fenced shell blocks of ``markdown``: continuation lines joined, then
    split at ``&&``, ``;`` and pipes; heredoc bodies left out."""
    commands: list[str] = []
    for block in SHELL_FENCE.findall(markdown):
        text = re.sub(r"\\\n\s*", " ", block)
        heredoc = None
        for line in text.splitlines():
            if heredoc is not None:
                heredoc = None if line.strip() == heredoc else heredoc
                continue
            marker = re.search(r"<<-?\s*'?(\w+)'?", line)
            if marker:
                heredoc = marker.group(1)
            commands += [c.strip() for c in re.split(r"&&|;|\|\|?", line) if c.strip()]
    return commands


def swarm_evo_arguments(command: str) -> list[str] | None:
    """The arguments after ``swarm-evo`` (any path to it, after ``VAR=value`` assignments and
    before a comment), or None when ``command`` does not run ``swarm-evo``."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words or Path(words[0]).name != "swarm-evo":
        return None
    return [w for w in words[1:] if w != "&"]


def _documented_commands() -> list[tuple[str, list[str]]]:
    out = []
    for page in PAGES:
        for command in shell_commands(page.read_text(encoding="utf-8")):
            args = swarm_evo_arguments(command)
            if args is not None:
                out.append((f"{page.relative_to(REPO)}: {command[:90]}", args))
    return out


COMMANDS = _documented_commands()


def test_the_pages_show_swarm_evo_commands():
    pages = {label.split(":")[0] for label, _ in COMMANDS}
    assert "README.md" in pages and len(COMMANDS) >= 10, sorted(pages)


@pytest.mark.parametrize("label,args", COMMANDS, ids=[label for label, _ in COMMANDS])
def test_every_documented_command_parses(label, args):
    try:
        parsed = _parser().parse_args(args)
    except SystemExit as exc:
        pytest.fail(f"{label}: `swarm-evo {' '.join(args)}` does not parse (exit {exc.code})")
    assert parsed.command


def test_the_parser_would_catch_a_wrong_command():
    """The check above is not vacuous: a flag the CLI does not have fails it."""
    args = swarm_evo_arguments("OPENAI_API_KEY=x .venv/bin/swarm-evo run --competition-id a --no-such-flag  # c")
    assert args == ["run", "--competition-id", "a", "--no-such-flag"]
    with pytest.raises(SystemExit):
        _parser().parse_args(args)


LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_relative_links_point_at_files(page):
    missing = [target for target in LINK.findall(page.read_text(encoding="utf-8"))
               if not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"
