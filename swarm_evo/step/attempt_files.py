"""A node directory holds the files of the program the journal records for the node (issue 31).

A debug attempt runs its program in the node directory, over the previous attempt's files.
That is right for the chain of SPEC §6 (the node keeps its last attempt), but not for a node
that passed every deterministic check and was flagged by the reviewer alone: when its fix
fails, the node keeps its original program (``debug_chain.debug_flagged``), so the original's
files must be what ``nodes/<id>/`` holds, or handing the node in copies a broken fix's
submission, or none.

So before a flagged node is debugged, what its execution left in ``nodes/<id>/`` is set aside
in ``RUN_DIR/attempts/<id>/<attempt>/`` (outside every program's node directory, so no fix
can read or change it); the fix runs in a directory without the original's submission; when
the chain keeps the original, the fix's files are set aside in turn
(``attempts/<id>/<last attempt>/``, kept for inspection) and the original's come back.

The node directory's own files stay where they are: ``input`` (the sandbox's link to the
public data) and the rendered prompts ``prompt-*.md``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ATTEMPTS_DIR = "attempts"
"""``RUN_DIR/attempts/<node id>/<attempt>/``: execution files the node directory does not hold."""

_KEPT = ("input",)


def _execution_entries(node_dir: Path) -> list[Path]:
    """What programs and their execution left in ``node_dir`` (everything but ``input`` and
    the rendered prompts)."""
    return [p for p in node_dir.iterdir()
            if p.name not in _KEPT and not (p.name.startswith("prompt-") and p.name.endswith(".md"))]


def aside_dir(node_dir: Path, attempt: int) -> Path:
    """``RUN_DIR/attempts/<node id>/<attempt>/`` for ``node_dir`` = ``RUN_DIR/nodes/<node id>``."""
    return node_dir.parent.parent / ATTEMPTS_DIR / node_dir.name / str(attempt)


def set_aside(node_dir: Path, attempt: int) -> Path:
    """Move the execution files of ``attempt`` (what ``node_dir`` holds now) to
    :func:`aside_dir` and return that directory. Renames only (same file system): no copy of a
    large ``working/``. An existing aside directory of the same attempt is replaced.

    Raises:
        OSError: a file cannot be moved.
    """
    target = aside_dir(node_dir, attempt)
    if os.path.lexists(target):
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for entry in _execution_entries(node_dir):
        os.rename(entry, target / entry.name)
    return target


def bring_back(node_dir: Path, attempt: int, replaced: int | None) -> None:
    """Make ``node_dir`` hold ``attempt``'s execution files again (set aside by
    :func:`set_aside`): what it holds now is set aside as attempt ``replaced`` (a fix that was
    not kept; None when nothing ran since), then ``attempt``'s files move back.

    Raises:
        FileNotFoundError: ``attempt`` was never set aside.
        OSError: a file cannot be moved.
    """
    source = aside_dir(node_dir, attempt)
    if not source.is_dir():
        raise FileNotFoundError(f"no files of attempt {attempt} were set aside at {source}")
    if replaced is not None and replaced != attempt:
        set_aside(node_dir, replaced)
    else:
        for entry in _execution_entries(node_dir):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    for entry in list(source.iterdir()):
        os.rename(entry, node_dir / entry.name)
    source.rmdir()
