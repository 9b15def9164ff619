"""The offline model on program-optimisation problems (CTX with a "problem" key).

A small but real problem is built here (six circles in the unit square, sum of radii; sections
LAYOUT, RADII, REFINE with alleles and numeric parameters). Programs are executed with Python in
a subprocess next to an evaluator stand-in that validates the output like the built-in circle
packing evaluator (shapes, finite, radii ≥ 0, inside the square, no overlap, reported sum).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import litellm  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from swarm_evo.llm import offline  # noqa: E402
from swarm_evo.llm.offline.program.alleles import (  # noqa: E402
    allele_table,
    current_allele,
    gene_text,
)
from swarm_evo.llm.offline.program.faults import FAULT_KINDS, plant_fault  # noqa: E402
from swarm_evo.llm.offline.program.params import find_params, perturb_value  # noqa: E402
from swarm_evo.llm.offline.program.repairs import error_line  # noqa: E402
from swarm_evo.llm.offline.program.tags import approach_tag, tag_signature  # noqa: E402
from swarm_evo.llm.offline.respond import respond  # noqa: E402
from swarm_evo.population import genes as G  # noqa: E402
from swarm_evo.search.review import REVIEW_TOOL, REVIEW_TOOL_CHOICE  # noqa: E402

INITIAL = '''"""Six circles in the unit square: maximise the sum of their radii."""
import math
import random

import numpy as np

N_CIRCLES = 6
SEED = 7

# [SECTION: LAYOUT]
def initial_centers(rng):
    GRID = 3
    pts = []
    for k in range(N_CIRCLES):
        pts.append([(k % GRID + 0.5) / GRID, (k // GRID + 0.5) / GRID])
    centers = np.array(pts, dtype=float)
    return centers

# [SECTION: RADII]
def compute_radii(centers):
    n = len(centers)
    radii = np.zeros(n)
    for i in range(len(centers)):
        x, y = centers[i]
        radii[i] = max(0.0, min(x, y, 1 - x, 1 - y))
    for i in range(n):
        for j in range(i + 1, n):
            d = math.hypot(centers[i][0] - centers[j][0], centers[i][1] - centers[j][1])
            if radii[i] + radii[j] > d:
                scale = d / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii

# [SECTION: REFINE]
N_STEPS = 120
STEP_SIZE = 0.02
N_BATCHES = 4


def refine(centers, rng):
    best = centers.copy()
    best_score = float(compute_radii(best).sum())
    per_batch = N_STEPS // N_BATCHES
    for _ in range(N_BATCHES):
        for _ in range(per_batch):
            cand = best.copy()
            k = rng.randrange(len(cand))
            step = np.array([rng.gauss(0, STEP_SIZE), rng.gauss(0, STEP_SIZE)])
            cand[k] = np.clip(cand[k] + step, 0.0, 1.0)
            score = float(compute_radii(cand).sum())
            if score > best_score:
                best, best_score = cand, score
    return best


def run_packing():
    rng = random.Random(SEED)
    centers = refine(initial_centers(rng), rng)
    radii = compute_radii(centers)
    return centers, radii, float(radii.sum())
'''

ALLELES = {
    "LAYOUT": {
        "hex_rows": '''# allele: hexagonal rows — every other row shifted by half a cell
def initial_centers(rng):
    COLS = 3
    ROW_SHIFT = 0.5
    rows = (N_CIRCLES + COLS - 1) // COLS
    pts = []
    for k in range(N_CIRCLES):
        r, c = divmod(k, COLS)
        x = (c + 0.5 + (ROW_SHIFT if r % 2 else 0.0)) / (COLS + ROW_SHIFT)
        y = (r + 0.5) / rows
        pts.append([x, y])
    return np.array(pts, dtype=float)
''',
        "random_uniform": '''# allele: random uniform centres inside a margin
def initial_centers(rng):
    MARGIN = 0.1
    return np.array([[rng.uniform(MARGIN, 1 - MARGIN), rng.uniform(MARGIN, 1 - MARGIN)]
                     for _ in range(N_CIRCLES)], dtype=float)
''',
    },
    "RADII": {
        "shrink_larger": '''# allele: shrink the larger circle of each overlapping pair
def compute_radii(centers):
    n = len(centers)
    radii = np.array([max(0.0, min(c[0], c[1], 1 - c[0], 1 - c[1])) for c in centers], dtype=float)
    for i in range(n):
        for j in range(i + 1, n):
            d = math.hypot(centers[i][0] - centers[j][0], centers[i][1] - centers[j][1])
            excess = radii[i] + radii[j] - d
            if excess > 0:
                big, small = (i, j) if radii[i] >= radii[j] else (j, i)
                cut = min(excess, radii[big])
                radii[big] -= cut
                radii[small] = max(0.0, radii[small] - (excess - cut))
    return radii
''',
    },
    "REFINE": {
        "no_refine": '''# allele: no refinement — the layout is used as is
def run_packing():
    rng = random.Random(SEED)
    centers = initial_centers(rng)
    radii = compute_radii(centers)
    return centers, radii, float(radii.sum())
''',
        "annealing": '''# allele: simulated annealing on the centres
N_STEPS = 300
STEP_SIZE = 0.05
TEMPERATURE = 0.01
COOLING = 0.98


def refine(centers, rng):
    cur = centers.copy()
    cur_score = float(compute_radii(cur).sum())
    best, best_score = cur, cur_score
    temp = TEMPERATURE
    for _ in range(N_STEPS):
        cand = cur.copy()
        k = rng.randrange(len(cand))
        step = np.array([rng.gauss(0, STEP_SIZE), rng.gauss(0, STEP_SIZE)])
        cand[k] = np.clip(cand[k] + step, 0.0, 1.0)
        score = float(compute_radii(cand).sum())
        if score > cur_score or rng.random() < math.exp((score - cur_score) / max(temp, 1e-12)):
            cur, cur_score = cand, score
            if score > best_score:
                best, best_score = cand, score
        temp *= COOLING
    return best


def run_packing():
    rng = random.Random(SEED)
    centers = refine(initial_centers(rng), rng)
    radii = compute_radii(centers)
    return centers, radii, float(radii.sum())
''',
    },
}

LOCI = ["LAYOUT", "RADII", "REFINE"]
PROBLEM = {"name": "toy-packing", "entry": "run_packing", "loci": LOCI, "required_loci": ["LAYOUT", "RADII"],
           "initial_program": INITIAL, "alleles": ALLELES, "score_name": "sum_of_radii",
           "directions": ["place circles of different sizes near the corners"]}

EVALUATOR = r'''
import importlib.util
import json

import numpy as np

spec = importlib.util.spec_from_file_location("program", "program.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
centers, radii, reported = mod.run_packing()
centers = np.asarray(centers, dtype=float)
radii = np.asarray(radii, dtype=float)
n = 6
if centers.shape != (n, 2) or radii.shape != (n,):
    raise ValueError(f"shape mismatch: centers {centers.shape}, radii {radii.shape}")
if not (np.isfinite(centers).all() and np.isfinite(radii).all() and np.isfinite(reported)):
    raise ValueError("non-finite output")
if (radii < 0).any():
    raise ValueError("negative radius")
if abs(float(reported) - float(radii.sum())) > 1e-6:
    raise ValueError("reported sum differs from the sum of radii")
for i in range(n):
    x, y = centers[i]
    r = radii[i]
    if x - r < -1e-9 or y - r < -1e-9 or x + r > 1 + 1e-9 or y + r > 1 + 1e-9:
        raise ValueError(f"circle {i} is outside the unit square")
    for j in range(i + 1, n):
        if float(np.hypot(*(centers[i] - centers[j]))) < r + radii[j] - 1e-9:
            raise ValueError(f"circles {i} and {j} overlap")
with open("out.json", "w") as fh:
    json.dump({"score": float(radii.sum()), "centers": centers.tolist(), "radii": radii.tolist()}, fh)
'''

_COUNTER = iter(range(10 ** 6))


@pytest.fixture(scope="module", autouse=True)
def _registered():
    offline.register()


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("problem-runs")


def _ctx(purpose: str, key: str, seed: int = 0, **extra) -> dict:
    ctx = {"purpose": purpose, "seed": seed, "call_key": key, "fault_rate": 0.0, "repair_rate": 1.0,
           "loci": LOCI, "problem": PROBLEM}
    ctx.update(extra)
    return ctx


def _code(text: str) -> str:
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, text[:500]
    return m.group(1)


def _reply(ctx: dict) -> tuple[str, str]:
    content = respond(ctx).content
    plan = content.split("```python")[0].strip()
    assert plan
    return plan, _code(content)


def _exc_type(out: str) -> str | None:
    found = re.findall(r"^(\w+(?:Error|Exception))\b", out, re.M)
    return found[-1] if found else None


def evaluate(code: str, root: Path) -> dict:
    """Run ``code`` as program.py under the evaluator stand-in; an evaluation dict plus term_out."""
    d = root / f"run{next(_COUNTER)}"
    d.mkdir()
    (d / "program.py").write_text(code)
    (d / "evaluate.py").write_text(EVALUATOR)
    try:
        proc = subprocess.run([sys.executable, "evaluate.py"], cwd=d, capture_output=True, text=True, timeout=60)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired:
        out, rc = "TimeoutError: the program exceeded 60 s\n", -9
    if rc == 0:
        res = json.loads((d / "out.json").read_text())
        return {"correct": True, "error": None, "combined_score": res["score"],
                "public_metrics": {"sum_of_radii": res["score"], "num_circles": 6},
                "output": res, "term_out": out, "exc_type": None}
    exc = _exc_type(out) or "TimeoutError"
    return {"correct": False, "error": error_line(out), "combined_score": 0.0, "public_metrics": {},
            "output": None, "term_out": out, "exc_type": exc}


def evaluate_many(codes: list[str], root: Path) -> list[dict]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda c: evaluate(c, root), codes))


def _params(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("value") for m in find_params(text)}


@pytest.fixture(scope="module")
def baseline(root) -> dict:
    res = evaluate(INITIAL, root)
    assert res["correct"], res["term_out"]
    return res


# ----------------------------------------------------------------------------- draft


def test_draft_is_deterministic_diverse_and_runs(root, baseline):
    a = respond(_ctx("draft", "draft-1", draft_history=[]))
    b = respond(_ctx("draft", "draft-1", draft_history=[]))
    assert a == b
    codes, history = [], []
    for k in range(6):
        plan, code = _reply(_ctx("draft", f"draft-{k}", draft_history=list(history)))
        assert list(G.parse_genes(code)) == LOCI
        assert code.startswith(G.split_program(INITIAL)[0])  # preamble kept
        assert "Draft" in plan and ("parameters" in plan or "allele" in plan)
        tag = approach_tag(code, _ctx("review", "t"))
        assert tag_signature(tag) not in {tag_signature(h["approach_tag"]) for h in history}
        history.append({"step": k, "approach_tag": tag, "metric": None})
        codes.append(code)
    assert len(set(codes)) == len(codes)
    # alleles from the problem appear in the drafts, and the programs really run
    assert any("# allele:" in c for c in codes)
    results = evaluate_many(codes, root)
    assert sum(r["correct"] for r in results) >= 5, [r["error"] for r in results]
    for r in results:
        if r["correct"]:
            assert 0 < r["combined_score"] <= 3.0


# ----------------------------------------------------------------------------- mutate


def test_mutate_changes_only_the_target_gene_and_keeps_valid_numbers(root):
    parent = INITIAL
    pre, genes = G.split_program(parent)
    swaps = tunes = 0
    mutated = []
    for k in range(60):
        locus = LOCI[k % 3]
        ctx = _ctx("mutate", f"mut-{k}", parent_code=parent, target_locus=locus)
        plan, code = _reply(ctx)
        assert respond(ctx).content == respond(ctx).content
        npre, ngenes = G.split_program(code)
        assert npre == pre
        assert list(ngenes) == LOCI
        for other in LOCI:
            if other != locus:
                assert ngenes[other] == genes[other]
        assert ngenes[locus] != genes[locus]
        assert locus in plan
        cur = current_allele(locus, ngenes[locus], allele_table(ctx))
        if cur is not None:
            swaps += 1
            assert G.normalise_gene(ngenes[locus]) == G.normalise_gene(ALLELES[locus][cur])
            assert f"allele '{cur}'" in plan
        else:
            tunes += 1
            old, new = _params(genes[locus]), _params(ngenes[locus])
            assert set(old) == set(new)
            changed = [n for n in old if old[n] != new[n]]
            assert 1 <= len(changed) <= 2
            for n in changed:
                assert n in plan
                v0, v1 = float(old[n]), float(new[n])
                assert math.isfinite(v1)
                if re.fullmatch(r"-?\d+", old[n]):
                    assert re.fullmatch(r"-?\d+", new[n]) and v1 >= 1  # ints stay positive ints
                else:
                    assert any(c in new[n] for c in ".eE") and 0.69 <= v1 / v0 <= 1.31
        mutated.append(code)
    assert swaps >= 8 and tunes >= 20
    results = evaluate_many(mutated[:24], root)
    assert sum(r["correct"] for r in results) >= 20, [r["error"] for r in results if not r["correct"]]


def test_mutate_without_parameters_or_alleles_makes_a_harmless_change(root):
    parent = INITIAL.replace("# [SECTION: RADII]", "# [SECTION: RADII]")
    problem = dict(PROBLEM, alleles={})
    ctx = _ctx("mutate", "m-noparam", parent_code=parent, target_locus="RADII", problem=problem)
    plan, code = _reply(ctx)
    assert "no numeric parameters" in plan
    assert G.parse_genes(code)["RADII"] != G.parse_genes(parent)["RADII"]
    assert evaluate(code, root)["combined_score"] == pytest.approx(evaluate(parent, root)["combined_score"])


def test_perturb_value_rules():
    rng = random.Random(3)
    for lit in ["1", "2", "3", "10", "120", "0"]:
        for _ in range(200):
            new = perturb_value(lit, rng)
            assert new != lit and re.fullmatch(r"\d+", new)
            assert int(new) >= (1 if int(lit) > 0 else 0)
            assert int(new) in {int(lit) + d for d in (-3, -2, -1, 1, 2, 3)} | {int(lit) * 2, int(lit) // 2} \
                or int(lit) <= 1
    for lit in ["0.02", "0.98", "1e-12", "2.5", "-0.5", "300.0"]:
        for _ in range(200):
            new = perturb_value(lit, rng)
            assert any(c in new for c in ".eE"), new
            ratio = float(new) / float(lit)
            assert 0.69 <= ratio <= 1.31 and float(new) != float(lit)
            assert len(new) <= 12
    assert float(perturb_value("0.0", rng)) > 0


# ----------------------------------------------------------------------------- merge


def test_merge_takes_the_planned_genes(root):
    other = G.render_program(G.split_program(INITIAL)[0], {
        "LAYOUT": gene_text(ALLELES["LAYOUT"]["hex_rows"]), "RADII": G.parse_genes(INITIAL)["RADII"],
        "REFINE": gene_text(ALLELES["REFINE"]["annealing"])})
    plan_genes = {"LAYOUT": {"code": G.parse_genes(other)["LAYOUT"], "source_node_id": "n7"},
                  "REFINE": {"code": G.parse_genes(other)["REFINE"], "source_node_id": "n9"}}
    ctx = _ctx("merge", "merge-1", primary_parent_code=INITIAL, gene_plan=plan_genes)
    plan, code = _reply(ctx)
    assert respond(ctx) == respond(ctx)
    genes = G.parse_genes(code)
    assert genes["LAYOUT"] == plan_genes["LAYOUT"]["code"]
    assert G.normalise_gene(genes["REFINE"]) == G.normalise_gene(plan_genes["REFINE"]["code"])  # last gene
    assert genes["RADII"] == G.parse_genes(INITIAL)["RADII"]
    assert code.startswith(G.split_program(INITIAL)[0])
    assert "n7" in plan and "n9" in plan and "hexagonal rows" in plan
    res = evaluate(code, root)
    assert res["correct"], res["term_out"]


# ----------------------------------------------------------------------------- faults and debug


def test_planted_faults_fail_and_debug_repairs_them(root, baseline):
    cases = []
    for kind in FAULT_KINDS:
        for locus in LOCI:
            for seed in range(2):
                code, desc = plant_fault(INITIAL, locus, random.Random(f"{kind}{locus}{seed}"), (kind,))
                if desc:
                    assert desc.startswith(kind)
                    assert G.split_program(code)[0] == G.split_program(INITIAL)[0]
                    for other in LOCI:
                        if other != locus:
                            assert G.parse_genes(code)[other] == G.parse_genes(INITIAL)[other]
                    cases.append((kind, locus, code, desc))
    kinds = {c[0] for c in cases}
    assert kinds == set(FAULT_KINDS), kinds
    results = evaluate_many([c[2] for c in cases], root)
    expected = {"misspelled_name": {"NameError"}, "off_by_one": {"IndexError"},
                "zero_divisor": {"ZeroDivisionError"}, "shape_error": {"IndexError", "ValueError", "TypeError"}}
    debugged = []
    for (kind, locus, code, desc), res in zip(cases, results):
        assert not res["correct"], (desc, code)
        assert res["exc_type"] in expected[kind], (desc, res["term_out"][-800:])
        ctx = _ctx("debug", f"dbg-{kind}-{locus}-{len(debugged)}", code=code, term_out=res["term_out"],
                   exc_type=res["exc_type"], attempt=1)
        plan, fixed = _reply(ctx)
        assert "Debug attempt 1" in plan
        debugged.append(fixed)
        # a bug the model cannot see past: repair_rate 0 keeps it
        _, kept = _reply(dict(ctx, repair_rate=0.0))
        assert G.normalise_gene(kept) != G.normalise_gene(INITIAL)
    for (kind, locus, code, desc), res in zip(cases, evaluate_many(debugged, root)):
        assert res["correct"], (desc, res["term_out"][-800:])
        assert res["combined_score"] == pytest.approx(baseline["combined_score"]), desc


def test_irrelevant_debug_edit_keeps_the_bug(root):
    code, desc = plant_fault(INITIAL, "RADII", random.Random(1), ("misspelled_name",))
    res = evaluate(code, root)
    _, kept = _reply(_ctx("debug", "dbg-none", code=code, term_out=res["term_out"], exc_type=res["exc_type"],
                          attempt=2, repair_rate=0.0))
    assert "debug attempt 2" in kept
    assert evaluate(kept, root)["exc_type"] == "NameError"


def test_fault_rate_plants_bugs_only_in_the_mutated_gene(root):
    codes = []
    for k in range(12):
        locus = LOCI[k % 3]
        _, code = _reply(_ctx("mutate", f"fault-{k}", parent_code=INITIAL, target_locus=locus, fault_rate=1.0))
        for other in LOCI:
            if other != locus:
                assert G.parse_genes(code)[other] == G.parse_genes(INITIAL)[other]
        codes.append(code)
    results = evaluate_many(codes, root)
    assert sum(not r["correct"] for r in results) >= 10, [r["error"] for r in results]


def test_debug_timeout_halves_loop_sizes_and_other_failures_restore_the_section(root):
    slow = INITIAL.replace("N_STEPS = 120", "N_STEPS = 4000")
    plan, code = _reply(_ctx("debug", "dbg-timeout", code=slow, term_out="TimeoutError: exceeded 10 s",
                             exc_type="TimeoutError", attempt=1))
    assert _params(G.parse_genes(code)["REFINE"])["N_STEPS"] == "2000"
    assert "N_STEPS" in plan
    # an evaluator-side failure with no traceback: the changed section goes back to the baseline
    broken = G.replace_gene(INITIAL, "RADII", G.parse_genes(INITIAL)["RADII"].replace(
        "scale = d / (radii[i] + radii[j])", "scale = 1.5 * d / (radii[i] + radii[j])"))
    res = evaluate(broken, root)
    assert not res["correct"] and res["exc_type"] == "ValueError"
    _, fixed = _reply(_ctx("debug", "dbg-overlap", code=broken, term_out=res["term_out"],
                           exc_type=res["exc_type"], attempt=1))
    assert evaluate(fixed, root)["correct"]
    # a missing import: the module alias is imported again after the other imports
    no_math = INITIAL.replace("import math\n", "")
    res = evaluate(no_math, root)
    assert res["exc_type"] == "NameError"
    plan, fixed = _reply(_ctx("debug", "dbg-import", code=no_math, term_out=res["term_out"],
                              exc_type=res["exc_type"], attempt=1))
    assert "import math" in plan and fixed.index("import math") > fixed.index('"""\n')
    assert evaluate(fixed, root)["correct"]


# ----------------------------------------------------------------------------- fix


def test_fix_restores_markers_stubs_syntax_and_entry(root, baseline):
    pre, genes = G.split_program(INITIAL)
    no_refine = G.render_program(pre, {k: genes[k] for k in ("LAYOUT", "RADII")})
    stub = G.replace_gene(INITIAL, "RADII", "# TODO\n\n")
    syntax = G.replace_gene(INITIAL, "LAYOUT", genes["LAYOUT"].replace("pts = []", "pts = [[["))
    no_entry = G.replace_gene(INITIAL, "REFINE", genes["REFINE"].split("def run_packing")[0])
    flat = INITIAL.replace("# [SECTION: ", "# [PART: ")
    outs = []
    for i, bad in enumerate((no_refine, stub, syntax, no_entry, flat)):
        ctx = _ctx("fix", f"fix-{i}", code=bad, errors=["missing section marker", "stub section"])
        plan, code = _reply(ctx)
        assert plan.startswith("Fix")
        assert list(G.parse_genes(code)) == LOCI
        compile(code, "program.py", "exec")
        outs.append(code)
    # an entry function that lives in the preamble (as in the built-in problems)
    entry_src = "def run_packing" + genes["REFINE"].split("def run_packing")[1]
    problem = dict(PROBLEM, initial_program=G.render_program(
        pre + "\n" + entry_src + "\n", dict(genes, REFINE=genes["REFINE"].split("def run_packing")[0])))
    _, lost = G.split_program(problem["initial_program"])
    plan, code = _reply(_ctx("fix", "fix-pre", code=G.render_program(pre, lost), problem=problem,
                             errors=["The program must define `def run_packing(...)` at the top level"]))
    assert "entry function run_packing()" in plan
    outs.append(code)
    for res in evaluate_many(outs, root):
        assert res["correct"], res["term_out"][-600:]
        assert res["combined_score"] == pytest.approx(baseline["combined_score"])


# ----------------------------------------------------------------------------- review


def test_review_fields_for_correct_and_failed_programs(root, baseline):
    code = G.replace_gene(INITIAL, "REFINE", gene_text(ALLELES["REFINE"]["annealing"]))
    res = evaluate(code, root)
    ev = {k: res[k] for k in ("correct", "error", "combined_score", "public_metrics")}
    ctx = _ctx("review", "rev-1", code=code, term_out=res["term_out"], exc_type=None, evaluation=ev)
    reply = respond(ctx)
    assert reply.tool_name == "submit_review" and reply == respond(ctx)
    args = reply.tool_arguments
    required = REVIEW_TOOL["function"]["parameters"]["required"]
    assert set(required) <= set(args) and set(REVIEW_TOOL["function"]["parameters"]["properties"]) <= set(args)
    assert args["is_bug"] is False and args["has_csv_submission"] is False
    assert args["metric"] == pytest.approx(res["combined_score"]) and args["metric_name"] == "sum_of_radii"
    assert "simulated annealing" in args["approach_tag"] and "\n" not in args["approach_tag"]
    assert len(args["approach_tag"]) <= 200 and "N_STEPS = 300" in args["approach_tag"]
    assert "sum_of_radii" in args["summary"]
    for f in ("summary", "insight", "bottleneck", "suggested_direction", "key_change"):
        assert isinstance(args[f], str) and args[f].strip()
    suggestions = {respond(_ctx("review", f"rev-s{k}", code=code, evaluation=ev)).tool_arguments["suggested_direction"]
                   for k in range(30)}
    assert any("allele 'hex_rows'" in s for s in suggestions)
    assert not any("allele 'annealing'" in s for s in suggestions)  # already used
    assert any(s.startswith("tune ") for s in suggestions)

    bad, _ = plant_fault(INITIAL, "RADII", random.Random(0), ("misspelled_name",))
    res = evaluate(bad, root)
    ev = {k: res[k] for k in ("correct", "error", "combined_score", "public_metrics")}
    args = respond(_ctx("review", "rev-2", code=bad, term_out=res["term_out"], exc_type=res["exc_type"],
                        evaluation=ev)).tool_arguments
    assert args["is_bug"] is True and args["metric"] is None
    assert "NameError" in args["summary"] and "NameError" in args["bottleneck"]
    # invalid output without an exception in the CTX
    args = respond(_ctx("review", "rev-3", code=INITIAL, evaluation={
        "correct": False, "error": "circles 0 and 1 overlap", "combined_score": 0.0})).tool_arguments
    assert args["is_bug"] is True and args["metric"] is None and "overlap" in args["summary"]


# ----------------------------------------------------------------------------- auxiliary metrics


SAMPLE_OUTPUT = {
    "centers": {"type": "ndarray", "shape": [6, 2], "dtype": "float64", "example": [[0.1, 0.2], [0.3, 0.4]]},
    "radii": {"type": "ndarray", "shape": [6], "dtype": "float64", "example": [0.1, 0.2]},
    "reported_sum": {"type": "float", "shape": [], "dtype": "float64", "example": 1.03},
    "label": {"type": "str", "shape": [], "dtype": "str", "example": "grid"},
}


def _load_aux(code: str, tmp_path: Path):
    path = tmp_path / "auxiliary_metrics.py"
    path.write_text(code)
    ns: dict = {"__name__": "auxiliary_metrics"}
    exec(compile(code, str(path), "exec"), ns)
    return ns


def test_auxiliary_metrics_file_executes_and_is_robust(root, baseline, tmp_path):
    ctx = _ctx("auxiliary_metrics", "aux-1", sample_output=SAMPLE_OUTPUT)
    assert respond(ctx) == respond(ctx)
    plan, code = _reply(ctx)
    assert "centers" in plan and "radii" in plan
    ns = _load_aux(code, tmp_path)
    defs = ns["METRIC_DEFINITIONS"]
    assert {"centers_mean", "centers_std", "centers_min", "centers_max", "centers_count", "radii_mean",
            "reported_sum"} <= set(defs)
    assert not any(k.startswith("label") for k in defs)
    for name, d in defs.items():
        assert d["name"] == name and d["interpretation"] in ("higher_better", "lower_better", "neutral")
        assert {"description", "unit", "formula"} <= set(d)
    out = baseline["output"]
    output = {"centers": np.asarray(out["centers"]), "radii": np.asarray(out["radii"]),
              "reported_sum": np.float64(sum(out["radii"])), "label": "grid"}
    metrics = ns["evaluate_auxiliary_metrics"](output)
    assert set(metrics) <= set(defs) and len(metrics) == 11
    assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    assert metrics["radii_mean"] == pytest.approx(np.mean(out["radii"]))
    assert metrics["radii_max"] == pytest.approx(max(out["radii"])) and metrics["centers_count"] == 6.0
    assert metrics["reported_sum"] == pytest.approx(baseline["combined_score"])
    # JSON-decoded output (lists), a missing key, a non-numeric value, a bare value, None
    assert set(ns["evaluate_auxiliary_metrics"]({"radii": out["radii"]})) == {
        "radii_mean", "radii_std", "radii_min", "radii_max", "radii_count"}
    assert ns["evaluate_auxiliary_metrics"]({"radii": ["a", "b"], "centers": None}) == {}
    assert ns["evaluate_auxiliary_metrics"]([1, 2, 3]) == {}
    assert ns["evaluate_auxiliary_metrics"](None) == {}
    with_nan = ns["evaluate_auxiliary_metrics"]({"radii": [0.1, float("nan")], "reported_sum": float("inf")})
    assert with_nan["radii_mean"] == pytest.approx(0.1) and "reported_sum" not in with_nan
    # the file also runs as a standalone module in a fresh interpreter
    script = tmp_path / "run_aux.py"
    script.write_text("import json\nfrom auxiliary_metrics import evaluate_auxiliary_metrics as f\n"
                      "print(json.dumps(f({'radii': [0.1, 0.2, 0.3], 'tour': [1, 2]})))\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["radii_mean"] == pytest.approx(0.2)


def test_auxiliary_metrics_for_a_bare_or_missing_sample(tmp_path):
    _, code = _reply(_ctx("auxiliary_metrics", "aux-2", sample_output={
        "tour": {"type": "list", "shape": [52], "dtype": "int64", "example": [0, 5, 3]}}))
    ns = _load_aux(code, tmp_path)
    m = ns["evaluate_auxiliary_metrics"]({"tour": list(range(52))})
    assert m["tour_count"] == 52.0 and m["tour_max"] == 51.0
    _, code = _reply(_ctx("auxiliary_metrics", "aux-3"))
    ns = _load_aux(code, tmp_path)
    assert ns["METRIC_DEFINITIONS"] == {} and ns["evaluate_auxiliary_metrics"]({"x": [1.0]}) == {}


# ----------------------------------------------------------------------------- through litellm


def test_calls_through_litellm(root):
    def call(ctx, **kw):
        return litellm.completion(model="offline/swarm-evo", messages=[{"role": "user", "content": "prompt"}],
                                  metadata={"swarm_evo": ctx}, num_retries=0, **kw)

    resp = call(_ctx("draft", "llm-draft", draft_history=[]))
    text = resp.choices[0].message.content
    assert text == respond(_ctx("draft", "llm-draft", draft_history=[])).content
    code = _code(text)
    assert list(G.parse_genes(code)) == LOCI and resp.usage.completion_tokens > 100
    res = evaluate(code, root)
    assert res["correct"], res["term_out"]
    ev = {k: res[k] for k in ("correct", "error", "combined_score", "public_metrics")}
    resp = call(_ctx("review", "llm-review", code=code, term_out=res["term_out"], exc_type=None, evaluation=ev),
                tools=[REVIEW_TOOL], tool_choice=REVIEW_TOOL_CHOICE)
    tool_call = resp.choices[0].message.tool_calls[0]
    assert tool_call.function.name == "submit_review"
    args = json.loads(tool_call.function.arguments)
    assert args["is_bug"] is False and args["metric"] == pytest.approx(res["combined_score"])
    resp = call(_ctx("auxiliary_metrics", "llm-aux", sample_output=SAMPLE_OUTPUT))
    assert "def evaluate_auxiliary_metrics" in _code(resp.choices[0].message.content)
    with pytest.raises(Exception, match="unknown purpose"):
        call(_ctx("dance", "llm-bad"))


# ----------------------------------------------------------------------------- a small evolutionary run


def _debug_until_correct(code: str, res: dict, key: str, root: Path, seed: int) -> tuple[str, dict, bool]:
    for attempt in range(1, 4):
        if res["correct"]:
            return code, res, attempt > 1
        _, code = _reply(_ctx("debug", f"{key}:debug{attempt}", seed=seed, code=code, term_out=res["term_out"],
                              exc_type=res["exc_type"], attempt=attempt, repair_rate=0.8))
        res = evaluate(code, root)
    return code, res, res["correct"]


@pytest.mark.slow  # a search run
def test_a_small_two_phase_run_improves_the_score(root, baseline):
    """Drafts (phase 1), then mutations and merges of the best programs (phase 2), with faults."""
    seed = 11
    history, pool = [], []
    planted = repaired = 0
    for k in range(5):
        _, code = _reply(_ctx("draft", f"run:draft{k}", seed=seed, fault_rate=0.25, draft_history=list(history)))
        res = evaluate(code, root)
        planted += not res["correct"]
        code, res, fixed = _debug_until_correct(code, res, f"run:draft{k}", root, seed)
        repaired += fixed
        ev = {k2: res[k2] for k2 in ("correct", "error", "combined_score", "public_metrics")}
        review = respond(_ctx("review", f"run:review{k}", seed=seed, code=code, evaluation=ev)).tool_arguments
        history.append({"step": k, "approach_tag": review["approach_tag"], "metric": review["metric"]})
        if res["correct"]:
            pool.append((res["combined_score"], code))
    assert len({tag_signature(h["approach_tag"]) for h in history}) >= 4
    best_draft = max(s for s, _ in pool)
    rng = random.Random(seed)
    for step in range(24):
        pool.sort(key=lambda x: -x[0])
        if step % 6 == 5 and len(pool) >= 2:
            primary, secondary = pool[0][1], pool[1][1]
            locus = rng.choice(LOCI)
            ctx = _ctx("merge", f"run:merge{step}", seed=seed, fault_rate=0.25, primary_parent_code=primary,
                       gene_plan={locus: {"code": G.parse_genes(secondary)[locus], "source_node_id": "b"}})
        else:
            ctx = _ctx("mutate", f"run:mutate{step}", seed=seed, fault_rate=0.25, parent_code=pool[0][1],
                       target_locus=rng.choice(LOCI))
        _, code = _reply(ctx)
        res = evaluate(code, root)
        planted += not res["correct"]
        code, res, fixed = _debug_until_correct(code, res, f"run:{step}", root, seed)
        repaired += fixed
        if res["correct"]:
            pool.append((res["combined_score"], code))
    best = max(pool)[0]
    assert planted >= 3 and repaired >= 2
    assert best > best_draft and best > baseline["combined_score"] + 0.05, (best, best_draft, baseline)
