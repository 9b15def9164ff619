"""Every prompt template renders soundly, from the real step functions (issue 13, item 2).

For a competition (spaceship-titanic, prepared from ../shared with its real Kaggle
description) and for a problem (circle-packing), each template in ``prompt_templates/`` is
rendered the way a run renders it, and the text is checked: fences open and close at line
starts, no line is glued to a fence, every section marker of the output format is on its own
line, no Jinja syntax is left, no runs of blank lines. Then the content rules: Kaggle
boilerplate is gone, debug and fix prompts carry the task and the data preview, the draft
history shows failed approaches, merge prompts do not warn about the scaffold's own stubs,
and a program that printed 2 MB gets a debug prompt within the model's bound.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swarm_evo.run import model_context
from swarm_evo.population import genes as G
from swarm_evo.config import RunConfig
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.llm import client
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.prompting.prompts import render, templates_dir
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.step import generation, operations, review_call
from swarm_evo.step.request import release_request
from swarm_evo.prompting.text_bounds import PromptLimits, prompt_limits
from factories import make_node

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

TEMPLATES = sorted(p.name for p in templates_dir().glob("*.j2"))
FENCE_LINE = re.compile(r"^```[\w+-]*$")
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "solution.py", line 88, in <module>\n'
    "    model.fit(X, y)\n"
    "ValueError: Input X contains NaN.\n"
)


# --------------------------------------------------------------------------- checks
def check_prompt(text: str, loci: list[str] | None = None) -> None:
    """The structural rules every rendered prompt must keep."""
    assert "{{" not in text and "{%" not in text and "{#" not in text, "Jinja syntax left in the prompt"
    assert "\n\n\n\n" not in text, "3+ consecutive blank lines"
    lines = text.splitlines()
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    assert len(fences) % 2 == 0, f"unbalanced fences at lines {fences}"
    for k, i in enumerate(fences):
        line = lines[i]
        if k % 2 == 0:
            assert FENCE_LINE.match(line), f"line {i + 1} opens a fence with text glued to it: {line!r}"
        else:
            assert line == "```", f"line {i + 1} closes a fence with text glued to it: {line!r}"
    for i, line in enumerate(lines):
        if "```" in line and not line.startswith("```"):
            # inline mentions such as "(```python ... ```)" hold both fences on one line
            assert line.count("```") % 2 == 0, f"line {i + 1} is glued to a fence: {line!r}"
    if loci is not None:
        for locus in loci:
            assert f"`# [SECTION: {locus}]`" in lines, f"marker of {locus} not on its own line"


# --------------------------------------------------------------------------- sessions
def _open(tmp: Path, *, competition: bool, **overrides):
    from swarm_evo.competition import prepare_competition
    from swarm_evo.run.session import open_session

    config = RunConfig().with_overrides({"search.max_steps": 60, "agents.evolution_min_records": 0,
                                         "agents.evolution_interval": 1, **overrides})
    endpoint = endpoint_for(config.model)
    if competition:
        prepare_competition("spaceship-titanic", SHARED_DATA / "spaceship-titanic" / "raw", tmp / "data")
        return open_session(competition_id="spaceship-titanic", data_dir=tmp / "data", run_dir=tmp / "run",
                            config=config, endpoint=endpoint)
    return open_session(problem="circle-packing", run_dir=tmp / "run", config=config, endpoint=endpoint)


def _program(loci, stub: str | None = None, alpha: int = 1, beta: int = 2) -> str:
    body = {locus: f"value_{locus.lower()} = compute_{locus.lower()}(alpha=1, beta=2)\n" for locus in loci}
    body[loci[0]] = f"value_{loci[0].lower()} = compute_{loci[0].lower()}(alpha={alpha}, beta=2)\n"
    body[loci[1]] = f"value_{loci[1].lower()} = compute_{loci[1].lower()}(alpha=1, beta={beta})\n"
    if stub:
        body[stub] = "# Not applicable — handled by the model.\n"
    return "import numpy as np\n" + "".join(f"# [SECTION: {locus}]\n{body[locus]}" for locus in loci)


def _append(session, save: bool = True, **kw):
    """Append a node as a step does (quality, experience record), without publishing files;
    ``save=False`` leaves the journal file to the caller (``session.journal.save()``)."""
    from swarm_evo.learning.experience import record_for
    from swarm_evo.learning.quality import node_quality

    node = make_node(lower_is_better=session.objective.is_lower_better, **kw)
    node.metadata["quality"] = node_quality(session.journal, node)
    session.journal.append(node, save=save)
    session.experience.add(record_for(node, node.metadata["quality"]))
    return node


def _populate(session) -> None:
    loci = list(session.loci)
    # both valid nodes leave the third locus 'Not applicable', so a merge's scaffold has that stub
    _append(session, metric=0.78, code=_program(loci, stub=loci[2]), approach_tag="LightGBM + 5-fold CV",
            plan="Train LightGBM with 5-fold CV.", agent_id="agent-1", term_out="fold 1: 0.78\nValidation metric: 0.78\n")
    # differs from the first at two loci, so a merge plan exists that rebuilds neither (issue 16)
    _append(session, metric=0.80, code=_program(loci, stub=loci[2], alpha=3, beta=5), approach_tag="unknown",
            plan="Use a random forest on engineered cabin features. Then tune it.", agent_id="agent-2",
            term_out="Validation metric: 0.80\n")
    _append(session, metric=None, is_buggy=True, dead=True, code=_program(loci), approach_tag="MLP on one-hot features",
            plan="An MLP.", agent_id="agent-3", exc_type="ValueError", term_out=TRACEBACK)
    _append(session, metric=None, is_buggy=True, code=_program(loci), approach_tag=None,
            plan="Stack a logistic regression over k-NN features.", agent_id="agent-4", exc_type="KeyError")


@pytest.fixture(scope="module")
def competition(tmp_path_factory):
    session = _open(tmp_path_factory.mktemp("competition"), competition=True)
    _populate(session)
    return session


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    session = _open(tmp_path_factory.mktemp("problem"), competition=False)
    _populate(session)
    return session


def _attempt(code: str, term_out: str, exc_type: str | None = None) -> Attempt:
    result = ExecutionResult(stdout=term_out, term_out=term_out, exit_code=1 if exc_type else 0,
                             exc_type=exc_type, exc_info=exc_type and f"{exc_type}: boom")
    return Attempt(code=code, result=result, problems=[f"{exc_type}: boom"] if exc_type else [])


def search_prompts(session, slot0: int) -> dict[str, str]:
    """``{template: prompt}`` of the draft, merge and mutate operations (slots ``slot0`` to
    ``slot0 + 2``), through the step functions a run selects them with."""
    config = session.config
    config.search.merge_probability = 1.0
    merge = operations.prepare_phase2(session, slot0)
    assert merge.template == "merge.j2"
    release_request(session, merge)
    config.search.merge_probability = 0.0
    mutate = operations.prepare_phase2(session, slot0 + 1)
    assert mutate.template == "mutate.j2"
    draft = operations.prepare_draft(session, slot0 + 2)
    return {"draft.j2": draft.prompt, "merge.j2": merge.prompt, "mutate.j2": mutate.prompt}


def render_all(session, slot0: int = 100) -> dict[str, str]:
    """``{template: rendered prompt}`` for every template, through the step functions."""
    from swarm_evo.step.evolve_agents import evolve_agents

    config = session.config
    prompts = search_prompts(session, slot0)
    code = session.journal.nodes[0].code
    prompts["debug.j2"], _ = generation.debug_prompt(session, slot0, "k", 1, 2, code, TRACEBACK, "ValueError",
                                               ["ValueError: Input X contains NaN.", "no metric line"])
    broken = code.replace("# [SECTION: ", "# [SECTON: ", 1)  # fails the static check
    node_id = "renderfix"
    generation.prevalidate(session, node_id, slot0, "fix", generation.Generated(plan="p", code=broken, usage=client.LLMUsage()))
    prompts["fix.j2"] = (session.node_dir(node_id) / "prompt-fix.md").read_text()
    review_call.review_program(session, node_id, slot0, _attempt(code, "fold 1\n" + TRACEBACK, "ValueError"))
    prompts["review.j2"] = (session.node_dir(node_id) / "prompt-review.md").read_text()

    def ask(prompt, ctx):
        raise RuntimeError("no model in this test")

    evolve_agents(session, epoch=1, ask=ask)
    evolution = sorted((session.run_dir / "agent_evolutions").glob("evolution-*/prompt-*.md"))
    assert evolution, "agent evolution wrote no prompt"
    prompts["evolve_agent.j2"] = evolution[-1].read_text()
    sample = {"centers": {"type": "ndarray", "shape": [26, 2], "dtype": "float64", "example": "[[0.1, 0.1], ...]"}}
    prompts["auxiliary_metrics.j2"] = render("auxiliary_metrics.j2", objective=session.objective.prompt_view(),
                                             sample_output=sample, timeout=10, limits=prompt_limits(config.model))
    return prompts


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("kind", ["competition", "problem"])
def test_every_template_renders_soundly(kind, request):
    session = request.getfixturevalue(kind)
    prompts = render_all(session)
    assert sorted(prompts) == TEMPLATES, "a template is not covered by this test"
    for name, text in prompts.items():
        with_markers = name in ("draft.j2", "merge.j2", "mutate.j2", "debug.j2", "fix.j2")
        try:
            check_prompt(text, list(session.loci) if with_markers else None)
        except AssertionError as exc:
            raise AssertionError(f"{kind} {name}: {exc}") from None
    for name in ("draft.j2", "merge.j2", "mutate.j2", "debug.j2", "fix.j2"):
        assert "# Task" in prompts[name], f"{name} has no task section"
    # the seeds' section order: role, output format, task, context, strategy, examples, guidelines
    draft = prompts["draft.j2"]
    order = [draft.index(h) for h in ("# Output format", "# Task", "# Context", "# Strategy", "# Guidelines")]
    assert order == sorted(order)


def test_review_fence_is_not_broken(competition):
    code = competition.journal.nodes[0].code
    for exc_type in (None, "ValueError"):
        prompt = render("review.j2", **model_context.prompt_context(competition), code=code, term_out="Validation metric: 0.8",
                        exc_type=exc_type, submission_errors=[], evaluation=None)
        check_prompt(prompt)
        heading = "## Execution output" + (" (ended with ValueError)" if exc_type else "")
        assert f"{heading}\n```\nValidation metric: 0.8\n```" in prompt


def test_competition_prompts_drop_kaggle_boilerplate_and_carry_the_task(competition):
    prompts = render_all(competition, slot0=200)
    raw = (SHARED_DATA / "spaceship-titanic" / "description.md").read_text()
    assert "Frequently Asked Questions" in raw
    for name in ("draft.j2", "merge.j2", "mutate.j2", "debug.j2", "fix.j2"):
        text = prompts[name]
        for gone in ("Frequently Asked Questions", "How do I contact Support", "Acknowledgments", "unsplash"):
            assert gone not in text, f"{name} still shows {gone!r}"
        for kept in ("## Evaluation", "Submission Format", "PassengerId,Transported", "# Dataset Description"):
            assert kept in text, f"{name} lost {kept!r}"
    for name in ("debug.j2", "fix.j2"):
        assert "## Data preview" in prompts[name] and "train.csv" in prompts[name]


def test_draft_history_shows_failed_approaches(competition):
    prompt = operations.prepare_draft(competition, 300).prompt
    history = prompt.split("## Approaches already tried")[1].split("Your solution MUST")[0]
    assert "LightGBM + 5-fold CV → metric=0.78" in history
    assert "MLP on one-hot features → failed" in history  # dead node
    assert "Stack a logistic regression over k-NN features → failed" in history  # buggy, no tag: its plan
    assert "Use a random forest on engineered cabin features → metric=0.8" in history  # tag "unknown"
    assert "unknown" not in history


def test_merge_prompt_does_not_warn_about_the_scaffold_s_own_stubs(competition):
    competition.config.search.merge_probability = 1.0
    merge = operations.prepare_phase2(competition, 400)
    release_request(competition, merge)
    scaffold = competition.journal.get(merge.parent_id)
    assert G.is_stub(scaffold.genes["LOSS"]), "the fixture's scaffold has a 'Not applicable' LOSS"
    assert "is empty: write it" not in merge.prompt
    assert merge.metadata["merge_warnings"] == [] and "## Compatibility warnings" not in merge.prompt


def test_a_2mb_output_gives_a_debug_prompt_within_the_bound(competition):
    code = competition.journal.nodes[0].code
    noise = "".join(f"[{i:06d}] train-logloss: 0.{i % 9973:04d} valid-logloss: 0.{i % 7919:04d}\n" for i in range(40_000))
    term_out = (noise * (2_000_000 // len(noise) + 1))[:2_000_000] + TRACEBACK
    assert len(term_out) > 2_000_000
    limits = prompt_limits(competition.config.model)
    prompt, ctx = generation.debug_prompt(competition, 500, "k", 1, 2, code, term_out, "ValueError", ["ValueError: boom"])
    assert len(prompt) < limits.prompt_chars, (len(prompt), limits.prompt_chars)
    assert len(prompt) < limits.term_out + 40_000
    assert re.search(r"\[\.\.\. [\d,]+ characters of output cut: showing the first [\d,]+ and the last [\d,]+ \.\.\.\]",
                     prompt)
    assert TRACEBACK.strip() in prompt, "the traceback (the output's tail) is kept"
    check_prompt(prompt, list(competition.loci))
    # the review of the same run is bounded too
    review_call.review_program(competition, "bigreview", 500, _attempt(code, term_out, "ValueError"))
    review = (competition.node_dir("bigreview") / "prompt-review.md").read_text()
    assert len(review) < limits.prompt_chars and "ValueError: Input X contains NaN." in review


def test_a_small_context_window_gives_smaller_prompts(tmp_path):
    session = _open(tmp_path, competition=True, **{"model.context_window": 8192})
    _populate(session)
    limits = prompt_limits(session.config.model)
    assert limits == PromptLimits.for_context_window(8192) and limits.prompt_chars == 21_504
    code = session.journal.nodes[0].code
    term_out = "x" * 2_000_000 + "\n" + TRACEBACK
    prompt, _ = generation.debug_prompt(session, 1, "k", 1, 2, code, term_out, "ValueError", ["boom"] * 500)
    assert len(prompt) < limits.prompt_chars and TRACEBACK.strip() in prompt
    assert "more problems cut" in prompt
    assert len(operations.prepare_draft(session, 2).prompt) < limits.prompt_chars


def test_output_format_markers_render_one_per_line():
    text = render("skills/output_format.j2", loci=list(G.LOCI))
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("`# [SECTION:")] == [f"`# [SECTION: {l}]`" for l in G.LOCI]
