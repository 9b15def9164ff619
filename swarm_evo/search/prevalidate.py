"""Static pre-validation of generated programs, before any execution (SPEC §6, seed 003).

Cheap checks that catch the commonest failures without spending sandbox time: the program
compiles, all section markers are present, it writes ``./submission/submission.csv`` and it
prints a ``Validation metric:`` line. On failure the caller makes one LLM self-fix with these
messages injected (CTX purpose ``fix``, docs/CONTRACTS.md), so they are phrased as
instructions to the model.
"""

from __future__ import annotations

import io
import tokenize
from typing import Sequence

from swarm_evo.population.genes import LOCI, marker, parse_genes

SUBMISSION_PATH = "./submission/submission.csv"
METRIC_PREFIX = "Validation metric:"


def _code_without_comments(code: str) -> str:
    """The program's tokens without comments (so ``# writes submission.csv`` does not count).

    Falls back to the raw text when the code cannot be tokenised.
    """
    try:
        tokens = tokenize.generate_tokens(io.StringIO(code).readline)
        return " ".join(tok.string for tok in tokens if tok.type != tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code


def static_check(code: str, loci: Sequence[str] = LOCI) -> list[str]:
    """Static errors of a program; an empty list means it may be executed.

    Checks (SPEC §6 "Static pre-validation", seed 003):
      * ``compile(code)`` succeeds (the message gives the line number, the error and the line);
      * every marker ``# [SECTION: <LOCUS>]`` of ``loci`` is present (missing ones are named);
      * the code mentions ``submission.csv`` outside comments (it must write
        ``./submission/submission.csv``);
      * the code mentions ``Validation metric:`` outside comments (it must print it).

    Args:
        code: the whole program text.
        loci: the locus names whose markers are required (default: the 7 ML loci).

    Returns:
        Error messages, one per problem, each telling the LLM what to fix.
    """
    errors: list[str] = []
    compiled = False
    try:
        compile(code, "solution.py", "exec")
        compiled = True
    except SyntaxError as exc:  # includes IndentationError and TabError
        kind = type(exc).__name__
        where = f"line {exc.lineno}" if exc.lineno else "an unknown line"
        if exc.offset:
            where += f", column {exc.offset}"
        text = (exc.text or "").rstrip("\n")
        shown = f" The offending line is: `{text.strip()[:200]}`." if text.strip() else ""
        errors.append(
            f"The program does not compile: {kind} at {where}: {exc.msg}.{shown} "
            "Fix the syntax so that the whole file compiles."
        )
    except ValueError as exc:  # e.g. source code string contains null bytes
        errors.append(f"The program does not compile: {exc}. Remove the invalid characters.")

    genes = parse_genes(code)
    missing = [locus for locus in loci if locus not in genes]
    if missing:
        named = ", ".join(f"`{marker(locus)}`" for locus in missing)
        order = ", ".join(loci)
        errors.append(
            f"Missing section marker(s): {named}. The program must contain all {len(loci)} "
            f"section markers, each alone on its own line, in this order: {order}. Keep every "
            "marker even when a section has nothing to do (put a comment under it)."
        )

    body = _code_without_comments(code) if compiled else code
    if "submission.csv" not in body:
        errors.append(
            f"The program never writes the submission: it must save predictions for the test "
            f"set to `{SUBMISSION_PATH}` (create the `./submission` directory if needed), "
            "with the columns and row order of the sample submission."
        )
    if METRIC_PREFIX not in body:
        errors.append(
            "The program never prints its validation score: it must print exactly one line "
            f"`print(f\"{METRIC_PREFIX} {{score}}\")` with the hold-out/CV score as a plain "
            "float, as the last line of its output."
        )
    return errors
