"""Tests for static pre-validation (SPEC §6, seed 003)."""

from __future__ import annotations

from swarm_evo.population.genes import LOCI, marker
from swarm_evo.search.prevalidate import static_check


def program(loci=LOCI, body_extra: str = "", write: bool = True, metric: bool = True) -> str:
    parts = ["import pandas as pd\n"]
    for locus in loci:
        parts.append(marker(locus) + "\n")
        parts.append(f"x_{locus.lower()} = 1\n")
    if write:
        parts.append("pd.DataFrame({'id': [1]}).to_csv('./submission/submission.csv', index=False)\n")
    if metric:
        parts.append("print(f'Validation metric: {0.5}')\n")
    parts.append(body_extra)
    return "".join(parts)


def test_valid_program_passes():
    assert static_check(program()) == []


def test_syntax_error_reports_line():
    errs = static_check(program(body_extra="def f(:\n    pass\n"))
    assert len(errs) == 1
    assert "does not compile" in errs[0] and "SyntaxError" in errs[0]
    lineno = program().count("\n") + 1
    assert f"line {lineno}" in errs[0] and "def f(:" in errs[0]


def test_indentation_error():
    errs = static_check(program(body_extra="if True:\nprint(1)\n"))
    assert any("IndentationError" in e for e in errs)


def test_missing_markers_named():
    loci = [l for l in LOCI if l not in ("LOSS", "TRAINING_TRICKS")]
    errs = static_check(program(loci=loci))
    assert len(errs) == 1
    assert "`# [SECTION: LOSS]`" in errs[0] and "`# [SECTION: TRAINING_TRICKS]`" in errs[0]
    assert "`# [SECTION: DATA]`" not in errs[0]


def test_custom_loci():
    code = "# [SECTION: SOLVER]\nx=1\nopen('submission.csv','w')\nprint('Validation metric: 1')\n"
    assert static_check(code, loci=["SOLVER"]) == []
    assert "SOLVER" in static_check("x=1\nopen('submission.csv','w')\nprint('Validation metric: 1')\n", ["SOLVER"])[0]


def test_missing_submission_and_metric():
    errs = static_check(program(write=False, metric=False))
    assert len(errs) == 2
    assert "./submission/submission.csv" in errs[0]
    assert "Validation metric:" in errs[1]


def test_comment_mentions_do_not_count():
    code = program(write=False, metric=False, body_extra="# TODO write submission.csv and print Validation metric:\n")
    assert len(static_check(code)) == 2


def test_all_errors_reported_together():
    code = "def broken(:\n"
    errs = static_check(code)
    assert len(errs) == 4
