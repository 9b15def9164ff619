"""The offline model writes LightGBM, XGBoost and CatBoost programs (and optuna searches) when
the sandbox's interpreter has them, and exactly its scikit-learn programs when it does not
(issue 15, item 3). Library programs run for real in the program environment."""

from __future__ import annotations

import re

import litellm
import pytest

from swarm_evo.config import RunConfig
from swarm_evo.llm import offline
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.run import model_context
from swarm_evo.run.session import open_session
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.runtime import describe_runtime

LIBRARIES = {"lightgbm": "LGBM", "xgboost": "XGB", "catboost": "CatBoost"}


@pytest.fixture(scope="module")
def sessions(data_dir, tmp_path_factory):
    offline.register()
    config = RunConfig().with_overrides({"search.max_steps": 5})
    out = {}
    for cid in ("spaceship-titanic", "house-prices"):
        out[cid] = open_session(competition_id=cid, data_dir=data_dir, run_dir=tmp_path_factory.mktemp(cid),
                                config=config, endpoint=endpoint_for(config.model))
    return out


@pytest.fixture(scope="module")
def installed(programs_python) -> dict:
    """What the runtime probe reports for the program environment."""
    return describe_runtime(LocalSandbox(python=programs_python, parallel_workers=1)).packages


def _draft(session, seed: int, packages: dict | None) -> str:
    ctx = model_context.offline_context(session, "draft", f"slot{seed}:draft")
    ctx.update(seed=seed, fault_rate=0.0)
    if packages is None:
        ctx.pop("packages")
    else:
        ctx["packages"] = packages
    reply = litellm.completion(model="offline/test", messages=[{"role": "user", "content": "draft"}],
                               metadata={"swarm_evo": ctx}, num_retries=0)
    return re.search(r"```python\n(.*?)```", reply.choices[0].message.content, re.S).group(1)


def _library(code: str) -> str | None:
    return next((lib for lib in LIBRARIES if re.search(rf"^\s*(from|import) {lib}\b", code, re.M)), None)


@pytest.mark.parametrize("packages", [None, {}, {"numpy": "2.4.6", "scikit-learn": "1.7.2"}])
def test_without_the_libraries_no_program_imports_them(sessions, packages):
    for seed in range(25):
        code = _draft(sessions["spaceship-titanic"], seed, packages)
        assert _library(code) is None and "optuna" not in code


def test_with_the_libraries_drafts_use_each_of_them(sessions, installed):
    assert {"lightgbm", "xgboost", "catboost", "optuna"} <= set(installed)
    used = [_library(_draft(sessions["spaceship-titanic"], seed, installed)) for seed in range(30)]
    assert set(LIBRARIES) <= set(used), used
    assert sum(u is not None for u in used) >= 12, used  # the likeliest draft families on tabular data
    text = [_library(_draft(sessions["house-prices"], seed, installed)) for seed in range(10)]
    assert any(text)


@pytest.mark.parametrize("competition", ["spaceship-titanic", "house-prices"])
def test_library_programs_run_in_the_program_environment(sessions, installed, programs_python, competition,
                                                         tmp_path):
    """The first draft of each library (without optuna, whose studies are tested on their own
    below) runs as the offline model wrote it; two at a time, one thread each."""
    session = sessions[competition]
    chosen: dict[str, str] = {}
    for seed in range(80):
        code = _draft(session, seed, installed)
        lib = _library(code)
        if lib and lib not in chosen and "optuna" not in code:
            chosen[lib] = code
        if len(chosen) == len(LIBRARIES):
            break
    assert set(chosen) == set(LIBRARIES)
    results = _execute_all(programs_python, session.objective.competition.public_dir, chosen, tmp_path)
    for lib, result in results.items():
        assert result.ok, f"{lib}: {result.term_out[-2000:]}"
        assert re.search(r"^Validation metric: [-+0-9.eE]+$", result.stdout, re.M), result.stdout[-500:]
        assert (tmp_path / lib / "submission" / "submission.csv").exists()


# ----------------------------------------------------------------------------- faults and optuna
def _small_program(session, family: str, tricks: dict | None = None) -> str:
    """A quick program of ``family`` (40 trees, 3 folds, raw columns) for the session's competition."""
    from swarm_evo.llm.offline import alleles, programs
    from swarm_evo.llm.offline.dataset import infer_dataset

    info = infer_dataset(model_context.offline_context(session, "draft", "x")["competition"])
    spec = {"family": family, "feature_set": "raw", "loss": None,
            "optimizer": {"LEARNING_RATE": 0.1, "N_ESTIMATORS": 40, "MAX_ITER": 200},
            "regularization": alleles.default_regularization(info), "init": None,
            "tricks": {"N_FOLDS": 3, **(tricks or {})}}
    return programs.render_program_from_spec(info, spec, "test program")


def _execute_all(programs_python: str, public_dir, jobs: dict[str, str], root) -> dict:
    """Run each ``{name: code}`` in the program environment, two at a time (1 thread each)."""
    from concurrent.futures import ThreadPoolExecutor

    sandbox = LocalSandbox(python=programs_python, parallel_workers=2, num_threads=1)
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(sandbox.execute, code, root / name, public_dir, 300)
                   for name, code in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


FAULT_ERRORS = {
    "raw_frame": {"lightgbm": "pandas dtypes must be int, float or bool",
                  "xgboost": "DataFrame.dtypes for data must be int, float, bool or category",
                  "catboost": "Cannot convert"},
    "early_stopping": {"lightgbm": "For early stopping, at least one dataset and eval metric is required",
                       "xgboost": "Must have at least 1 validation dataset for early stopping"},
    "catboost_verbose": {"catboost": "Only one of parameters ['verbose', 'logging_level'"},
    "library_import": {lib: "is not defined" for lib in LIBRARIES},
    "string_labels": {"xgboost": "Invalid classes inferred from unique values of `y`"},
}
"""Fault kind -> library -> the library's own error text the planted program must print."""


def test_planted_library_faults_fail_with_the_library_error_and_debug_repairs_them(
        sessions, programs_python, tmp_path):
    import random

    from swarm_evo.llm.offline import faults
    from swarm_evo.population import genes as G

    session = sessions["spaceship-titanic"]
    public_dir = session.objective.competition.public_dir
    planted: dict[str, str] = {}
    for family, lib in (("lgbm", "lightgbm"), ("xgb", "xgboost"), ("cat", "catboost")):
        base = _small_program(session, family)
        expected = {kind for kind, libs in FAULT_ERRORS.items() if lib in libs}
        found: set[str] = set()
        for i in range(300):  # the ordinary fault planter picks the library faults too
            locus = ("MODEL", "DATA")[i % 2]
            code, desc = faults.plant(base, locus, random.Random(i), str(public_dir))
            kind = desc.split(":")[0]
            if kind in faults.LIBRARY_FAULT_KINDS and kind not in found:
                found.add(kind)
                planted[f"{lib}-{kind}"] = code
            if found == expected:
                break
        assert found == expected, (lib, found)
    broken = _execute_all(programs_python, public_dir, planted, tmp_path / "broken")
    fixed_code = {}
    for name, result in broken.items():
        lib, kind = name.split("-", 1)
        assert not result.ok, name
        assert FAULT_ERRORS[kind][lib] in result.term_out, (name, result.term_out[-1500:])
        ctx = model_context.offline_context(session, "debug", f"debug-{name}")
        ctx.update(code=planted[name], term_out=result.term_out, exc_type=result.exc_type, attempt=1,
                   exec_timeout=300, repair_rate=1.0)
        fixed = re.search(r"```python\n(.*?)```", offline.respond(ctx).content, re.S).group(1)
        assert list(G.parse_genes(fixed)) == list(G.LOCI) and fixed != planted[name]
        fixed_code[name] = fixed
    repaired = _execute_all(programs_python, public_dir, fixed_code, tmp_path / "fixed")
    for name, result in repaired.items():
        assert result.ok, (name, result.term_out[-2000:])
        assert re.search(r"^Validation metric: [-+0-9.eE]+$", result.stdout, re.M), name
        assert (tmp_path / "fixed" / name / "submission" / "submission.csv").exists()


def test_scikit_learn_programs_never_get_library_faults(sessions):
    import random

    from swarm_evo.llm.offline import faults

    session = sessions["house-prices"]
    public_dir = str(session.objective.competition.public_dir)
    base = _small_program(session, "hgb")
    for locus in ("DATA", "MODEL", "TRAINING_TRICKS"):
        assert faults.library_faults(base, locus, public_dir) == []
    kinds = {faults.plant(base, ("DATA", "MODEL")[i % 2], random.Random(i), public_dir)[1].split(":")[0]
             for i in range(60)}
    assert kinds <= set(faults.FAULT_KINDS)


def test_optuna_program_tunes_and_prints_its_validation_metric(sessions, installed, programs_python, tmp_path):
    from swarm_evo.llm.offline import programs

    session = sessions["house-prices"]
    code = _small_program(session, "lgbm", {"OPTUNA_TRIALS": 3, "OPTUNA_TIMEOUT": 60})
    assert programs.approach_tag(code).startswith("LightGBM + raw columns + 3-fold CV")
    assert "optuna (3 trials)" in programs.approach_tag(code)
    result = _execute_all(programs_python, session.objective.competition.public_dir, {"optuna": code},
                          tmp_path)["optuna"]
    assert result.ok, result.term_out[-2000:]
    trials = re.findall(r"^trial (\d)/3: root-mean-squared-log-error = ([0-9.]+) \{", result.stdout, re.M)
    assert [t for t, _ in trials] == ["1", "2", "3"], result.stdout[-1500:]
    assert "learning_rate" in result.stdout and "num_leaves" in result.stdout
    best = min(float(v) for _, v in trials)
    metric = re.search(r"^Validation metric: ([-+0-9.eE]+)$", result.stdout, re.M)
    assert metric and abs(float(metric.group(1)) - best) < 1e-5  # lower is better: the best trial
    assert "Trial 0 finished" not in result.term_out  # optuna's own logging is silenced
    assert (tmp_path / "optuna" / "submission" / "submission.csv").exists()
    # drafts tune with optuna only when it is installed, and their tags and plans say so
    with_optuna = [_draft(session, seed, installed) for seed in range(12)]
    assert any("import optuna" in c for c in with_optuna)
    assert not any("optuna" in _draft(session, seed, {k: v for k, v in installed.items() if k != "optuna"})
                   for seed in range(12))
