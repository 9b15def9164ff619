"""A stand-in OpenAI/Ollama-compatible model server for end-to-end tests (issue 13, item 8).

- :mod:`.scenarios`: the :class:`Scenario` schedule (reply shapes, tool support, failures,
  faults) and the named presets :data:`SCENARIOS`;
- :mod:`.brain`: reads a swarm-evo prompt and asks the offline model for the real answer;
- :mod:`.voice`: words the answer the way real models do;
- :mod:`.app`: the FastAPI app and :class:`StandInServer` (uvicorn in a thread, request log);
- :mod:`.runner`: runs ``swarm-evo run`` processes against it;
- :mod:`.fixture`: the ``llm_server`` pytest fixture (session-scoped).
"""

from .app import RequestRecord, StandInServer, closed_port, count_tokens
from .runner import API_KEY, RunResult, run_swarm
from .scenarios import SCENARIOS, Scenario

__all__ = ["API_KEY", "RequestRecord", "RunResult", "SCENARIOS", "Scenario", "StandInServer",
           "closed_port", "count_tokens", "run_swarm"]
