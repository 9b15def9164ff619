"""The documentation works as written (issue 33): every ``swarm-evo …`` command in a fenced
shell block of the README and of ``docs/*.md`` parses with the CLI's own parser, every
relative link between the pages points at a file that exists, and every source file a page
names (``docs/ARCHITECTURE.md``'s ``step/limits.py::check_limits``, a bare ``journal.py``) is
a file of the repository."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from swarm_evo.cli.commands import _parser

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


TRACKED = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split())
"""The repository's files (git's index: the checkout's own files, not its venvs or run directories)."""
SOURCE_PATH = re.compile(r"(?<![\w$<>.-])((?:[\w.-]+/)*[\w.-]+\.(?:py|j2|sh|toml|yaml|yml))(?![\w])")
RUN_FILES = {"solution.py", "best_solution.py", "program.py", "config.yaml"}
"""Names the pages give to files of a run, a node directory or a competition folder, not of
this repository: a program (``solution.py``), the run's best (``best_solution.py``), the
Eval Service's ``program.py``, a competition's ``config.yaml``."""


def named_source_paths(markdown: str) -> set[str]:
    """The source files a page names in backticks: ``flows/_step.py``, ``step/limits.py::check_limits``
    (the part after ``::`` dropped), or a bare ``journal.py``."""
    return {m.group(1) for code in re.findall(r"`([^`\n]+)`", markdown) for m in SOURCE_PATH.finditer(code)}


def _exists(name: str) -> bool:
    if name in RUN_FILES or name.startswith(("RUN_DIR/", "runs/", "nodes/", "OUT/", "DATA_DIR/")):
        return True
    if "/" not in name:  # a bare file name, under its package heading: some file of the repository has it
        return any(Path(t).name == name for t in TRACKED)
    # ARCHITECTURE.md: "paths are under swarm_evo/ unless they start with flows/, tasks/ or tests/"
    return any(f"{base}{name}" in TRACKED for base in ("", "swarm_evo/", "prompt_templates/", "tests/"))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_source_file_a_page_names_exists(page):
    """docs/ARCHITECTURE.md and docs/CONTRACTS.md (and every other page) name modules by path:
    after a module moves or goes, the page must follow (issue 33)."""
    missing = sorted(n for n in named_source_paths(page.read_text(encoding="utf-8")) if not _exists(n))
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"


def test_a_moved_module_would_be_caught():
    assert _exists("step/limits.py") and _exists("flows/_step.py") and _exists("journal.py")
    assert not _exists("step/no_such_module.py") and not _exists("no_such_module.py")
    assert named_source_paths("see `step/limits.py::check_limits` and `sandbox.python`") == {"step/limits.py"}


def test_the_key_table_of_cli_md_is_generated_from_the_config_models():
    """docs/cli.md's table of configuration keys is :func:`swarm_evo.config.keys.key_table`'s
    (issue 55, item 3): a key added, renamed or described anew in swarm_evo/config/ fails here
    until ``python -m swarm_evo.config.keys --write docs/cli.md`` is run."""
    from swarm_evo.config.keys import key_table, keys, page_table

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page_table(page) == key_table(), "run: python -m swarm_evo.config.keys --write docs/cli.md"
    undescribed = [key for key, _, text in keys() if not text.strip()]
    assert not undescribed, f"configuration keys without a description: {undescribed}"
