"""The built-in ``offline`` model (SPEC §7): a litellm custom provider needing no network or key.

``register()`` makes ``litellm.completion(model="offline/<name>", messages=...,
metadata={"swarm_evo": CTX})`` answer in-process with real pandas + scikit-learn programs
(draft, mutate, merge, debug, fix) or a ``submit_review`` tool call (review).
With ``injected_failure_rate`` in the CTX (``model.injected_failure_rate``) some calls fail on
purpose, for reliability testing (:mod:`.failures`).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .provider import PROVIDER, OfflineLLM, extract_ctx, register  # noqa: E402
from .respond import Reply, respond  # noqa: E402

__all__ = ["PROVIDER", "OfflineLLM", "Reply", "extract_ctx", "register", "respond"]
