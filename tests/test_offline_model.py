"""Tests of the offline model (swarm_evo.llm.offline): real programs on real data, no network.

Competition folders are prepared in a temporary directory from ../shared/data raw CSVs with
MLE-bench's 90/10 split (train_test_split(test_size=0.1, random_state=0)).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import litellm  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from conftest import SHARED_DATA as RAW  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from swarm_evo.competition.graders import get_grader  # noqa: E402
from swarm_evo.llm import offline  # noqa: E402
from swarm_evo.llm.offline import alleles, faults, models, programs  # noqa: E402
from swarm_evo.llm.offline.dataset import infer_dataset  # noqa: E402
from swarm_evo.llm.offline.preamble import render_preamble  # noqa: E402
from swarm_evo.population import genes as G  # noqa: E402

SPECS = {
    "spaceship-titanic": ("PassengerId", ["Transported"], "accuracy", "Transported"),
    "house-prices": ("Id", ["SalePrice"], "root-mean-squared-log-error", "SalePrice"),
    "spooky-author-identification": ("id", ["EAP", "HPL", "MWS"], "multi-class-log-loss", "author"),
}
METRIC_RE = re.compile(r"^Validation metric:\s*([-+0-9.eE]+|nan|inf)\s*$", re.M)



def _prepare(root: Path, cid: str) -> dict:
    id_col, tcols, grader, target = SPECS[cid]
    pub = root / cid / "prepared" / "public"
    pub.mkdir(parents=True)
    raw = pd.read_csv(RAW / cid / "raw" / "train.csv", float_precision="round_trip")
    tr, te = train_test_split(raw, test_size=0.1, random_state=0)
    tr.to_csv(pub / "train.csv", index=False)
    te.drop(columns=[target]).to_csv(pub / "test.csv", index=False)
    sample = pd.DataFrame({id_col: te[id_col].values})
    if cid == "spaceship-titanic":
        sample["Transported"] = False
    elif cid == "house-prices":
        sample["SalePrice"] = 180000.0
    else:
        for c in tcols:
            sample[c] = 1 / 3
    sample.to_csv(pub / "sample_submission.csv", index=False)
    shutil.copy(RAW / cid / "description.md", pub / "description.md")
    return {"id": cid, "competition_type": "simple", **get_grader(grader).facts(), "public_dir": str(pub),
            "id_column": id_col,
            "target_columns": tcols, "sample_submission": str(pub / "sample_submission.csv")}


@pytest.fixture(scope="module")
def comps(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("competitions")
    return {cid: _prepare(root, cid) for cid in SPECS}


@pytest.fixture(scope="module", autouse=True)
def _registered():
    offline.register()


_COUNTER = iter(range(10 ** 6))


def _node_dir(comp: dict, root: Path) -> Path:
    d = root / f"node{next(_COUNTER)}"
    (d / "working").mkdir(parents=True)
    (d / "submission").mkdir()
    os.symlink(comp["public_dir"], d / "input")
    return d


def _start(code: str, comp: dict, root: Path):
    d = _node_dir(comp, root)
    (d / "solution.py").write_text(code)
    proc = subprocess.Popen([sys.executable, "solution.py"], cwd=d, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, d, time.time()


def _finish(job) -> tuple[int, str, Path, float]:
    proc, d, t0 = job
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out, d, time.time() - t0


def _run(code: str, comp: dict, root: Path):
    return _finish(_start(code, comp, root))


def _code(reply: str) -> str:
    m = re.search(r"```python\n(.*?)```", reply, re.S)
    assert m, reply[:500]
    return m.group(1)


def _exc_type(out: str) -> str | None:
    found = re.findall(r"^(\w+(?:Error|Exception))\b", out, re.M)
    return found[-1] if found else None


def _call(ctx: dict, **kw):
    return litellm.completion(model="offline/test", messages=[{"role": "user", "content": "prompt"}],
                              metadata={"swarm_evo": ctx}, num_retries=0, **kw)


def _ctx(comp: dict, purpose: str, key: str, seed: int = 0, **extra) -> dict:
    ctx = {"purpose": purpose, "seed": seed, "call_key": key, "fault_rate": 0.0, "repair_rate": 1.0,
           "competition": comp, "loci": list(G.LOCI)}
    ctx.update(extra)
    return ctx


def _check_submission(d: Path, comp: dict) -> pd.DataFrame:
    sample = pd.read_csv(comp["sample_submission"])
    sub = pd.read_csv(d / "submission" / "submission.csv")
    assert list(sub.columns) == list(sample.columns)
    assert len(sub) == len(sample)
    assert list(sub[comp["id_column"]]) == list(sample[comp["id_column"]])
    assert not sub.isna().any().any()
    if comp["grader"] == "multi-class-log-loss":
        np.testing.assert_allclose(sub[comp["target_columns"]].sum(axis=1), 1.0, atol=1e-6)
    if comp["id"] == "spaceship-titanic":
        assert sub["Transported"].dtype == bool
    return sub


def _metric(out: str) -> float:
    lines = [ln for ln in out.strip().split("\n") if ln.strip()]
    m = METRIC_RE.match(lines[-1])
    assert m, out[-2000:]
    return float(m.group(1))


def _spec(info, family: str, feature_set: str | None = None) -> dict:
    return {"family": family, "feature_set": feature_set or programs.data_gene.feature_sets(info)[-1],
            "loss": None, "optimizer": None, "regularization": alleles.default_regularization(info),
            "init": None, "tricks": {}}


# ----------------------------------------------------------------------------- provider


def test_register_is_idempotent_and_ctx_reaches_provider(comps):
    offline.register()
    offline.register()
    assert sum(1 for i in litellm.custom_provider_map if i["provider"] == "offline") == 1
    resp = _call(_ctx(comps["house-prices"], "draft", "k1", draft_history=[]))
    text = resp.choices[0].message.content
    code = _code(text)
    assert text.split("```python")[0].strip()  # a plan paragraph
    assert list(G.parse_genes(code)) == list(G.LOCI)
    assert G.validate_genes(G.parse_genes(code))
    assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 100
    compile(code, "solution.py", "exec")


def test_review_tool_call_parses_via_litellm(comps):
    comp = comps["spaceship-titanic"]
    code = _code(_call(_ctx(comp, "draft", "r0")).choices[0].message.content)
    term = "fold 1/5: accuracy = 0.80000\nfold 2/5: accuracy = 0.81000\nValidation metric: 0.805000\n"
    from swarm_evo.llm.offline.review import REVIEW_FIELDS
    tool = {"type": "function", "function": {"name": "submit_review", "parameters": {
        "type": "object", "properties": {f: {} for f in REVIEW_FIELDS}}}}
    choice = {"type": "function", "function": {"name": "submit_review"}}
    resp = _call(_ctx(comp, "review", "r1", code=code, term_out=term, exc_type=None, parsed_metric=0.805,
                      submission_errors=[]), tools=[tool], tool_choice=choice)
    call = resp.choices[0].message.tool_calls[0]
    assert call.function.name == "submit_review"
    args = json.loads(call.function.arguments)
    assert set(REVIEW_FIELDS) <= set(args)
    assert args["is_bug"] is False and args["has_csv_submission"] is True
    assert args["metric"] == pytest.approx(0.805) and args["metric_name"] == "accuracy"
    assert "fold CV" in args["approach_tag"]
    assert resp.usage.completion_tokens > 0
    bad = _call(_ctx(comp, "review", "r2", code=code, term_out="Traceback...\nKeyError: 'Cabn'\n",
                     exc_type="KeyError", parsed_metric=None, submission_errors=["submission.csv missing"]),
                tools=[tool], tool_choice=choice)
    args = json.loads(bad.choices[0].message.tool_calls[0].function.arguments)
    assert args["is_bug"] is True and args["metric"] is None and args["has_csv_submission"] is False
    assert "KeyError" in args["summary"]


def test_determinism(comps):
    comp = comps["spaceship-titanic"]
    a = offline.respond(_ctx(comp, "draft", "same", seed=7, fault_rate=0.5)).content
    b = offline.respond(_ctx(comp, "draft", "same", seed=7, fault_rate=0.5)).content
    assert a == b
    others = {offline.respond(_ctx(comp, "draft", f"k{i}", seed=7)).content for i in range(6)}
    assert len(others) > 1


# ----------------------------------------------------------------------------- programs


def test_families_cover_six_per_task_and_fit(comps):
    assert len(models.CLASSIFIERS) >= 6 and len(models.REGRESSORS) >= 6
    rng = np.random.default_rng(0)
    Xs = rng.random((60, 4))
    for comp_id, fams in (("spaceship-titanic", models.CLASSIFIERS), ("house-prices", models.REGRESSORS)):
        info = infer_dataset(comps[comp_id])
        y = (Xs[:, 0] > 0.5).astype(int) if info.task == "classification" else Xs @ [1.0, 2.0, 0.5, 0.0]
        for fam in fams.values():
            ns: dict = {}
            exec(compile(render_preamble(info, "t"), "pre", "exec"), ns)
            ns["build_preprocessor"] = lambda kind: "passthrough"
            exec(compile(models.render_model_gene(fam), fam.key, "exec"), ns)
            model = ns["build_model"]()
            model.fit(Xs, y)
            assert len(model.predict(Xs)) == 60, fam.name


@pytest.mark.slow  # runs the offline model's programs
def test_drafts_run_on_three_competitions(comps, tmp_path):
    jobs = {}
    for cid, comp in comps.items():
        code = _code(offline.respond(_ctx(comp, "draft", "draft-1", seed=3, draft_history=[])).content)
        jobs[cid] = _start(code, comp, tmp_path)
    for cid, job in jobs.items():
        rc, out, d, dt = _finish(job)
        assert rc == 0, out[-3000:]
        value = _metric(out)
        _check_submission(d, comps[cid])
        print(f"{cid}: {value:.5f} in {dt:.1f}s")
        assert np.isfinite(value)
        assert dt < 60


@pytest.mark.slow  # runs the offline model's programs
def test_draft_history_diversity_and_spaceship_hgb_reaches_079(comps, tmp_path):
    comp = comps["spaceship-titanic"]
    hist, names = [], []
    for i in range(6):
        code = _code(offline.respond(_ctx(comp, "draft", f"d{i}", seed=11, draft_history=hist)).content)
        tag = programs.approach_tag(code)
        names.append(tag.split(" + ")[0])
        hist.append({"step": i + 1, "approach_tag": tag, "metric": None})
    assert len(set(names)) == 6, names
    info = infer_dataset(comp)
    code = programs.render_program_from_spec(info, _spec(info, "hgb", "engineered"), "t")
    rc, out, d, dt = _run(code, comp, tmp_path)
    assert rc == 0, out[-3000:]
    assert _metric(out) >= 0.79
    _check_submission(d, comp)
    print(f"spaceship HistGradientBoosting: {_metric(out):.4f} in {dt:.1f}s")


def test_mutate_changes_only_the_target_gene(comps):
    for cid in ("spaceship-titanic", "spooky-author-identification"):
        comp = comps[cid]
        parent = _code(offline.respond(_ctx(comp, "draft", "p", seed=5)).content)
        pre, genes = G.split_program(parent)
        for locus in G.LOCI:
            for k in range(3):
                child = _code(offline.respond(_ctx(comp, "mutate", f"m-{locus}-{k}", seed=5, parent_code=parent,
                                                   target_locus=locus)).content)
                cpre, cgenes = G.split_program(child)
                assert cpre == pre
                assert list(cgenes) == list(G.LOCI)
                assert cgenes[locus] != genes[locus], (cid, locus)
                for other in G.LOCI:
                    if other != locus:
                        assert cgenes[other] == genes[other], (cid, locus, other)
                compile(child, "solution.py", "exec")


@pytest.mark.slow  # runs the offline model's programs
def test_merge_assembles_plan_and_runs(comps, tmp_path):
    comp = comps["house-prices"]
    info = infer_dataset(comp)
    a = programs.render_program_from_spec(info, dict(_spec(info, "ridge", "raw"), init=7), "a")
    b = programs.render_program_from_spec(info, dict(_spec(info, "hgb", "engineered"),
                                                     loss={"REG_LOSS": "absolute_error"},
                                                     optimizer={**alleles.default_optimizer(info), "N_ESTIMATORS": 60}),
                                         "b")  # 60 boosting iterations: the merge, not the fit, is under test
    ga, gb = G.parse_genes(a), G.parse_genes(b)
    plan = {lc: {"source_node_id": "A", "code": ga[lc]} for lc in G.LOCI}
    for lc in ("DATA", "MODEL", "LOSS", "OPTIMIZER"):
        plan[lc] = {"source_node_id": "B", "code": gb[lc]}
    merged = _code(offline.respond(_ctx(comp, "merge", "mg", primary_parent_code=a, gene_plan=plan)).content)
    mg = G.parse_genes(merged)
    for lc in G.LOCI:
        assert mg[lc] == plan[lc]["code"]
    rc, out, d, dt = _run(merged, comp, tmp_path)
    assert rc == 0, out[-3000:]
    _check_submission(d, comp)
    assert "HistGradientBoosting" in programs.approach_tag(merged)


@pytest.mark.slow  # runs the offline model's programs
def test_planted_faults_fail_and_debug_repairs_them(comps, tmp_path):
    comp = comps["house-prices"]
    info = infer_dataset(comp)
    base = programs.render_program_from_spec(info, _spec(info, "ridge", "engineered"), "t")
    planted = {}
    for i in range(200):
        locus = ["DATA", "MODEL", "TRAINING_TRICKS"][i % 3]
        code, desc = faults.plant(base, locus, random.Random(i), comp["public_dir"])
        kind = desc.split(":")[0]
        planted.setdefault(kind, code)
        if len(planted) == 3:
            break
    assert set(planted) == set(faults.FAULT_KINDS)
    broken = {k: _start(c, comp, tmp_path) for k, c in planted.items()}
    fixed_jobs = {}
    for kind, job in broken.items():
        rc, out, _, _ = _finish(job)
        assert rc != 0, kind
        exc = _exc_type(out)
        ctx = _ctx(comp, "debug", f"dbg-{kind}", code=planted[kind], term_out=out, exc_type=exc, attempt=1,
                   exec_timeout=600)
        fixed = _code(offline.respond(ctx).content)
        assert list(G.parse_genes(fixed)) == list(G.LOCI)
        still = _code(offline.respond(dict(ctx, repair_rate=0.0)).content)
        assert still != planted[kind] and list(G.parse_genes(still)) == list(G.LOCI)
        fixed_jobs[kind] = _start(fixed, comp, tmp_path)
    for kind, job in fixed_jobs.items():
        rc, out, d, _ = _finish(job)
        assert rc == 0, (kind, out[-2000:])
        _metric(out)
        _check_submission(d, comp)


def test_fault_rate_one_always_breaks_a_draft(comps):
    comp = comps["spaceship-titanic"]
    clean = offline.respond(_ctx(comp, "draft", "f", seed=2)).content
    faulty = offline.respond(_ctx(comp, "draft", "f", seed=2, fault_rate=1.0)).content
    assert _code(clean) != _code(faulty)


def test_timeout_debug_makes_program_cheaper(comps):
    comp = comps["spooky-author-identification"]
    code = _code(offline.respond(_ctx(comp, "draft", "t", seed=1)).content)
    fixed = _code(offline.respond(_ctx(comp, "debug", "t-d", code=code, term_out="Timed out after 600s",
                                       exc_type="TimeoutError", attempt=1)).content)
    assert fixed != code
    c0, c1 = programs.constants(code), programs.constants(fixed)
    assert int(c1["TFIDF_MAX_FEATURES"]) < int(c0["TFIDF_MAX_FEATURES"])


def test_fix_restores_markers_and_required_lines(comps):
    comp = comps["house-prices"]
    code = _code(offline.respond(_ctx(comp, "draft", "fx", seed=4)).content)
    pre, genes = G.split_program(code)
    del genes["LOSS"], genes["INITIALIZATION"]
    broken = G.render_program(pre, genes)
    fixed = _code(offline.respond(_ctx(comp, "fix", "fx1", code=broken,
                                       errors=["missing section markers: LOSS, INITIALIZATION"])).content)
    assert list(G.parse_genes(fixed)) == list(G.LOCI)
    assert "Validation metric" in fixed and "submission.csv" in fixed
    compile(fixed, "solution.py", "exec")
    syntax = _code(offline.respond(_ctx(comp, "fix", "fx2", code="def broken(:\n", errors=["SyntaxError"])).content)
    assert G.validate_genes(G.parse_genes(syntax))
    compile(syntax, "solution.py", "exec")


def test_the_dataset_answer_is_kept_per_file_version_and_each_caller_gets_its_own_copy(tmp_path):
    """infer_dataset keeps its answer for the same CTX facts and CSV files (every model call of a
    run asks again): a caller mutating its copy changes nothing for the next; a train.csv written
    again (a new modification time) is read again; other CTX facts are another answer."""
    public = tmp_path / "public"
    public.mkdir()
    pd.DataFrame({"id": range(40), "x": range(40), "label": [i % 2 for i in range(40)]}).to_csv(public / "train.csv", index=False)
    pd.DataFrame({"id": range(40, 50), "x": range(10)}).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": range(40, 50), "label": 0}).to_csv(public / "sample_submission.csv", index=False)
    comp = {"public_dir": str(public), "grader_kind": "label"}
    first = infer_dataset(comp)
    first.drop_cols.append("x")
    first.columns.clear()
    again = infer_dataset(comp)
    assert again.columns == ["id", "x", "label"] and "x" not in again.drop_cols and again.target_col == "label"
    assert infer_dataset(dict(comp, classification=False)).task == "regression"  # other facts: another answer
    pd.DataFrame({"id": range(40), "z": range(40), "label": [i % 2 for i in range(40)]}).to_csv(public / "train.csv", index=False)
    os.utime(public / "train.csv", (time.time() + 5, time.time() + 5))  # a new version, whatever the clock's grain
    assert infer_dataset(comp).columns == ["id", "z", "label"]
