"""The offline model writes LightGBM, XGBoost and CatBoost programs (and optuna searches) when
the sandbox's interpreter has them, and exactly its scikit-learn programs when it does not
(issue 15, item 3). Library programs run for real in the program environment."""

from __future__ import annotations

import re

import litellm
import pytest

from swarm_evo import steps
from swarm_evo.config import RunConfig
from swarm_evo.llm import client, offline
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.runtime import describe_runtime
from swarm_evo.session import open_session

LIBRARIES = {"lightgbm": "LGBM", "xgboost": "XGB", "catboost": "CatBoost"}


@pytest.fixture(scope="module")
def sessions(data_dir, tmp_path_factory):
    offline.register()
    config = RunConfig().with_overrides({"search.max_steps": 5})
    out = {}
    for cid in ("spaceship-titanic", "house-prices"):
        out[cid] = open_session(competition_id=cid, data_dir=data_dir, run_dir=tmp_path_factory.mktemp(cid),
                                config=config, endpoint=client.endpoint_for(config.model))
    return out


@pytest.fixture(scope="module")
def installed(programs_python) -> dict:
    """What the runtime probe reports for the program environment."""
    return describe_runtime(LocalSandbox(python=programs_python, parallel_workers=1)).packages


def _draft(session, seed: int, packages: dict | None) -> str:
    ctx = steps.offline_context(session, "draft", f"slot{seed}:draft")
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
    session = sessions[competition]
    chosen: dict[str, str] = {}
    for seed in range(60):
        code = _draft(session, seed, installed)
        lib = _library(code)
        if lib and lib not in chosen:
            chosen[lib] = code
        if len(chosen) == len(LIBRARIES):
            break
    assert set(chosen) == set(LIBRARIES)
    sandbox = LocalSandbox(python=programs_python, parallel_workers=1)
    for lib, code in chosen.items():
        result = sandbox.execute(code, tmp_path / lib, session.objective.competition.public_dir, timeout=600)
        assert result.ok, f"{lib}: {result.term_out[-2000:]}"
        assert re.search(r"^Validation metric: [-+0-9.eE]+$", result.stdout, re.M), result.stdout[-500:]
        assert (tmp_path / lib / "submission" / "submission.csv").exists()
