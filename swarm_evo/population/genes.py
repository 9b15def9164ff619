"""Genes: the 7 loci of a solution program, parsed from ``# [SECTION: NAME]`` markers.

SPEC §8 / seed 000 §11: every program carries the markers of all loci in a fixed order; a
gene is the text from its marker to the next marker (the last gene runs to the end of the
file). The preamble before the first marker (imports, constants) belongs to the program and
is kept by every operation.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable, Sequence

LOCI: tuple[str, ...] = (
    "DATA",
    "MODEL",
    "LOSS",
    "OPTIMIZER",
    "REGULARIZATION",
    "INITIALIZATION",
    "TRAINING_TRICKS",
)
"""The 7 ML loci of seed 000 decision E, in program order."""

REQUIRED_NON_STUB: tuple[str, ...] = ("DATA", "MODEL")
"""Loci that must carry real code for validate_genes (SPEC §8)."""

DEFAULT_STUB_THRESHOLD = 20
"""A gene with fewer code characters than this (comments and whitespace removed) is a stub."""

_MARKER = re.compile(r"^[ \t]*#[ \t]*\[SECTION:[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*\][ \t]*\r?$", re.M)


def marker(locus: str) -> str:
    """The marker line of a locus, e.g. ``# [SECTION: DATA]``."""
    return f"# [SECTION: {locus}]"


def split_program(code: str) -> tuple[str, dict[str, str]]:
    """Split a program into its preamble and genes.

    Returns ``(preamble, {locus: gene_text})``; gene text excludes the marker line and keeps
    its trailing newline. Markers of any name are recognised; when a name repeats, the first
    occurrence wins and later ones stay inside the preceding gene's text. Render with
    :func:`render_program` to get the program back.
    """
    matches = [m for m in _MARKER.finditer(code)]
    if not matches:
        return code, {}
    preamble = code[: matches[0].start()]
    genes: dict[str, str] = {}
    kept: list[re.Match[str]] = []
    for m in matches:
        if m.group(1) not in {k.group(1) for k in kept}:
            kept.append(m)
    for i, m in enumerate(kept):
        start = m.end() + 1 if m.end() < len(code) and code[m.end()] == "\n" else m.end()
        end = kept[i + 1].start() if i + 1 < len(kept) else len(code)
        genes[m.group(1)] = code[start:end]
    return preamble, genes


def parse_genes(code: str) -> dict[str, str]:
    """The genes of a program, ``{locus: text}`` for every marker found (see split_program)."""
    return split_program(code)[1]


def render_program(preamble: str, genes: dict[str, str], loci: Sequence[str] | None = None) -> str:
    """Join a preamble and genes into a program, markers in ``loci`` order (default: genes' order).

    ``render_program(*split_program(code))`` returns ``code`` for any program whose markers
    each start a line and are written canonically (``marker(locus)`` followed by LF; a repeated
    marker, which stays inside the preceding gene, may take any form), including a program
    without markers. Not restored: non-canonical marker lines (spacing, CRLF) are rewritten
    canonically, and a marker on the last line without a final LF gets one (its gene is "",
    like a marker followed by LF). Property-tested in ``tests/test_properties.py``.
    """
    order = list(loci) if loci is not None else list(genes)
    parts = [preamble]
    # The LF that ends the preamble before the first marker; without markers the program is
    # the preamble alone (issue 7: "abc" used to render as "abc\n").
    if preamble and order and not preamble.endswith("\n"):
        parts.append("\n")
    for i, locus in enumerate(order):
        text = genes.get(locus, "")
        parts.append(marker(locus) + "\n")
        parts.append(text)
        if text and not text.endswith("\n") and i + 1 < len(order):
            parts.append("\n")
    return "".join(parts)


def replace_gene(code: str, locus: str, text: str) -> str:
    """Return ``code`` with the gene at ``locus`` replaced by ``text``.

    Raises:
        KeyError: the program has no marker for ``locus``.
    """
    preamble, genes = split_program(code)
    if locus not in genes:
        raise KeyError(f"program has no '# [SECTION: {locus}]' marker")
    genes[locus] = text
    return render_program(preamble, genes)


def normalise_gene(text: str) -> str:
    """Normalised gene text: LF line ends, no trailing spaces, runs of blank lines collapsed, stripped."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for line in lines:
        if line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return "\n".join(out).strip("\n")


def gene_id(text: str) -> str:
    """Gene identity: first 12 hex characters of sha1 of the normalised text (SPEC §8)."""
    return hashlib.sha1(normalise_gene(text).encode("utf-8")).hexdigest()[:12]


def code_chars(text: str) -> int:
    """Number of code characters in a gene: comments (``#`` to end of line) and whitespace removed.

    A ``#`` inside a string literal is treated as code only by accident of this simple rule;
    stubs are comment-only texts, for which the rule is exact.
    """
    stripped = re.sub(r"#[^\n]*", "", text)
    return len(re.sub(r"\s+", "", stripped))


def is_stub(text: str | None, threshold: int = DEFAULT_STUB_THRESHOLD) -> bool:
    """True when a gene has fewer than ``threshold`` code characters (SPEC §6, mutate rule).

    The seeds' rule (``len(text.strip()) < 20``) would keep
    ``"# Not applicable — handled by the model."`` as real code; counting only code
    characters makes every comment-only gene a stub.
    """
    return code_chars(text or "") < threshold


def validate_genes(
    genes: dict[str, str],
    loci: Iterable[str] = LOCI,
    required: Iterable[str] = REQUIRED_NON_STUB,
    stub_threshold: int = DEFAULT_STUB_THRESHOLD,
) -> bool:
    """True when every locus has a marker and the required loci (DATA, MODEL) are not stubs."""
    if any(locus not in genes for locus in loci):
        return False
    return not any(is_stub(genes.get(locus), stub_threshold) for locus in required)


def non_stub_loci(
    genes: dict[str, str], loci: Iterable[str] = LOCI, stub_threshold: int = DEFAULT_STUB_THRESHOLD
) -> list[str]:
    """The loci whose genes are present and not stubs, in ``loci`` order."""
    return [locus for locus in loci if locus in genes and not is_stub(genes[locus], stub_threshold)]
