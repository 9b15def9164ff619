"""Every prompt fits the model's context window, whatever its inputs (issue 31, item 5).

For a competition (spaceship-titanic) and a problem (circle-packing), every template under
``prompt_templates/`` is rendered through the code that renders it in a run, with every input
at its maximum: agent texts far longer than any bound, a journal of 60 nodes (a full draft
history, a full evolution log: recent changes, ten constraints, unexplored directions), 100
experience examples per operation, programs and outputs of hundreds of kilobytes, hundreds of
errors, metrics and target columns, a huge data preview, description and package list, a huge
auxiliary-metrics sample output. Each prompt must stay within ``limits.prompt_chars`` for 8K,
16K and 128K-token windows. A window too small for the prompts' fixed text is refused at start
with exit 2 naming ``model.context_window``.
"""

from __future__ import annotations

import pytest

from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.search.debug_chain import Attempt
from swarm_evo.llm import client
from swarm_evo.prompting.prompts import templates_dir
from swarm_evo.sandbox import ExecutionResult
from swarm_evo.run.session import RunSession
from swarm_evo.step import generation, operations, review_call
from swarm_evo.prompting.text_bounds import prompt_limits
from test_prompts_render import _append, _open, search_prompts

TEMPLATES = sorted(p.name for p in templates_dir().glob("*.j2"))
WINDOWS = (8_192, 16_384, 131_072)
BIG = 200_000  # characters: more than any bound of a 128K window


def _lines(prefix: str, chars: int, width: int = 90) -> str:
    """About ``chars`` characters of distinct whole lines: ``<prefix> 000001 xxxx...``."""
    return "".join(f"{prefix} {i:06d} " + "x" * (width - len(prefix) - 9) + "\n" for i in range(chars // width + 1))


def _program(loci, chars: int, version: int = 0) -> str:
    """A program of about ``chars`` characters, every section's code distinct per ``version``."""
    per = chars // len(loci)
    return "import numpy as np\n" + "".join(
        f"# [SECTION: {locus}]\n{_lines(f'v{version} = {version}  #', per)}" for locus in loci)


def _maximise(session, mp: pytest.MonkeyPatch) -> None:
    """Every input of every prompt at its maximum (see the module docstring)."""
    objective = session.objective
    view = dict(objective.prompt_view())
    view.update(description=_lines("Description line", BIG), name=view["name"])
    if objective.kind == "competition":
        view["target_columns"] = [f"target_column_with_a_long_name_{i:05d}" for i in range(3_000)]
        mp.setattr(objective, "data_preview", lambda: _lines("preview", BIG))
    else:
        view["initial_program"] = _program(session.loci, BIG)
    mp.setattr(objective, "prompt_view", lambda: view)
    mp.setattr(RunSession, "packages", property(lambda s: ", ".join(f"package{i}==1.{i}" for i in range(20_000))))
    errors = [f"error {i}: " + "e" * 3_000 for i in range(500)]
    mp.setattr(objective, "static_check", lambda code: list(errors))
    mp.setattr(objective, "review_facts", lambda final, workdir: (list(errors), None))
    mp.setattr(operations, "check_merge_compatibility", lambda *a, **k: [f"warning {i}: " + "w" * 3_000 for i in range(500)])
    session.config.agents.experience_top_k = 100
    for agent_id in session.agents.ids:
        texts = {k: _lines(f"{agent_id} {k} text", 30_000) for k in ("role", "draft", "merge", "mutate")}
        session.agents.rewrite(agent_id, texts, evolved_from=agent_id, evolution=1)
    loci = list(session.loci)
    evaluation = {"correct": True, "combined_score": 0.5, "error": None,
                  "public_metrics": {f"public_metric_{i}": i / 7 for i in range(1_000)},
                  "auxiliary_metrics": {f"auxiliary_metric_{i}": i / 3 for i in range(1_000)}}
    agents = session.agents.ids
    for i in range(60):
        valid = i % 3 != 2
        tag = f"approach {i}: " + "gradient boosting with many engineered features " * 10
        plan = f"Plan {i}. " + "Train a model with cross-validation and careful features. " * 50
        kw = dict(approach_tag=tag, plan=plan, agent_id=agents[i % len(agents)], operation=("draft", "merge", "mutate")[i % 3],
                  code=_program(loci, 50_000, version=i), term_out=_lines("log", BIG), analysis=_lines("analysis", 50_000))
        if valid:  # saved once below: 60 saves of a growing journal of 60 maximal nodes took ≈ 10 s
            _append(session, save=False, metric=0.5 + i / 1000, metadata={"evaluation": evaluation}, **kw)
        else:
            _append(session, save=False, metric=None, is_buggy=True, exc_type=f"Error{i % 13}Kind",
                    exc_info=f"Error{i % 13}Kind: " + "bad value " * 100, **kw)
    session.journal.save()


@pytest.fixture(scope="module", params=["competition", "problem"])
def maxed(request, tmp_path_factory):
    """A run session whose every prompt input is at its maximum."""
    session = _open(tmp_path_factory.mktemp(request.param), competition=request.param == "competition")
    with pytest.MonkeyPatch.context() as mp:
        _maximise(session, mp)
        yield session, mp


def _render_all(session, mp: pytest.MonkeyPatch, slot: int) -> dict[str, str]:
    """``{template: prompt}`` through the functions a run renders them with."""
    from swarm_evo.step import problem_setup
    from swarm_evo.step.evolve_agents import evolve_agents

    prompts = search_prompts(session, slot)
    code = _program(list(session.loci), BIG)
    term_out = _lines("train", 2_000_000)
    problems = [f"problem {i}: " + "p" * 3_000 for i in range(500)]
    prompts["debug.j2"], _ = generation.debug_prompt(session, slot, "k", 1, 2, code, term_out, "MemoryError", problems)
    node_id = f"budget{slot}"
    generation.prevalidate(session, node_id, slot, "fix", generation.Generated(plan="p", code=code, usage=client.LLMUsage()))
    prompts["fix.j2"] = (session.node_dir(node_id) / "prompt-fix.md").read_text()
    result = ExecutionResult(stdout=term_out, term_out=term_out, exit_code=1, exc_type="ValueError", exc_info="boom")
    evaluation = {"correct": False, "combined_score": 0.0, "error": "e" * 50_000,
                  "public_metrics": {f"public_metric_{i}": i for i in range(1_000)},
                  "auxiliary_metrics": {f"auxiliary_metric_{i}": i for i in range(1_000)}}
    final = Attempt(code=code, result=result, problems=["ValueError: boom"], evaluation=evaluation)
    review_call.review_program(session, node_id, slot, final)
    prompts["review.j2"] = (session.node_dir(node_id) / "prompt-review.md").read_text()

    def ask(prompt, ctx):
        raise RuntimeError("no model in this test")

    record = evolve_agents(session, epoch=slot, ask=ask)
    prompts["evolve_agent.j2"] = (session.run_dir / "agent_evolutions" / f"evolution-{record.index}"
                                  / f"prompt-{record.rewrites[0].agent_id}.md").read_text()
    if session.objective.kind == "problem":
        import numpy as np

        output = {f"output_key_{i:05d}_with_a_long_name": ("s" * 10_000 if i % 2 else np.zeros((50, 50)))
                  for i in range(2_000)}
        mp.setattr(problem_setup, "load_program_output", lambda path: output)
        mp.setattr(problem_setup, "complete_code", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no model")))
        (session.run_dir / problem_setup.AUXILIARY_RECORD).unlink(missing_ok=True)
        problem_setup.write_auxiliary_metrics(session)
        prompts["auxiliary_metrics.j2"] = (session.run_dir / "prompt-auxiliary_metrics.md").read_text()
    return prompts


@pytest.mark.parametrize("window", WINDOWS)
def test_every_prompt_fits_the_window_with_every_input_at_its_maximum(maxed, window):
    session, mp = maxed
    session.config.model.context_window = window
    limits = prompt_limits(session.config.model)
    prompts = _render_all(session, mp, slot=window)
    expected = [t for t in TEMPLATES if session.objective.kind == "problem" or t != "auxiliary_metrics.j2"]
    assert sorted(prompts) == expected, "a template is not covered by this test"
    sizes = {name: len(text) for name, text in prompts.items()}
    over = {name: size for name, size in sizes.items() if size > limits.prompt_chars}
    assert not over, f"over the {limits.prompt_chars:,} characters of a {window:,}-token window: {over}"
    # what is cut is said, and the most useful part is kept
    draft = prompts["draft.j2"]
    assert "approach 59:" in draft, "the newest draft history entry is kept"
    assert "cut" in draft


def test_a_window_too_small_for_the_fixed_text_is_refused_at_start(tmp_path, capsys):
    from swarm_evo.cli.commands import main

    config = tmp_path / "config.yaml"
    config.write_text("model:\n  context_window: 1024\n")
    code = main(["run", "--problem", "circle-packing", "--config", str(config), "--run-dir", str(tmp_path / "run"),
                 "--max-steps", "1", "--time-limit", "30"])  # short, should the check be missing
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "model.context_window" in err and "1024" in err.replace(",", "")
    assert not (tmp_path / "run").exists(), "refused before anything is written"


def test_the_default_windows_pass_the_start_check():
    from swarm_evo.objective.load import load_objective
    from swarm_evo.run.prompt_budget import check_prompt_window

    objective = load_objective(None, "circle-packing", None, None, None)
    for window in (None, 8_192):
        check_prompt_window(RunConfig().with_overrides({"model.context_window": window}), objective)
    with pytest.raises(ConfigError, match="model.context_window"):
        check_prompt_window(RunConfig().with_overrides({"model.context_window": 1024}), objective)
