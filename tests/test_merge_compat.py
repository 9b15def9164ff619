"""Merge compatibility check (seed 003): frameworks from gene imports, and the warnings for
stub genes, mixed deep-learning frameworks, DL genes next to a non-DL model, and mismatched
gradient-boosting libraries."""

from __future__ import annotations

from swarm_evo.population import genes as G
from swarm_evo.search.merge_compat import (
    FRAMEWORKS,
    boosting_libraries,
    check_merge_compatibility,
    gene_frameworks,
)

A, B, C = "a" * 8 + "0" * 24, "b" * 8 + "1" * 24, "c" * 8 + "2" * 24
STUB = "# Not applicable — handled by the model.\n"

TABULAR = """import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold
import lightgbm as lgb
# [SECTION: DATA]
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
X = train.drop(columns=["Transported"]).select_dtypes("number").fillna(-1)
y = train["Transported"].astype(int)
# [SECTION: MODEL]
from sklearn.ensemble import RandomForestClassifier
model = lgb.LGBMClassifier(n_estimators=600, learning_rate=0.05, random_state=42)
# [SECTION: LOSS]
objective = "binary"  # LightGBM objective
model.set_params(objective=objective)
# [SECTION: OPTIMIZER]
model.set_params(learning_rate=0.03, n_estimators=900)
# [SECTION: REGULARIZATION]
model.set_params(reg_lambda=1.0, num_leaves=31, min_child_samples=20)
# [SECTION: INITIALIZATION]
np.random.seed(42)
model.set_params(random_state=42)
# [SECTION: TRAINING_TRICKS]
callbacks = [lgb.early_stopping(50), lgb.log_evaluation(0)]
"""

TORCH_GENES = {
    "MODEL": "import torch\nimport torch.nn as nn\n\nmodel = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))\n",
    "LOSS": "import torch.nn as nn\ncriterion = nn.BCEWithLogitsLoss()\n",
    "OPTIMIZER": "from torch.optim import AdamW\noptimizer = AdamW(model.parameters(), lr=1e-3)\n",
}


def tabular_genes() -> tuple[str, dict[str, str]]:
    return G.split_program(TABULAR)


# --------------------------------------------------------------------------- frameworks
def test_frameworks_catalogue():
    assert FRAMEWORKS["torchvision"] == "torch" and FRAMEWORKS["keras"] == "tensorflow"
    assert FRAMEWORKS["flax"] == "jax" and FRAMEWORKS["sklearn"] == "sklearn"
    assert {FRAMEWORKS[k] for k in ("lightgbm", "xgboost", "catboost")} == {"lightgbm", "xgboost", "catboost"}


def test_gene_frameworks_from_imports():
    preamble, genes = tabular_genes()
    assert gene_frameworks(preamble) == {"sklearn", "lightgbm"}
    assert gene_frameworks("from sklearn.ensemble import HistGradientBoostingClassifier\n") == {"sklearn"}
    assert gene_frameworks("import lightgbm as lgb\nm = lgb.LGBMRegressor()\n") == {"lightgbm"}
    assert gene_frameworks(TORCH_GENES["MODEL"]) == {"torch"}
    assert gene_frameworks("import torch.nn as nn\nimport torchvision.transforms as T\n") == {"torch"}
    assert gene_frameworks("from tensorflow import keras\n") == {"tensorflow"}
    assert gene_frameworks("import keras\n") == {"tensorflow"}
    assert gene_frameworks("from flax import linen as nn\nimport optax\n") == {"jax"}
    assert gene_frameworks("import numpy as np, pandas as pd\nfrom .utils import helper\n") == set()
    assert gene_frameworks("# import torch  (not used)\nx = 1\n") == set()
    # the MODEL gene imports sklearn itself; lgb comes from the preamble (only with preamble)
    assert gene_frameworks(genes["MODEL"]) == {"sklearn"}
    assert gene_frameworks(genes["MODEL"], preamble) == {"sklearn", "lightgbm"}
    # a name the preamble imports but the gene does not use does not count
    assert gene_frameworks(genes["DATA"], preamble) == set()


def test_gene_frameworks_fallback_for_genes_that_are_not_python_alone():
    fragment = (
        "    import xgboost as xgb\n"
        "    from catboost import (CatBoostClassifier,\n"
        "    model = xgb.XGBClassifier(\n"  # unclosed: the gene ends mid-call
    )
    assert gene_frameworks(fragment) == {"xgboost", "catboost"}
    indented = "    import torch\n    x = torch.zeros(3)\n"  # valid once dedented
    assert gene_frameworks(indented) == {"torch"}
    assert gene_frameworks("model = lgb.train(params, (\n", "import lightgbm as lgb\n") == {"lightgbm"}


def test_boosting_libraries_from_classes_and_params():
    assert boosting_libraries("model = LGBMRegressor(n_estimators=500)\n") == {"lightgbm"}
    assert boosting_libraries('params = {"tree_method": "hist", "max_depth": 6}\n') == {"xgboost"}
    assert boosting_libraries("model.set_params(l2_leaf_reg=3.0)\n") == {"catboost"}
    assert boosting_libraries("params = dict(num_leaves=63)\n") == {"lightgbm"}
    # shared names (reg_lambda, max_depth) and comments say nothing
    assert boosting_libraries("params = {'reg_lambda': 1.0, 'max_depth': 6}  # tree_method='hist'\n") == set()


# --------------------------------------------------------------------------- warnings
def test_compatible_plan_has_no_warnings():
    preamble, genes = tabular_genes()
    sources = {locus: (A if i % 2 else B) for i, locus in enumerate(G.LOCI)}
    assert check_merge_compatibility(genes, sources) == []
    assert check_merge_compatibility(genes, sources, preambles={l: preamble for l in genes}) == []
    assert check_merge_compatibility(TORCH_GENES, {l: C for l in TORCH_GENES}) == []


def test_stub_genes_warn_only_where_they_matter():
    _, genes = tabular_genes()
    scaffold = dict(genes)
    genes["TRAINING_TRICKS"] = ""  # from the scaffold A, which has code there: its own choice
    genes["LOSS"] = STUB  # from B while the scaffold A has code there: the merge would drop it
    sources = {l: A for l in genes} | {"LOSS": B}
    assert check_merge_compatibility(genes, sources, primary_id=A, scaffold=scaffold) == [
        f"gene LOSS (from node {B[:8]}) is only a stub while the primary parent's LOSS has code: "
        "keep the primary parent's LOSS unless dropping it is intended",
    ]
    # the scaffold's own "Not applicable" stubs, or a stub where the scaffold has one too: no warning
    scaffold["LOSS"] = STUB
    assert check_merge_compatibility(genes, sources, primary_id=A, scaffold=scaffold) == []
    genes["LOSS"], sources["LOSS"] = STUB, A
    assert check_merge_compatibility(genes, sources, primary_id=A, scaffold=scaffold) == []
    # without the scaffold, a stub outside the required loci is the documented convention
    assert check_merge_compatibility({"LOSS": STUB}) == []
    # a required locus (DATA, MODEL; a problem's required_loci) must hold real code
    assert check_merge_compatibility({"MODEL": STUB}) == [
        "gene MODEL is empty but MODEL must hold real code: write it or keep the primary parent's"
    ]
    assert check_merge_compatibility({"MODEL": STUB}, {"MODEL": A}, primary_id=A, scaffold={"MODEL": STUB}) == [
        f"gene MODEL (from node {A[:8]}) is empty but MODEL must hold real code: write it"
    ]
    assert check_merge_compatibility({"LOSS": STUB}, required=("LOSS",)) != []
    # the threshold is the caller's
    assert check_merge_compatibility({"MODEL": "x = 1\n"}, stub_threshold=3) == []
    assert check_merge_compatibility({"MODEL": "x = 1\n"}) != []


def test_two_deep_learning_frameworks_conflict():
    genes = dict(TORCH_GENES)
    genes["OPTIMIZER"] = "from tensorflow import keras\noptimizer = keras.optimizers.Adam(learning_rate=1e-3)\n"
    sources = {"MODEL": A, "LOSS": A, "OPTIMIZER": B}
    assert check_merge_compatibility(genes, sources) == [
        "framework conflict: the genes use more than one deep-learning framework "
        f"(torch in MODEL (from node {A[:8]}), LOSS (from node {A[:8]}); "
        f"tensorflow in OPTIMIZER (from node {B[:8]})); "
        "use the MODEL gene's torch throughout and rewrite the other genes for it"
    ]


def test_deep_learning_loss_next_to_a_gradient_boosting_model():
    preamble, genes = tabular_genes()
    genes["LOSS"] = TORCH_GENES["LOSS"]
    genes["INITIALIZATION"] = "import torch\ntorch.manual_seed(42)\nnp.random.seed(42)\n"
    sources = {l: A for l in genes} | {"LOSS": C, "INITIALIZATION": C}
    warnings = check_merge_compatibility(genes, sources, preambles={l: preamble for l in genes})
    assert len(warnings) == 2
    assert warnings[0].startswith(
        f"framework conflict: gene LOSS (from node {C[:8]}) uses torch but the MODEL gene uses only "
        "lightgbm, sklearn: rewrite LOSS for lightgbm, sklearn"
    )
    assert warnings[1].startswith(f"framework conflict: gene INITIALIZATION (from node {C[:8]}) uses torch")
    # the MODEL's library is recognised from its class name even without the preamble
    genes["MODEL"] = "model = LGBMClassifier(n_estimators=600)\n"
    assert [w.split(":")[0] for w in check_merge_compatibility(genes)] == ["framework conflict"] * 2
    # a MODEL with no recognisable framework gives no such warning
    genes["MODEL"] = "model = build_model(width=128, depth=4)\n"
    assert check_merge_compatibility(genes) == []


def test_gradient_boosting_library_mismatch():
    preamble, genes = tabular_genes()
    genes["REGULARIZATION"] = 'params = {"reg_lambda": 1.0, "tree_method": "hist", "max_depth": 6}\nmodel.set_params(**params)\n'
    sources = {l: A for l in genes} | {"REGULARIZATION": B}
    assert check_merge_compatibility(genes, sources, preambles={l: preamble for l in genes}) == [
        f"library mismatch: gene REGULARIZATION (from node {B[:8]}) is written for xgboost but the "
        "MODEL gene uses lightgbm: translate its parameters and calls to lightgbm's names"
    ]
    # TRAINING_TRICKS using `xgb` imported in its own source program's preamble
    _, genes = tabular_genes()
    genes["TRAINING_TRICKS"] = "model.fit(X, y, callbacks=[xgb.callback.EarlyStopping(rounds=50)])\n"
    preambles = {l: preamble for l in genes} | {"TRAINING_TRICKS": "import xgboost as xgb\n"}
    (warning,) = check_merge_compatibility(genes, {}, preambles=preambles)
    assert warning.startswith("library mismatch: gene TRAINING_TRICKS is written for xgboost")
    # the same gene without its preamble is not attributed to anything
    assert check_merge_compatibility(genes) == []


def test_warning_kinds_come_in_a_fixed_order():
    preamble, genes = tabular_genes()
    genes["OPTIMIZER"] = "import torch\noptimizer = torch.optim.SGD(params, lr=0.1)\n"
    genes["INITIALIZATION"] = "import jax\nkey = jax.random.PRNGKey(0)\n"
    genes["REGULARIZATION"] = "model.set_params(l2_leaf_reg=3.0, random_strength=1.0)\n"
    genes["TRAINING_TRICKS"] = STUB
    warnings = check_merge_compatibility(genes, preambles={l: preamble for l in genes}, required=("TRAINING_TRICKS",))
    assert [w.split(":")[0] for w in warnings] == [
        "gene TRAINING_TRICKS is empty but TRAINING_TRICKS must hold real code", "framework conflict", "framework conflict",
        "framework conflict", "library mismatch",
    ]
    assert "torch in OPTIMIZER; jax in INITIALIZATION" in warnings[1]
    assert "use one of them throughout" in warnings[1]  # MODEL is not a deep-learning gene
    assert "gene OPTIMIZER uses torch" in warnings[2]
    assert "gene INITIALIZATION uses jax" in warnings[3]
    assert "written for catboost" in warnings[4]
    # deterministic: the dict's insertion order does not matter
    shuffled = {l: genes[l] for l in reversed(list(genes))}
    assert check_merge_compatibility(shuffled, preambles={l: preamble for l in genes},
                                     required=("TRAINING_TRICKS",)) == warnings
