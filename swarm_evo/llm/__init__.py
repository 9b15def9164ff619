"""LLM access helpers; ``swarm_evo.llm.offline`` is the built-in offline model (SPEC §7).

May import: config, operators, population, prompting.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before any module here imports litellm: no price-map download
