"""The dispatcher: which agent takes a step (SPEC §9; seed 000 K).

ε-greedy over an exponential moving average (EMA) of the quality each agent achieved per
operation. With probability ε a uniformly random agent is chosen (exploration); otherwise the
agent with the highest EMA for the step's operation (exploitation). A pair that has never
been tried counts as best, so every agent gets each operation once before EMAs compete; ties
are broken at random. After every step the chosen pair's EMA is updated with the node's
quality (:func:`swarm_evo.learning.quality.node_quality`):

    ema <- quality                                  on the pair's first update
    ema <- (1 - alpha) * ema + alpha * quality      afterwards

The upstream system never called the update, so the argmax stayed on the first agent, which
did 89 % of the work. The state is saved in ``RUN_DIR/agents/dispatcher.json`` after every
update so a continued run keeps its scores; it lists the journal nodes already folded in
(``applied``), so a run resumed after a crash folds in exactly the nodes it missed
(:mod:`swarm_evo.run.resume`).
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

from swarm_evo.operators import registry
from swarm_evo.population.journal import atomic_write_text

STATE_FILE = "dispatcher.json"


class Dispatcher:
    """ε-greedy agent choice per operation with EMA scores. Thread-safe.

    Args:
        agent_ids: the agents to choose from (at least one).
        epsilon: exploration probability in [0, 1].
        alpha: EMA weight of the newest quality, in (0, 1].
        path: JSON file the state is saved to after every update (None: not saved).

    Its operations are those agents write when it is made
    (:func:`swarm_evo.operators.registry.agent_operations`).
    """

    def __init__(self, agent_ids: list[str], epsilon: float, alpha: float, path: Path | None = None) -> None:
        if not agent_ids:
            raise ValueError("the dispatcher needs at least one agent")
        if not 0 <= epsilon <= 1 or not 0 < alpha <= 1:
            raise ValueError(f"epsilon must be in [0, 1] and alpha in (0, 1] (got {epsilon}, {alpha})")
        self.agent_ids = list(agent_ids)
        self.epsilon = float(epsilon)
        self.alpha = float(alpha)
        self.path = Path(path) if path else None
        self.operations = registry.agent_operations()
        self.scores: dict[str, dict[str, float | None]] = {a: dict.fromkeys(self.operations) for a in agent_ids}
        self.updates: dict[str, dict[str, int]] = {a: dict.fromkeys(self.operations, 0) for a in agent_ids}
        self.chosen: dict[str, int] = {a: 0 for a in agent_ids}
        self.applied: set[str] | None = set()  # node ids folded in; None: unknown (an old state file)
        self._lock = threading.Lock()

    @classmethod
    def open(cls, agent_ids: list[str], epsilon: float, alpha: float, path: Path) -> "Dispatcher":
        """A dispatcher saving to ``path``, continuing the saved state when the file exists."""
        dispatcher = cls(agent_ids, epsilon, alpha, path)
        if Path(path).exists():
            state = json.loads(Path(path).read_text(encoding="utf-8"))
            for agent in agent_ids:
                dispatcher.scores[agent].update(state.get("scores", {}).get(agent, {}))
                dispatcher.updates[agent].update(state.get("updates", {}).get(agent, {}))
                dispatcher.chosen[agent] = state.get("chosen", {}).get(agent, 0)
            applied = state.get("applied")
            dispatcher.applied = set(applied) if applied is not None else None
        return dispatcher

    def choose(self, operation: str, rng: random.Random) -> str:
        """The agent for one step of ``operation`` (one of ``self.operations``).

        Raises:
            ValueError: unknown operation.
        """
        if operation not in self.operations:
            raise ValueError(f"unknown operation {operation!r}; expected one of {self.operations}")
        with self._lock:
            if rng.random() < self.epsilon:
                agent = rng.choice(self.agent_ids)
            else:
                def key(a: str) -> float:
                    score = self.scores[a][operation]
                    return float("inf") if score is None else score

                best = max(key(a) for a in self.agent_ids)
                agent = rng.choice([a for a in self.agent_ids if key(a) == best])
            self.chosen[agent] += 1
            return agent

    def update(self, agent_id: str, operation: str, quality: float, node_id: str | None = None) -> float:
        """Fold ``quality`` (0..1) into the EMA of ``(agent_id, operation)``; save; return the new EMA.

        ``node_id`` (the journal node the quality belongs to) is recorded in ``applied``; a
        node already applied is not folded in twice (the EMA is returned unchanged).

        Raises:
            KeyError: unknown agent. ValueError: unknown operation or quality outside [0, 1].
        """
        if operation not in self.operations:
            raise ValueError(f"unknown operation {operation!r}")
        if not 0.0 <= quality <= 1.0:
            raise ValueError(f"quality must be in [0, 1] (got {quality})")
        with self._lock:
            old = self.scores[agent_id][operation]
            if node_id is not None and self.applied is not None:
                if node_id in self.applied:
                    return old
                self.applied.add(node_id)
            new = quality if old is None else (1 - self.alpha) * old + self.alpha * quality
            self.scores[agent_id][operation] = new
            self.updates[agent_id][operation] += 1
            self._save_locked()
            return new

    def reset(self, agent_id: str) -> None:
        """Forget an agent's EMA scores (all operations), e.g. after its texts were rewritten:
        its pairs count as untried again, so the greedy choice tries the new texts instead of
        judging them by the old texts' record. Counts of updates and choices are kept.

        Raises:
            KeyError: unknown agent.
        """
        with self._lock:
            self.scores[agent_id] = dict.fromkeys(self.operations)
            self._save_locked()

    def state(self) -> dict:
        """JSON-ready state: epsilon, alpha, scores, updates and choices per agent."""
        with self._lock:
            return self._state_locked()

    def _state_locked(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "alpha": self.alpha,
            "scores": json.loads(json.dumps(self.scores)),
            "updates": json.loads(json.dumps(self.updates)),
            "chosen": dict(self.chosen),
            "applied": sorted(self.applied) if self.applied is not None else None,
        }

    def _save_locked(self) -> None:
        if self.path is not None:
            atomic_write_text(self.path, json.dumps(self._state_locked(), indent=2))
