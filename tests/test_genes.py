"""Genes (SPEC §8): markers, parse/render round trip, gene_id normalisation, stub rule."""

from __future__ import annotations

import re

import pytest

from swarm_evo.population import genes as G

STUB = "# Not applicable — handled by the model.\n"


def program(**overrides: str) -> str:
    """A 7-locus program; each locus gets real code unless overridden."""
    body = {
        "DATA": "df = pd.read_csv('input/train.csv')\nX, y = df.drop(columns=['t']), df['t']\n",
        "MODEL": "model = RandomForestClassifier(n_estimators=300, random_state=0)\n",
        "LOSS": STUB,
        "OPTIMIZER": STUB,
        "REGULARIZATION": "model.set_params(max_depth=8, min_samples_leaf=3)\n",
        "INITIALIZATION": STUB,
        "TRAINING_TRICKS": "scores = cross_val_score(model, X, y, cv=5)\nprint(f'Validation metric: {scores.mean()}')\n",
    }
    body.update(overrides)
    head = "import pandas as pd\nfrom sklearn.ensemble import RandomForestClassifier\n\n"
    return head + "".join(f"# [SECTION: {l}]\n{body[l]}" for l in G.LOCI)


def test_parse_finds_all_loci_in_order_and_keeps_preamble():
    code = program()
    preamble, genes = G.split_program(code)
    assert list(genes) == list(G.LOCI)
    assert preamble.startswith("import pandas as pd")
    assert genes["MODEL"] == "model = RandomForestClassifier(n_estimators=300, random_state=0)\n"
    assert genes["LOSS"] == STUB
    assert G.parse_genes(code) == genes


def test_render_split_round_trip():
    code = program()
    assert G.render_program(*G.split_program(code)) == code
    # last gene without trailing newline survives too
    code2 = "# [SECTION: DATA]\na = 1\n# [SECTION: MODEL]\nb = 2"
    assert G.render_program(*G.split_program(code2)) == code2


def test_render_in_given_loci_order_adds_missing_newlines():
    text = G.render_program("import x\n", {"MODEL": "m = 1", "DATA": "d = 1"}, loci=["DATA", "MODEL"])
    assert text == "import x\n# [SECTION: DATA]\nd = 1\n# [SECTION: MODEL]\nm = 1"
    assert G.parse_genes(text) == {"DATA": "d = 1\n", "MODEL": "m = 1"}


def test_replace_gene_changes_only_that_gene():
    code = program()
    new = G.replace_gene(code, "MODEL", "model = LogisticRegression(C=0.5, max_iter=1000)\n")
    before, after = G.parse_genes(code), G.parse_genes(new)
    assert after["MODEL"].startswith("model = LogisticRegression")
    assert {k: v for k, v in after.items() if k != "MODEL"} == {
        k: v for k, v in before.items() if k != "MODEL"
    }
    assert G.split_program(new)[0] == G.split_program(code)[0]
    with pytest.raises(KeyError):
        G.replace_gene("x = 1\n", "MODEL", "y")


def test_marker_variants_and_repeated_marker():
    code = "#[SECTION:DATA]\nd = 1\n  # [SECTION: MODEL]  \nm = 1\n# [SECTION: DATA]\nmore = 2\n"
    genes = G.parse_genes(code)
    assert list(genes) == ["DATA", "MODEL"]
    # first occurrence wins; the repeated marker stays inside the preceding gene
    assert "# [SECTION: DATA]" in genes["MODEL"]


def test_crlf_markers_are_recognised():
    code = program().replace("\n", "\r\n")
    genes = G.parse_genes(code)
    assert list(genes) == list(G.LOCI)
    assert G.gene_id(genes["MODEL"]) == G.gene_id(G.parse_genes(program())["MODEL"])


def test_no_markers_means_no_genes():
    assert G.split_program("print(1)\n") == ("print(1)\n", {})


@pytest.mark.parametrize(
    "variant",
    [
        "a = 1\r\nb = 2\r\n",  # CRLF
        "a = 1   \nb = 2\t\n",  # trailing spaces
        "a = 1\n\n\n\nb = 2\n",  # blank lines collapse to one
        "\n\na = 1\nb = 2\n\n\n",  # leading/trailing blank lines
        "a = 1\rb = 2",  # old Mac CR
    ],
)
def test_gene_id_normalisation(variant):
    base = G.gene_id("a = 1\nb = 2\n")
    if "\n\n\n\n" in variant:
        assert G.gene_id(variant) == G.gene_id("a = 1\n\nb = 2\n")
    else:
        assert G.gene_id(variant) == base


def test_gene_id_format_and_sensitivity():
    gid = G.gene_id("x = 1\n")
    assert re.fullmatch(r"[0-9a-f]{12}", gid)
    assert G.gene_id("x = 2\n") != gid
    assert G.gene_id("    x = 1\n") != gid  # indentation is code


def test_stub_rule_counts_code_characters_only():
    # the seeds' rule len(text.strip()) < 20 would call this real code
    assert len(STUB.strip()) >= 20
    assert G.is_stub(STUB)
    assert G.is_stub("# one\n# two\n\n   # three that is a long comment line\n")
    assert G.is_stub("pass\n")
    assert G.is_stub(None) and G.is_stub("")
    assert not G.is_stub("model = Ridge(alpha=1.0)  # comment\n")
    assert G.code_chars("a = 1  # c\n") == 3
    assert not G.is_stub("abc", threshold=3) and G.is_stub("ab", threshold=3)


def test_validate_genes():
    assert G.validate_genes(G.parse_genes(program()))
    # stubs at optional loci are fine
    assert G.validate_genes(G.parse_genes(program(REGULARIZATION=STUB, TRAINING_TRICKS=STUB)))
    # DATA or MODEL stub -> invalid
    assert not G.validate_genes(G.parse_genes(program(MODEL=STUB)))
    assert not G.validate_genes(G.parse_genes(program(DATA="pass\n")))
    # a missing marker -> invalid
    genes = G.parse_genes(program())
    del genes["LOSS"]
    assert not G.validate_genes(genes)


def test_non_stub_loci():
    genes = G.parse_genes(program())
    assert G.non_stub_loci(genes) == ["DATA", "MODEL", "REGULARIZATION", "TRAINING_TRICKS"]
    assert G.non_stub_loci({"DATA": STUB}) == []
