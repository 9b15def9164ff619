"""Property-based tests (hypothesis) of three parsers whose rules are documented:

- genes (SPEC §8, ``swarm_evo/population/genes.py``): split/render round trip of programs with canonical
  ``# [SECTION: NAME]`` markers and arbitrary section bodies;
- the metric line (SPEC §6, ``swarm_evo/search/review.py``): ``Validation metric: <float>``, the
  last matching line wins, anything else is ignored, non-finite values are flagged;
- submission validation (``swarm_evo/competition/submission.py``): a submission is valid
  iff it has exactly the sample submission's columns (any order), one row per sample id
  (ids compared as canonical strings: 7, 7.0 and "7" are one id), no missing values, and
  passes the grader's value checks (numbers for regression graders, none for label graders).

The expected results are computed from those rules, not from the code under test.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from swarm_evo.competition import Competition, validate_submission
from swarm_evo.population import genes as G
from swarm_evo.sandbox.base import ExecutionResult
from swarm_evo.search.review import decide_review, parse_metric

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FILES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ================================================================================ genes
# A body line: any text without "\n" (unicode, "\r", tabs, trailing spaces, form feeds, ...)
# that does not mention SECTION, or one of these marker-like lines that are not markers (the
# documented marker is the whole line "# [SECTION: NAME]", NAME an identifier, modulo
# spaces/tabs around the parts).
NOT_MARKERS = [
    "x = '# [SECTION: DATA]'",
    "print('# [SECTION: MODEL]')",
    "# [SECTION: DATA] and more",
    "# [SECTION: MODEL]  # trailing comment",
    "# SECTION: DATA",
    "# [section: DATA]",
    "#[SECTION DATA]",
    "# [SECTION: 9LIVES]",
    "## [SECTION: MODEL]",
    "# [SECTION: DA TA]",
    "# [SECTION: ]",
    "# [SECTION: LOSS",
    "# [[SECTION: LOSS]]",
]
free_line = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30).filter(
    lambda s: "section" not in s.lower()
)
indent = st.sampled_from(["", " ", "    ", "\t"])
plain_line = st.one_of(
    free_line,
    st.builds(lambda i, s: i + s, indent, st.sampled_from(NOT_MARKERS)),
    st.just(""),
    st.builds(lambda s, t: s + t, free_line, st.sampled_from([" ", "  \t", "\r"])),  # trailing whitespace
)
locus_name = st.from_regex(r"[A-Z_][A-Z0-9_]{0,11}", fullmatch=True)
problem_loci = st.lists(locus_name, min_size=1, max_size=5, unique=True)


@st.composite
def programs(draw, loci=None):
    """``(code, preamble, loci, bodies)``: canonical markers (each ``marker + "\\n"``) in
    ``loci`` order; bodies may repeat an earlier (or their own) marker, which the rule
    "first occurrence wins" keeps inside the body text. The last body may lack a final LF."""
    loci = list(loci) if loci is not None else draw(problem_loci)
    preamble = "".join(line + "\n" for line in draw(st.lists(plain_line, max_size=4)))
    bodies = []
    for i, locus in enumerate(loci):
        repeat = st.builds(  # a repeated marker, in any form the marker pattern accepts
            lambda a, name, b, c, d, e, cr: f"{a}#{b}[SECTION:{c}{name}{d}]{e}{cr}",
            indent, st.sampled_from(loci[: i + 1]), *[st.sampled_from(["", " ", "\t"])] * 4, st.sampled_from(["", "\r"]),
        )
        lines = draw(st.lists(st.one_of(plain_line, repeat), max_size=5))
        body = "".join(line + "\n" for line in lines)
        if i == len(loci) - 1 and body and draw(st.booleans()):
            body = body[:-1]
        bodies.append(body)
    code = preamble + "".join(G.marker(locus) + "\n" + body for locus, body in zip(loci, bodies))
    return code, preamble, loci, bodies


@FAST
@given(programs(loci=G.LOCI))
def test_ml_program_split_then_render_is_identity(case):
    code, preamble, loci, bodies = case
    got_preamble, genes = G.split_program(code)
    assert got_preamble == preamble
    assert list(genes) == loci and [genes[k] for k in loci] == bodies
    assert G.parse_genes(code) == genes
    assert G.render_program(got_preamble, genes) == code
    assert G.render_program(got_preamble, genes, G.LOCI) == code


@FAST
@given(st.data())
def test_problem_loci_split_then_render_is_identity(data):
    loci = data.draw(problem_loci)
    code, preamble, _, bodies = data.draw(programs(loci=loci))
    got_preamble, genes = G.split_program(code)
    assert got_preamble == preamble and list(genes) == loci
    assert [genes[k] for k in loci] == bodies
    assert G.render_program(got_preamble, genes, loci) == code


@FAST
@given(st.lists(plain_line, max_size=6), st.booleans())
def test_program_without_markers_is_all_preamble(lines, final_newline):
    code = "\n".join(lines) + ("\n" if final_newline and lines else "")
    assert G.split_program(code) == (code, {})
    assert G.render_program(code, {}) == code


@FAST
@given(programs(loci=G.LOCI))
def test_marker_on_the_last_line_without_lf_gets_one(case):
    """Documented exception: ``...# [SECTION: X]`` at EOF parses like ``...# [SECTION: X]\n``."""
    code, preamble, loci, bodies = case
    bare = code[: len(code) - len(bodies[-1]) - 1]  # cut the last gene and its marker's LF
    assert bare.endswith(G.marker(loci[-1]))
    got_preamble, genes = G.split_program(bare)
    assert genes[loci[-1]] == "" and G.render_program(got_preamble, genes) == bare + "\n"


@FAST
@given(programs(loci=G.LOCI), st.sampled_from(G.LOCI), st.lists(plain_line, max_size=4))
def test_replace_gene_changes_only_that_gene(case, locus, lines):
    code, preamble, loci, bodies = case
    new = "".join(line + "\n" for line in lines)
    out = G.replace_gene(code, locus, new)
    got_preamble, genes = G.split_program(out)
    expected = dict(zip(loci, bodies))
    expected[locus] = new
    assert got_preamble == preamble and genes == expected


@FAST
@given(programs(loci=G.LOCI))
def test_crlf_programs_parse_to_the_same_genes(case):
    """CRLF line ends: genes are the exact CRLF bodies; rendering writes LF marker lines
    (documented: canonical markers end with LF) and parses back to the same genes."""
    code, preamble, loci, bodies = case
    assume("\r" not in code)
    crlf = code.replace("\n", "\r\n")
    got_preamble, genes = G.split_program(crlf)
    assert got_preamble == preamble.replace("\n", "\r\n")
    assert list(genes) == loci and [genes[k] for k in loci] == [b.replace("\n", "\r\n") for b in bodies]
    assert G.split_program(G.render_program(got_preamble, genes)) == (got_preamble, genes)


@FAST
@given(st.lists(plain_line, max_size=6))
def test_gene_id_ignores_line_ends_and_trailing_space(lines):
    text = "\n".join(line.replace("\r", "") for line in lines)  # "\r\r\n" would be two line ends
    crlf = text.replace("\n", "\r\n")
    spaced = "\n".join(line + "  " for line in text.split("\n"))
    assert G.gene_id(text) == G.gene_id(crlf) == G.gene_id(spaced)
    assert G.normalise_gene(G.normalise_gene(text)) == G.normalise_gene(text)


# ================================================================================ metric line
finite = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(10**30), max_value=10**30),
)
FORMATS = [str, repr, "{:.4f}".format, "{:e}".format, "{:.3E}".format, "{:g}".format, "{:+}".format]
label = st.sampled_from(["Validation metric:", "validation metric:", "VALIDATION METRIC:", "Validation Metric:"])
space = st.sampled_from(["", " ", "  ", "\t"])
noise_line = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=40).filter(
    lambda s: "validation metric" not in s.lower()
)
MALFORMED = [
    "Validation metric: 0.5 (fold 1)", "Validation metric: 1.2.3", "Validation metric: --1",
    "Validation metric: 0x10", "Validation metric: 1e", "Validation metric: ", "Validation metric:",
    "Validation metric: 0.5 0.6", "Validation metric = 0.5", " Validation metric: 0.5",
    "Validation metric: 1_000", "Validation metric: one", "Best validation metric: 0.5",
    "Validation metric: [0.5]", "Validation metric: 0.5%",
]


@st.composite
def metric_line(draw):
    value = draw(finite)
    fmt = draw(st.sampled_from(FORMATS))
    text = fmt(value)
    line = f"{draw(label)}{draw(space)}{text}{draw(space)}"
    return line, float(text)


@FAST
@given(st.lists(st.tuples(st.lists(noise_line, max_size=3), metric_line()), min_size=1, max_size=4),
       st.lists(st.one_of(noise_line, st.sampled_from(MALFORMED)), max_size=3),
       st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_parse_metric_returns_the_last_metric_line(blocks, tail, newline, final_newline):
    lines = []
    for noise, (line, _) in blocks:
        lines += [*noise, line]
    lines += tail
    stdout = newline.join(lines) + (newline if final_newline else "")
    expected = blocks[-1][1][1]
    assert parse_metric(stdout) == expected


@FAST
@given(st.lists(st.one_of(noise_line, st.sampled_from(MALFORMED)), max_size=8))
def test_parse_metric_ignores_malformed_lines(lines):
    assert parse_metric("\n".join(lines)) is None


NON_FINITE = ["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "-Infinity", "1e999", "-1e999"]


@FAST
@given(st.lists(noise_line, max_size=3), st.sampled_from(NON_FINITE), label, space)
def test_non_finite_metric_is_flagged_not_kept(noise, text, lab, sp):
    stdout = "\n".join([*noise, f"{lab}{sp}{text}"])
    value = parse_metric(stdout)
    assert value is not None and not math.isfinite(value)
    outcome = decide_review(ExecutionResult(stdout=stdout), None, [])
    assert outcome.metric_value is None and outcome.is_buggy
    assert any("not finite" in r for r in outcome.reasons)


@FAST
@given(st.text(max_size=200), st.text(max_size=40))
def test_parse_metric_never_raises(text, after_label):
    for stdout in (text, "Validation metric: " + after_label, text + "\nValidation metric:" + after_label):
        value = parse_metric(stdout)
        assert value is None or isinstance(value, float)


# ================================================================================ submissions
# Graders: "accuracy" (label: no value checks) and "mean-absolute-error" (regression: numbers).
column_name = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


@st.composite
def samples(draw):
    """``(sample, id_column, target_columns, grader, numeric_ids)``: unique ids, 1-3 targets."""
    names = draw(st.lists(column_name, min_size=2, max_size=4, unique=True))
    id_column, targets = names[0], names[1:]
    numeric_ids = draw(st.booleans())
    if numeric_ids:
        ids = draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=12, unique=True))
    else:  # a letter first: never read back as a number, bool or NaN
        ids = [f"r{s}" for s in draw(st.lists(st.text("abcxyz0189", max_size=4), min_size=1, max_size=12,
                                              unique=True))]
    grader = draw(st.sampled_from(["accuracy", "mean-absolute-error"]))
    frame = {id_column: ids}
    for t in targets:
        if grader == "accuracy":
            frame[t] = draw(st.lists(st.sampled_from(["cat", "dog", "yes"]), min_size=len(ids), max_size=len(ids)))
        else:
            frame[t] = draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=len(ids), max_size=len(ids)))
    return pd.DataFrame(frame), id_column, targets, grader, numeric_ids


# Mutations that keep a submission valid, and ones that each make it invalid on their own.
# An extra column is ignored by these graders, as MLE-bench's ignore it (issue 14).
PRESERVING = ["shuffle_rows", "shuffle_columns", "ids_as_float", "add_column"]
BREAKING = ["drop_row", "duplicate_row", "foreign_id", "rename_column", "drop_column",
            "nan_target", "text_in_numeric_target"]


def mutate(draw, sub: pd.DataFrame, name: str, id_column: str, targets: list[str], grader: str, numeric_ids: bool):
    """Apply mutation ``name``; return the new frame, or None when it does not apply here."""
    n = len(sub)
    if name == "shuffle_rows":
        return sub.sample(frac=1.0, random_state=draw(st.integers(0, 2**16))).reset_index(drop=True)
    if name == "shuffle_columns":
        return sub[draw(st.permutations(list(sub.columns)))]
    if name == "ids_as_float":
        if not numeric_ids:
            return None
        sub = sub.copy()
        sub[id_column] = sub[id_column].astype(float)  # written as "7.0": still id 7
        return sub
    row = draw(st.integers(0, n - 1))
    if name == "drop_row":
        return sub.drop(index=sub.index[row]).reset_index(drop=True)
    if name == "duplicate_row":
        return pd.concat([sub, sub.iloc[[row]]], ignore_index=True)
    if name == "foreign_id":
        sub = sub.copy()
        sub[id_column] = sub[id_column].astype(object)
        sub.loc[sub.index[row], id_column] = "zz-not-an-id"
        return sub
    if name == "rename_column":
        column = draw(st.sampled_from([id_column, *targets]))
        return sub.rename(columns={column: column + "_x"})
    if name == "add_column":
        return sub.assign(**{"extra_" + id_column: 1})
    if name == "drop_column":
        return sub.drop(columns=[draw(st.sampled_from([id_column, *targets]))])
    if name == "nan_target":
        sub = sub.copy()
        column = draw(st.sampled_from(targets))
        sub[column] = sub[column].astype(object)
        sub.loc[sub.index[row], column] = None
        return sub
    if name == "text_in_numeric_target":
        if grader != "mean-absolute-error":
            return None  # labels may be any text: not a break for a label grader
        sub = sub.copy()
        column = draw(st.sampled_from(targets))
        sub[column] = sub[column].astype(object)
        sub.loc[sub.index[row], column] = "oops"
        return sub
    raise AssertionError(name)


def competition_for(tmp: Path, sample: pd.DataFrame, id_column: str, targets: list[str], grader: str) -> Competition:
    sample_path = tmp / "sample_submission.csv"
    sample.to_csv(sample_path, index=False)
    return Competition(
        id="prop", name="prop", grader_name=grader, data_dir=tmp, public_dir=tmp, private_dir=tmp,
        answers_path=tmp / "answers.csv", sample_submission_path=sample_path,
        id_column=id_column, target_columns=targets,
    )


@FILES
@given(samples(), st.lists(st.sampled_from(PRESERVING), max_size=3), st.sampled_from([None, *BREAKING]), st.data())
def test_validator_accepts_exactly_the_valid_submissions(case, preserving, breaking, data):
    sample, id_column, targets, grader, numeric_ids = case
    sub = sample.copy()
    for name in preserving:
        sub = mutate(data.draw, sub, name, id_column, targets, grader, numeric_ids)
        assume(sub is not None)
    if breaking is not None:
        sub = mutate(data.draw, sub, breaking, id_column, targets, grader, numeric_ids)
        assume(sub is not None)
    with tempfile.TemporaryDirectory() as tmp:
        comp = competition_for(Path(tmp), sample, id_column, targets, grader)
        path = Path(tmp) / "submission.csv"
        sub.to_csv(path, index=False)
        errors = validate_submission(path, comp)
    assert isinstance(errors, list) and all(isinstance(e, str) for e in errors)
    if breaking is None:
        assert errors == [], (preserving, errors)
    else:
        assert errors, (preserving, breaking, sub)


@FILES
@given(samples(), st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_validator_never_raises_on_garbage(case, content):
    sample, id_column, targets, grader, _ = case
    with tempfile.TemporaryDirectory() as tmp:
        comp = competition_for(Path(tmp), sample, id_column, targets, grader)
        path = Path(tmp) / "submission.csv"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        errors = validate_submission(path, comp)
    assert isinstance(errors, list) and all(isinstance(e, str) for e in errors)
