"""The offline model sizes its programs' work to the time its prompt gives it (issue 33).

It reads the guidelines' budget lines ("Time remaining for the whole run: ...; this program may
run at most ...", "Steps remaining in the budget: ...") from the prompt the run renders and
caps folds, optuna trials and seconds, and boosting rounds (:mod:`swarm_evo.llm.offline.effort`).
A small share gives a smaller program; a large share (the default 12-hour limit) gives exactly
the program it wrote before.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import random  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import litellm  # noqa: E402
import pytest  # noqa: E402

from swarm_evo.population import genes as G  # noqa: E402
from swarm_evo.config import RunConfig  # noqa: E402
from swarm_evo.llm import offline  # noqa: E402
from swarm_evo.llm.endpoint import endpoint_for  # noqa: E402
from swarm_evo.llm.offline import effort, programs, repair  # noqa: E402
from swarm_evo.llm.offline.respond import respond  # noqa: E402
from swarm_evo.run.model_context import format_seconds  # noqa: E402
from swarm_evo.step import operations  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PACKAGES = {"numpy": "2.4.6", "pandas": "2.3.3", "scikit-learn": "1.7.2", "lightgbm": "4.7.0",
            "xgboost": "3.2.0", "catboost": "1.2.8", "optuna": "4.6.0"}
WORK = ("N_FOLDS", "OPTUNA_TRIALS", "OPTUNA_TIMEOUT", "N_ESTIMATORS", "MAX_ITER")


def _guidelines(left: float | None, limit: float, steps: int) -> str:
    return (f"# Guidelines\n- Time remaining for the whole run: {format_seconds(left)}; this program may "
            f"run at most {format_seconds(limit)}.\n- Steps remaining in the budget: {steps}.\n")


def _work(code: str) -> dict[str, int]:
    return {n: int(v) for n, v in re.findall(r"^([A-Z_]+) = (\d+)\s*$", code, re.M) if n in WORK}


def _code(reply) -> str:
    return re.search(r"```python\n(.*?)```", reply.content, re.S).group(1)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """spaceship-titanic sessions whose prompts state a 3-minute and a 12-hour run of 30 steps."""
    from swarm_evo.competition import prepare_competition
    from swarm_evo.run.session import open_session

    offline.register()
    data = tmp_path_factory.mktemp("data")
    prepare_competition("spaceship-titanic", SHARED_DATA / "spaceship-titanic" / "raw", data)
    out = {}
    for name, limit in (("short", 180.0), ("default", None)):
        overrides = {"search.max_steps": 30, **({"search.time_limit": limit} if limit else {})}
        config = RunConfig().with_overrides(overrides)
        out[name] = open_session(competition_id="spaceship-titanic", data_dir=data,
                                 run_dir=tmp_path_factory.mktemp(name), config=config,
                                 endpoint=endpoint_for(config.model))
    return out


def _ask(request) -> str:
    """The offline model's program for an operation request, asked as a run asks it."""
    return _ask_with(request, request.prompt)


def _ask_with(request, prompt: str) -> str:
    ctx = {**request.ctx, "packages": PACKAGES, "fault_rate": 0.0}
    reply = litellm.completion(model="offline/test", messages=[{"role": "user", "content": prompt}],
                               metadata={"swarm_evo": ctx}, num_retries=0)
    return re.search(r"```python\n(.*?)```", reply.choices[0].message.content, re.S).group(1)


# --------------------------------------------------------------------------- reading the prompt
def test_the_budget_lines_the_run_renders_are_read_back(sessions):
    prompt = operations.prepare_draft(sessions["short"], 1).prompt
    budget = effort.read_budget(prompt)
    assert 150 <= budget.time_left <= 180 and 150 <= budget.program_limit <= 180
    assert budget.steps_left == 30
    assert effort.from_prompt(prompt).name == "quick"
    default = effort.read_budget(operations.prepare_draft(sessions["default"], 1).prompt)
    assert default.time_left > 11 * 3600 and default.program_limit == 3600
    assert effort.from_prompt(operations.prepare_draft(sessions["default"], 1).prompt) is effort.FULL


def test_the_share_rule():
    assert effort.parse_duration("1h 05m") == 3900 and effort.parse_duration("2m 57s") == 177
    assert effort.parse_duration("42s") == 42 and effort.parse_duration("unlimited") is None
    # time left spread over this program and the steps after it, capped by the program's limit
    assert effort.share_seconds(effort.read_budget(_guidelines(290, 290, 28))) == pytest.approx(10)
    assert effort.share_seconds(effort.read_budget(_guidelines(None, 3600, 28))) == 3600
    assert effort.share_seconds(effort.read_budget(_guidelines(43_000, 30, 28))) == 30
    assert effort.share_seconds(effort.read_budget("no budget here")) is None
    names = [effort.from_prompt(_guidelines(left, 3600, 9)).name for left in (10, 200, 600, 2400, 43_000)]
    assert names == ["quick", "short", "long", "full", "full"]
    assert effort.from_prompt(None) is effort.FULL


# --------------------------------------------------------------------------- the programs
def test_a_small_time_share_gives_fewer_folds_trials_rounds_and_a_smaller_timeout(sessions):
    optuna_seen = 0
    for slot in range(1, 13):
        full = _ask(operations.prepare_draft(sessions["default"], slot))
        small = _ask(operations.prepare_draft(sessions["short"], slot))
        assert programs.approach_tag(full).split(" + ")[0] == programs.approach_tag(small).split(" + ")[0]
        big, little = _work(full), _work(small)
        assert big["N_FOLDS"] == 5 and little["N_FOLDS"] == 3
        if effort.model_name(small) in effort.FAST_MODELS:  # their rounds are not capped
            assert little.get("N_ESTIMATORS") == big.get("N_ESTIMATORS")
        else:
            assert little.get("N_ESTIMATORS", 250) <= 150 and little.get("MAX_ITER", 1000) <= 300
        if "OPTUNA_TRIALS" in big:
            optuna_seen += 1
            assert (big["OPTUNA_TRIALS"], big["OPTUNA_TIMEOUT"]) == (8, 60)
            assert "OPTUNA_TRIALS" not in little and "optuna" not in small  # quick tier: plain CV
            short = _ask_with(operations.prepare_draft(sessions["default"], slot), _guidelines(900, 900, 29))
            assert _work(short)["N_FOLDS"] == 4
            assert (_work(short)["OPTUNA_TRIALS"], _work(short)["OPTUNA_TIMEOUT"]) == (4, 8)
        compile(small, "solution.py", "exec")
    assert optuna_seen >= 1


def test_a_large_share_keeps_today_s_program(sessions):
    """The default 12-hour limit (and a prompt without budget lines) give the same program."""
    for slot in range(1, 13):
        request = operations.prepare_draft(sessions["default"], slot)
        ctx = {**request.ctx, "packages": PACKAGES}
        assert respond(ctx, request.prompt).content == respond(ctx).content


def test_a_mutation_under_a_small_share_stays_within_the_caps_and_still_changes_its_gene(sessions):
    request = operations.prepare_draft(sessions["default"], 3)
    quick = effort.TIERS[-1]
    small = _guidelines(170, 170, 29)
    changed = 0
    for k in range(12):
        parent = programs.render_program_from_spec(*_spec_with_optuna(request, k))
        for locus in ("TRAINING_TRICKS", "OPTIMIZER"):
            ctx = {**request.ctx, "packages": PACKAGES, "purpose": "mutate", "call_key": f"m{k}:{locus}",
                   "parent_code": parent, "target_locus": locus, "fault_rate": 0.0}
            child = _code(respond(ctx, small))
            before, after = G.parse_genes(parent), G.parse_genes(child)
            assert [lc for lc in G.LOCI if before[lc] != after[lc]] in ([locus], [])
            if "OPTUNA_TRIALS" in after[locus]:
                assert "OPTUNA_TRIALS" in before[locus]  # no new study in the quick tier
            caps = effort.caps_for(quick, effort.model_name(child))
            for name, value in _work(after[locus]).items():
                assert name not in caps or value <= caps[name], (name, value)
            changed += before[locus] != after[locus]
    assert changed >= 18


def _spec_with_optuna(request, k: int):
    from swarm_evo.llm.offline.dataset import infer_dataset

    info = infer_dataset(request.ctx["competition"], PACKAGES)
    spec = programs.choose_draft_spec(info, random.Random(k), None, PACKAGES)
    spec["tricks"] = {"OPTUNA_TRIALS": 8, "OPTUNA_TIMEOUT": 60} if k % 2 else {}
    spec = effort.size_spec(info, spec, effort.TIERS[-2])  # short tier: keeps a 4-trial study
    return info, spec, "t"


def test_size_spec_raises_the_learning_rate_when_it_cuts_rounds(sessions):
    from swarm_evo.llm.offline.dataset import infer_dataset

    info = infer_dataset(operations.prepare_draft(sessions["short"], 1).ctx["competition"], PACKAGES)
    spec = {"family": "gb", "feature_set": "engineered", "loss": None, "regularization": {}, "init": None,
            "optimizer": {"LEARNING_RATE": 0.06, "N_ESTIMATORS": 300, "MAX_ITER": 1000}, "tricks": {}}
    sized = effort.size_spec(info, spec, effort.TIERS[-1])
    assert sized["optimizer"] == {"LEARNING_RATE": 0.12, "N_ESTIMATORS": 150, "MAX_ITER": 300}
    assert sized["tricks"] == {"N_FOLDS": 3}
    assert effort.size_spec(info, spec, effort.FULL) is spec
    stub = effort.size_spec(info, {**spec, "optimizer": None}, effort.TIERS[-1])
    assert stub["optimizer"]["N_ESTIMATORS"] == 150


def test_fast_models_keep_their_rounds_and_slow_ones_are_capped(sessions):
    """LightGBM, XGBoost, CatBoost and HistGradientBoosting fit 250 rounds in <= 0.8 s: no tier
    cuts their rounds (the folds still go down); GradientBoosting's are cut (issue 33)."""
    from swarm_evo.llm.offline.dataset import infer_dataset

    info = infer_dataset(operations.prepare_draft(sessions["short"], 1).ctx["competition"], PACKAGES)
    optimizer = {"LEARNING_RATE": 0.06, "N_ESTIMATORS": 300, "MAX_ITER": 1000}
    for family in ("lgbm", "xgb", "cat", "hgb"):
        spec = {"family": family, "feature_set": "engineered", "loss": None, "regularization": {}, "init": None,
                "optimizer": dict(optimizer), "tricks": {}}
        sized = effort.size_spec(info, spec, effort.TIERS[-1])
        assert sized["optimizer"] == optimizer, family
        assert sized["tricks"] == {"N_FOLDS": 3}
    gene = "N_ESTIMATORS = 300\nMAX_ITER = 1000\nN_FOLDS = 5\n"
    assert effort.cap_text(gene, effort.TIERS[-1], "LightGBM") == "N_ESTIMATORS = 300\nMAX_ITER = 1000\nN_FOLDS = 3\n"
    assert effort.cap_text(gene, effort.TIERS[-1], "GradientBoosting") == "N_ESTIMATORS = 150\nMAX_ITER = 300\nN_FOLDS = 3\n"
    assert effort.model_name("MODEL_NAME = 'XGBoost'\nPREPROCESS_KIND = 'tree'") == "XGBoost"
    assert effort.model_name("no model here") is None


def test_a_timeout_repair_never_raises_a_small_program_s_work():
    code = "N_ESTIMATORS = 40\nMAX_ITER = 80\nN_FOLDS = 3\nOPTUNA_TRIALS = 2\nOPTUNA_TIMEOUT = 3\n"
    cheaper = repair.make_cheaper(code)
    assert cheaper is None or all(v <= _work(code)[n] for n, v in _work(cheaper).items())
    assert _work(repair.make_cheaper("N_ESTIMATORS = 400\nOPTUNA_TIMEOUT = 60\n")) == {
        "N_ESTIMATORS": 200, "OPTUNA_TIMEOUT": 30}
