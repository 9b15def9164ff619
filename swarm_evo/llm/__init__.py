"""LLM access helpers; ``swarm_evo.llm.offline`` is the built-in offline model (SPEC §7).

May import: config, operators, population, prompting.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any module here imports litellm: no price-map download


def import_litellm():
    """The ``litellm`` module, imported on first use, with its debug banner off
    (``suppress_debug_info``). The modules here import it where they price, probe or call a
    model, never at their own import: importing litellm costs ≈ 2.5 s of CPU (litellm 1.106.2,
    measured with ``python -X importtime``: more than half of importing the flows), which the
    processes that import the flows and never call a model (a sweep driver, ``prefect deploy``,
    Prefect's crash-hook runner, ``swarm-evo pool setup``) no longer pay."""
    import litellm

    litellm.suppress_debug_info = True
    return litellm
