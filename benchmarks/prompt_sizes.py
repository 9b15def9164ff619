"""Prompt sizes per operation in finished runs (issue 13: prompts within the model's context).

Reads every ``RUN_DIR/nodes/*/prompt-*.md`` and prints, per run directory and per operation
(the registered operations, swarm_evo/operators/: draft, merge, mutate, debug; then fix, review,
and any other prompt name), the number of prompts
and the mean and max of their sizes in characters. ``prompt-debug1.md`` / ``prompt-debug2.md``
count as ``debug``; ``prompt-fix.md`` / ``prompt-fix-debug1.md`` as ``fix``.

Usage::

    python benchmarks/prompt_sizes.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from swarm_evo.operators import registry

OTHER_PROMPTS = ("fix", "review")
"""Prompts of calls that are no search operation, printed after the operations'."""


def first_printed() -> tuple[str, ...]:
    """The prompt names printed first, in this order; other prompt names follow alphabetically."""
    return registry.names() + OTHER_PROMPTS


def operation_of(path: Path) -> str:
    """The operation of a prompt file: ``prompt-debug2.md`` → ``debug``, ``prompt-fix-debug1.md``
    → ``fix``, ``prompt-draft.md`` → ``draft``."""
    name = path.name.removeprefix("prompt-").removesuffix(".md")
    head = re.split(r"[-\d]", name, maxsplit=1)[0]
    return head or name


def prompt_sizes(run_dir: Path) -> dict[str, list[int]]:
    """``{operation: [size in characters, ...]}`` of the run's node prompts."""
    sizes: dict[str, list[int]] = {}
    for path in sorted(Path(run_dir).glob("nodes/*/prompt-*.md")):
        sizes.setdefault(operation_of(path), []).append(len(path.read_text(encoding="utf-8")))
    return sizes


def table(run_dir: Path) -> str:
    """A plain-text table: operation, count, mean chars, max chars."""
    sizes = prompt_sizes(run_dir)
    first = first_printed()
    ops = [op for op in first if op in sizes] + sorted(op for op in sizes if op not in first)
    lines = [f"{run_dir}", f"{'operation':<10} {'count':>5} {'mean chars':>11} {'max chars':>10}"]
    for op in ops:
        values = sizes[op]
        lines.append(f"{op:<10} {len(values):>5} {sum(values) / len(values):>11,.0f} {max(values):>10,}")
    if not ops:
        lines.append("(no nodes/*/prompt-*.md files)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print :func:`table` for every run directory given; exit 2 when one does not exist."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    args = parser.parse_args(argv)
    missing = [d for d in args.run_dirs if not d.is_dir()]
    if missing:
        print(f"not a directory: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print("\n\n".join(table(d) for d in args.run_dirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
