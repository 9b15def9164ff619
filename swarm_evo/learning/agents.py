"""Agents: role and strategy texts per operation, kept in the run directory (SPEC §9).

A run has ``num_agents`` agents (``agent-1`` ... ``agent-N``). Each has a ``role`` text (who the
agent is; the opening of its prompts) and one strategy text per operation agents write
(:func:`swarm_evo.operators.registry.agent_operations`: draft, merge, mutate; the ``# Strategy``
section of that operation's prompt). All
agents start from the same files in ``prompt_templates/agents/``; agent evolution rewrites the
weak ones. The texts live in ``RUN_DIR/agents/<agent_id>/<kind>.md`` and
``RUN_DIR/agents/agents.json`` (generation and ancestry), never in the repository: the
upstream system rewrote its templates in place.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from pydantic import BaseModel, Field

from swarm_evo.operators import registry
from swarm_evo.population.journal import atomic_write_text
from swarm_evo.prompting.prompts import templates_dir

log = logging.getLogger(__name__)

ROLE = "role"
"""The text kind of an agent's role (the opening of its prompts)."""


def text_kinds() -> tuple[str, ...]:
    """The texts of an agent: its role, then a strategy per operation agents write (the registry's order)."""
    return (ROLE, *registry.agent_operations())

AGENTS_DIR = "agents"
INDEX_FILE = "agents.json"


class Agent(BaseModel):
    """One agent: id, its texts (:func:`text_kinds`), and how it came to be.

    ``generation`` is 0 for the starting texts and counts rewrites; ``evolved_from`` names the
    elite whose texts the last rewrite started from.
    """

    id: str
    texts: dict[str, str]
    generation: int = 0
    evolved_from: str | None = None
    history: list[int] = Field(default_factory=list, description="Indices of the evolutions that rewrote it.")

    def strategy(self, operation: str) -> str:
        """The strategy text for ``operation`` (one the agents write)."""
        return self.texts[operation]


def initial_texts(folder: Path | None = None) -> dict[str, str]:
    """The starting texts: ``<folder>/<kind>.md`` for every kind of :func:`text_kinds`; ``folder``
    defaults to ``prompt_templates/agents/`` (ML competitions; problems use
    ``prompt_templates/agents/program/``).

    Raises:
        FileNotFoundError: a file is missing (names it).
    """
    folder = folder or templates_dir() / AGENTS_DIR
    texts = {}
    kinds = text_kinds()
    for kind in kinds:
        path = folder / f"{kind}.md"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: every agent text ({', '.join(kinds)}) needs a file")
        texts[kind] = path.read_text(encoding="utf-8").strip()
    return texts


class AgentPool:
    """The run's agents, persisted under ``RUN_DIR/agents/``. Thread-safe.

    Build with :meth:`open`; an existing directory is continued (texts and generations as
    saved), otherwise ``num_agents`` agents are created from :func:`initial_texts`.
    """

    def __init__(self, directory: Path, agents: list[Agent]) -> None:
        self.directory = Path(directory)
        self._agents = {a.id: a for a in agents}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, run_dir: Path, num_agents: int, texts_dir: Path | None = None) -> "AgentPool":
        """Load ``RUN_DIR/agents`` or create it with ``num_agents`` identical agents whose
        texts come from ``texts_dir`` (see :func:`initial_texts`). A saved agent that lacks a text
        kind (an operation added since the run began) gets the starting text, saved and logged.

        Raises:
            ValueError: the saved pool has a different number of agents than ``num_agents``.
        """
        directory = Path(run_dir) / AGENTS_DIR
        index = directory / INDEX_FILE
        if index.exists():
            meta = json.loads(index.read_text(encoding="utf-8"))
            agents, filled, defaults = [], [], None
            for entry in meta["agents"]:
                texts = {}
                for kind in text_kinds():
                    path = directory / entry["id"] / f"{kind}.md"
                    if path.is_file():
                        texts[kind] = path.read_text(encoding="utf-8").strip()
                        continue
                    # a text kind added since the run began (a new operation): the starting text
                    defaults = defaults if defaults is not None else initial_texts(texts_dir)
                    texts[kind] = defaults[kind]
                    filled.append(f"{entry['id']}/{kind}.md")
                agents.append(Agent(texts=texts, **{k: v for k, v in entry.items() if k != "texts"}))
            if len(agents) != num_agents:
                raise ValueError(
                    f"{index} has {len(agents)} agents but agents.num_agents is {num_agents}: "
                    "use the saved number or a new run directory"
                )
            pool = cls(directory, agents)
            if filled:
                log.info("agents: %s filled from the starting texts (kinds added since the run began)",
                         ", ".join(filled))
                pool.save()
            return pool
        texts = initial_texts(texts_dir)
        pool = cls(directory, [Agent(id=f"agent-{i + 1}", texts=dict(texts)) for i in range(num_agents)])
        pool.save()
        return pool

    @property
    def ids(self) -> list[str]:
        """Agent ids in creation order."""
        return list(self._agents)

    def get(self, agent_id: str) -> Agent:
        """A copy of agent ``agent_id``. Raises KeyError for an unknown id."""
        with self._lock:
            return self._agents[agent_id].model_copy(deep=True)

    def all(self) -> list[Agent]:
        """Copies of all agents."""
        with self._lock:
            return [a.model_copy(deep=True) for a in self._agents.values()]

    def rewrite(self, agent_id: str, texts: dict[str, str], evolved_from: str, evolution: int) -> Agent:
        """Replace an agent's texts (all of :func:`text_kinds`), bump its generation, save; return it.

        Raises:
            KeyError: unknown agent. ValueError: a text kind is missing or empty.
        """
        kinds = text_kinds()
        missing = [k for k in kinds if not str(texts.get(k) or "").strip()]
        if missing:
            raise ValueError(f"new texts for {agent_id} lack {', '.join(missing)}")
        with self._lock:
            agent = self._agents[agent_id]
            agent.texts = {k: str(texts[k]).strip() for k in kinds}
            agent.generation += 1
            agent.evolved_from = evolved_from
            agent.history.append(evolution)
            self._save_locked()
            return agent.model_copy(deep=True)

    def save(self) -> None:
        """Write every agent's texts and the index (atomic per file)."""
        with self._lock:
            self._save_locked()

    def _save_locked(self) -> None:
        for agent in self._agents.values():
            for kind in agent.texts:
                atomic_write_text(self.directory / agent.id / f"{kind}.md", agent.texts[kind] + "\n")
        index = {"agents": [a.model_dump(exclude={"texts"}) for a in self._agents.values()]}
        atomic_write_text(self.directory / INDEX_FILE, json.dumps(index, indent=2))
