"""Bounded prompt texts, the per-run prompt budget and Kaggle boilerplate (issue 13, item 2)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from swarm_evo.competition.description import is_boilerplate_heading, prompt_description
from swarm_evo.prompting.text_bounds import (
    DEFAULT_CONTEXT_WINDOW,
    ITEM_OVERHEAD,
    PROMPT_PARTS,
    TERM_OUT_CAP,
    PromptLimits,
    bound_items,
    bound_join,
    bound_text,
    context_window_tokens,
    fit_lines,
    prompt_limits,
)

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MARKER = re.compile(r"^\[\.\.\. ([\d,]+) characters of (\w[\w ]*) cut: showing the first ([\d,]+) and the last ([\d,]+) \.\.\.\]$")


def _num(text: str) -> int:
    return int(text.replace(",", ""))


# --------------------------------------------------------------------------- bound_text
def test_a_text_that_fits_is_unchanged():
    assert bound_text("abc\n", 4) == "abc\n"
    assert bound_text("", 0) == "" and bound_text(None, 10) == ""


def test_a_long_output_keeps_head_and_tail_around_one_marker():
    lines = [f"epoch {i:07d} loss 0.{i % 997:03d}" for i in range(100_000)]
    text = "\n".join(lines) + "\nTraceback (most recent call last):\nValueError: boom\n"
    out = bound_text(text, 8_000)
    assert len(out) <= 8_000
    (marker,) = [line for line in out.splitlines() if line.startswith("[...")]
    cut, what, head, tail = MARKER.match(marker).groups()
    assert what == "output"
    assert _num(cut) + _num(head) + _num(tail) == len(text)
    assert out.endswith("ValueError: boom\n") and out.startswith("epoch 0000000 loss")
    assert _num(tail) > 2 * _num(head)  # tail-weighted: errors are at the end
    # lines are not split at the cut
    body = [line for line in out.splitlines() if not line.startswith("[...")]
    assert all(re.fullmatch(r"epoch \d{7} loss 0\.\d{3}", l) or not l.startswith("epoch") for l in body)


def test_bounds_hold_for_any_size():
    text = "x" * 50_000
    for limit in (0, 1, 50, 119, 120, 200, 1_000, 49_999):
        out = bound_text(text, limit, what="code")
        assert len(out) <= limit
    assert "characters of code cut" in bound_text(text, 1_000, what="code")
    with pytest.raises(ValueError):
        bound_text("x", -1)
    with pytest.raises(ValueError):
        bound_text("xx", 1, head_share=2)


def test_bound_items_keeps_order_and_counts_what_is_cut():
    items = ["a" * 5_000, "b" * 100, "c" * 3_000, "d"]
    out = bound_items(items, 2_000, 4_000)
    assert len(out[0]) <= 2_000 and out[1] == "b" * 100
    assert out[-1] == "[... 2 more problems cut ...]"
    assert bound_items(None, 10, 10) == [] and bound_items(["x", "y"], 10, 10) == ["x", "y"]


def test_bound_items_counts_each_bullet_and_the_marker_within_the_total():
    items = [f"problem {i}: " + "x" * 40 for i in range(200)]
    for total in range(0, 3_000, 37):
        out = bound_items(items, 60, total)
        assert sum(len(i) + ITEM_OVERHEAD for i in out) <= total, total
        if out and len(out) < len(items):
            assert re.fullmatch(r"\[\.\.\. \d+ more problems cut \.\.\.\]", out[-1])
            assert int(out[-1].split()[1]) == len(items) - len(out) + 1
    assert bound_items(items, 60, 0) == []


def test_fit_lines_keeps_whole_lines_the_best_or_the_newest():
    block = "".join(f"- item {i}\n" for i in range(100))
    head = fit_lines(block, 100, "examples")
    assert head.startswith("- item 0\n- item 1\n") and head.endswith(" more examples cut ...]\n")
    tail = fit_lines(block, 100, "approaches", "tail")
    assert tail.startswith("[... ") and " earlier approaches cut ...]\n" in tail and tail.endswith("- item 99\n")
    for text in (block, block.rstrip("\n"), "one very long line " * 50):
        for keep in ("head", "tail"):
            for limit in range(0, 400, 7):
                out = fit_lines(text, limit, keep=keep)
                assert len(out) <= limit, (keep, limit)
                kept = [line for line in out.splitlines() if line.startswith("- item")]
                assert all(line in block.splitlines() for line in kept)  # no line is split
    assert fit_lines(block, None) == block == fit_lines(block, len(block))
    with pytest.raises(ValueError):
        fit_lines(block, 10, keep="middle")


def test_bound_join_names_what_it_leaves_out():
    columns = [f"target_{i}" for i in range(1_000)]
    assert bound_join(columns[:2], 100, "target columns") == "`target_0`, `target_1`"
    out = bound_join(columns, 200, "target columns")
    assert len(out) <= 200 and out.startswith("`target_0`, `target_1`, ")
    assert out.endswith(f"... and {1_000 - out.count('`') // 2} more target columns")
    assert bound_join(columns, 0) == "" and bound_join([], 10) == ""


def test_scaled_limits_shrink_every_part_by_one_factor():
    limits = PromptLimits.for_context_window(8_192)
    half = limits.scaled(0.5)
    assert all(getattr(half, p) == int(getattr(limits, p) * 0.5) for p in PROMPT_PARTS)
    assert half.prompt_chars == limits.prompt_chars and half.item <= half.items
    assert limits.scaled(1.0) == limits
    with pytest.raises(ValueError):
        limits.scaled(1.5)


# --------------------------------------------------------------------------- limits
def test_limits_follow_the_context_window():
    small, default, huge = (PromptLimits.for_context_window(t) for t in (8_192, 32_768, 1_000_000))
    assert default.prompt_chars == int(32_768 * 0.75 * 3.5)
    assert small.prompt_chars < default.prompt_chars < huge.prompt_chars
    assert small.term_out < default.term_out <= TERM_OUT_CAP and huge.term_out == TERM_OUT_CAP
    assert huge.data_preview == 8_000
    # a 128K window shows what the templates showed before issue 31 (their fixed bounds)
    big = PromptLimits.for_context_window(131_072)
    assert (big.agent_text, big.history, big.evolution_log, big.experience, big.evolve_texts // 8) == (
        4_000, 14_000, 14_000, 8_000, 6_000)
    for limits in (small, default):
        # a merge prompt's bounded parts fit its budget with room for the fixed text
        parts = limits.code + limits.genes + limits.parent_output + limits.description + limits.data_preview
        assert parts + limits.items + limits.packages < 0.85 * limits.prompt_chars
    # max_tokens reserves the reply (at most half the window)
    assert PromptLimits.for_context_window(32_768, reply_tokens=4_096).prompt_chars == int((32_768 - 4_096) * 3.5)
    assert PromptLimits.for_context_window(32_768, reply_tokens=10**6).reply_tokens == 16_384
    with pytest.raises(ValueError):
        PromptLimits.for_context_window(0)


def test_context_window_comes_from_config_then_litellm_then_the_default():
    assert context_window_tokens("offline") == DEFAULT_CONTEXT_WINDOW
    assert context_window_tokens("openai/my-local-model") == DEFAULT_CONTEXT_WINDOW  # litellm: unknown
    assert context_window_tokens("gpt-4o") > DEFAULT_CONTEXT_WINDOW  # litellm knows it
    assert context_window_tokens("gpt-4o", 8_192) == 8_192
    model = SimpleNamespace(name="offline", context_window=16_384, max_tokens=None)
    assert prompt_limits(model) == PromptLimits.for_context_window(16_384)
    assert prompt_limits(SimpleNamespace(name="offline")) == PromptLimits.for_context_window(DEFAULT_CONTEXT_WINDOW)


# --------------------------------------------------------------------------- descriptions
@pytest.mark.parametrize("heading", ["Frequently Asked Questions", "FAQ", "Prizes", "Kernels Prizes", "Timeline",
                                     "Citation", "Acknowledgments", "Acknowledgements", "Teams", "Getting Help",
                                     "How do I contact Support?", "Eligibility", "Discussion Prizes"])
def test_boilerplate_headings(heading):
    assert is_boilerplate_heading(heading)


@pytest.mark.parametrize("heading", ["Overview", "Description", "Evaluation", "Metric", "Submission Format",
                                     "Submission File", "Dataset Description", "Data fields", "File descriptions"])
def test_headings_that_stay(heading):
    assert not is_boilerplate_heading(heading)


def test_spaceship_description_loses_its_faq_and_keeps_the_task():
    raw = (SHARED_DATA / "spaceship-titanic" / "description.md").read_text()
    text = prompt_description(raw)
    assert len(raw) - len(text) > 3_500
    for gone in ("Frequently Asked Questions", "What are Notebooks", "contact Support", "Acknowledgments",
                 "unsplash", "Why did my team disappear"):
        assert gone not in text
    for kept in ("## Description", "## Evaluation", "### Submission Format", "PassengerId,Transported",
                 "# Dataset Description", "The target. For each passenger"):
        assert kept in text


def test_spooky_description_loses_prizes_timeline_and_citation():
    raw = (SHARED_DATA / "spooky-author-identification" / "description.md").read_text()
    text = prompt_description(raw)
    for gone in ("## Prizes", "Total prize pool", "## Timeline", "## Citation", "Getting Started",
                 "A reminder about playground competitions"):
        assert gone not in text
    for kept in ("multi-class logarithmic loss", "id,EAP,HPL,MWS", "## Data fields"):
        assert kept in text


def test_headings_inside_fences_are_not_sections():
    md = "# Evaluation\n```\n# FAQ\nid,target\n```\n## FAQ\nask us\n## Data\nrows\n"
    assert prompt_description(md) == "# Evaluation\n```\n# FAQ\nid,target\n```\n## Data\nrows"
    assert prompt_description("") == ""
    assert prompt_description("# Overview\n## Prizes\nmoney\n##### Deep\ntext", demote=2) == "### Overview"
    assert prompt_description("# Overview\nx\n##### Deep\ntext", demote=2) == "### Overview\nx\n###### Deep\ntext"
