"""Deterministic answers to the ``submit_agent_texts`` tool call (SPEC §9 agent evolution).

The rewrite starts from the elite agent's texts (it scored best) and keeps their substance,
then appends, per operation, a "Lessons from your history" block built from the rewritten
agent's own best and worst plans and its statistics (reliability first when it fails often,
push for quality when it succeeds but scores low). The role ends with
``(strategy generation N, evolved from <elite>)``. Blocks written by an earlier evolution are
removed before new ones are appended, so texts do not grow across generations; every text is
kept under ``MAX_TEXT_CHARS``. Wording variants come from the call's rng only.
"""

from __future__ import annotations

import math
import random
import re

from swarm_evo.operators import registry

MAX_TEXT_CHARS = 3900
SUMMARY_CHARS = 120
LESSONS_TITLE = "Lessons from your history"
FOCUS_PREFIX = "Current focus:"

# An appended lessons block: from its heading to the next heading of level 1-3 (or the end).
_LESSONS_RE = re.compile(r"(?ms)^[ \t]*#{1,6}[ \t]*" + re.escape(LESSONS_TITLE) + r".*?(?=^[ \t]*#{1,3}[ \t]|\Z)")
# The role's appended focus paragraph, ending with the generation marker.
_FOCUS_RE = re.compile(r"(?s)\s*" + re.escape(FOCUS_PREFIX) + r"[^\n]*?\(strategy generation \d+, evolved from [^)\n]*\)\s*$")
_MARKER_RE = re.compile(r"\s*\(strategy generation \d+, evolved from [^)\n]*\)\s*$")

DEFAULT_ROLE = ("You are a Kaggle grandmaster who writes complete, correct, well-validated "
                "machine-learning programs.")
"""The role when neither the elite nor the agent has one; an operation's text falls back to its
``AgentText.fallback`` (:mod:`swarm_evo.operators`)."""

_RELIABILITY = [
    "Reliability first: {yours} fail too often (success rate {sr}). Check that every "
    "column you use exists in both train and test, guard against missing values before fitting, "
    "and keep the model simple until the program runs end to end. {op_hint}",
    "Make it run before making it clever: only {sr} of {yours} produced a valid "
    "submission. Validate column names against the data, impute or drop missing values "
    "explicitly, and prefer a plain, robust model. {op_hint}",
    "A correct program beats an ambitious broken one: the success rate of {yours} is {sr}. Confirm "
    "the columns you read are present, handle NaNs and unseen categories, and avoid fragile "
    "tricks. {op_hint}",
]
_QUALITY = [
    "Push for quality: {yours} usually run (success rate {sr}) but rank low (mean "
    "quality {mq}). Try a stronger model family, tune its hyper-parameters and invest in "
    "feature engineering to improve {metric}. {op_hint}",
    "Running is no longer the problem for {yours} (success rate {sr}); the score is (mean "
    "quality {mq}). "
    "Aim higher on {metric}: better model families, tuned hyper-parameters, richer features. "
    "{op_hint}",
    "Raise the bar: {sr} of {yours} succeed, yet their mean quality is only {mq}. "
    "Reach for a stronger learner, search its key hyper-parameters and engineer informative "
    "features for {metric}. {op_hint}",
]
_REFINE = [
    "Keep what works: {yours} are reliable (success rate {sr}) and competitive (mean "
    "quality {mq}). Refine incrementally and keep validating every change on {metric}.",
    "You are doing well with {yours} (success rate {sr}, mean quality {mq}). Make careful, "
    "measurable improvements on {metric} rather than wholesale rewrites.",
    "The record of {yours} is strong (success rate {sr}, mean quality {mq}); consolidate it with "
    "small, validated gains on {metric}.",
]
_UNTRIED = [
    "You have no {op} experience yet: follow the guidance above closely and start from a "
    "robust, well-validated baseline.",
    "No {op} steps of yours have been recorded: begin conservatively with a dependable "
    "approach and validate it properly.",
]
_FOCUS = {
    "reliability": ["produce programs that run end to end and write a valid submission, then improve them.",
                    "reliability before ambition: validated inputs, simple robust models.",
                    "fewer failures: check the data you use and keep models simple until they run."],
    "quality": ["turn reliable programs into high-scoring ones with stronger models and better features.",
                "raise the validation score: stronger model families, tuning, feature engineering.",
                "quality of the metric, now that the programs run reliably."],
    "refine": ["steady, validated improvements on an already strong record.",
               "consolidate what works and refine it step by step.",
               "careful incremental gains on a strong baseline."],
    "untried": ["build a robust, well-validated baseline first.",
                "start conservatively and validate every step."],
}
_BEST_LEAD = ["Build on what worked:", "Your best plans did this:", "Repeat the ideas behind:"]
_WORST_LEAD = ["Avoid repeating:", "Do not repeat:", "Steer clear of:"]


def _num(value, default: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if math.isfinite(out) else default


def _fmt(value) -> str:
    return f"{_num(value):.2f}"


def trim_summary(text, limit: int = SUMMARY_CHARS) -> str:
    """One line of at most ``limit`` characters (cut at a word boundary, with an ellipsis)."""
    flat = " ".join(str(text or "").split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:.") + "…"


def strip_evolved(text: str) -> str:
    """The text without blocks appended by an earlier evolution (lessons, focus, marker)."""
    text = _LESSONS_RE.sub("", str(text or ""))
    text = _FOCUS_RE.sub("", text)
    text = _MARKER_RE.sub("", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _fit(base: str, appendix: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``base`` + ``appendix`` within ``limit`` characters, shortening the base (at a paragraph
    or word boundary) when needed; the appendix is kept whole."""
    sep = "\n\n" if base and appendix else ""
    room = limit - len(appendix) - len(sep)
    if len(base) > room:
        room = max(room - 2, 0)
        cut = base[:room]
        for boundary in ("\n\n", "\n", " "):
            pos = cut.rfind(boundary)
            if pos > room // 2:
                cut = cut[:pos]
                break
        base = cut.rstrip() + " …" if cut.strip() else ""
        sep = "\n\n" if base and appendix else ""
    return (base + sep + appendix)[:limit]


def _texts(agent: dict | None) -> dict:
    texts = (agent or {}).get("texts") or {}
    return texts if isinstance(texts, dict) else {}


def _base_text(key: str, elite: dict | None, agent: dict | None) -> str:
    for source in (elite, agent):
        stripped = strip_evolved(_texts(source).get(key) or "")
        if stripped:
            return stripped
    return DEFAULT_ROLE if key == "role" else registry.get(key).agent.fallback


def _op_stats(stats: dict, op: str) -> tuple[int, float, float, bool]:
    """``(steps, success_rate, mean_quality, overall)`` of ``op``; the agent's overall figures
    (``overall`` True) when it has no step of that operation."""
    stats = stats if isinstance(stats, dict) else {}
    per = (stats.get("per_operation") or {}).get(op) or {}
    if isinstance(per, dict) and int(_num(per.get("steps"))) > 0:
        return int(_num(per.get("steps"))), _num(per.get("success_rate")), _num(per.get("mean_quality")), False
    return (int(_num(stats.get("steps"))), _num(stats.get("success_rate")), _num(stats.get("mean_quality")),
            True)


def _mode(steps: int, success: float, quality: float) -> str:
    if steps <= 0:
        return "untried"
    if success < 0.5:
        return "reliability"
    if quality < 0.5:
        return "quality"
    return "refine"


def _metric_phrase(comp: dict) -> str:
    grader = comp.get("grader") or "the validation metric"
    if "is_lower_better" in comp:
        return f"{grader} ({'lower' if comp.get('is_lower_better') else 'higher'} is better)"
    return str(grader)


def _plans(plans, op: str, limit: int = 3) -> list[dict]:
    """Up to ``limit`` plans with a summary: those of ``op`` first, then the others."""
    valid = [p for p in (plans or []) if isinstance(p, dict) and str(p.get("plan_summary") or "").strip()]
    same = [p for p in valid if p.get("operation") == op]
    other = [p for p in valid if p.get("operation") != op]
    return (same + other)[:limit]


def _plan_line(plan: dict, op: str, worst: bool) -> str:
    summary = trim_summary(plan.get("plan_summary"))
    where = "" if plan.get("operation") in (None, op) else f"[{plan.get('operation')}] "
    if worst and plan.get("exc_type"):
        tail = f"(failed with {plan['exc_type']})"
    else:
        tail = f"(quality {_fmt(plan.get('quality'))})"
    return f"- {where}{summary} {tail}"


def lessons_block(op: str, ctx: dict, rng: random.Random) -> str:
    """The "Lessons from your history" block for one operation."""
    agent = ctx.get("agent") or {}
    stats = agent.get("stats") or {}
    steps, success, quality, overall = _op_stats(stats, op)
    mode = _mode(steps, success, quality)
    generation = int(_num(ctx.get("generation"), 1))
    yours = f"your steps so far (none was a {op} step)" if overall else f"your {op} steps"
    fields = {"op": op, "yours": yours, "sr": _fmt(success), "mq": _fmt(quality),
              "metric": _metric_phrase(ctx.get("competition") or {})}
    variants = {"reliability": _RELIABILITY, "quality": _QUALITY, "refine": _REFINE, "untried": _UNTRIED}[mode]
    text = registry.get(op).agent
    fields["op_hint"] = text.reliability if mode in ("reliability", "untried") else text.quality
    advice = rng.choice(variants).format(**fields).strip()
    parts = [f"### {LESSONS_TITLE} (generation {generation})", advice]
    best = _plans(ctx.get("best_plans"), op)
    if best:
        parts.append(rng.choice(_BEST_LEAD) + "\n" + "\n".join(_plan_line(p, op, False) for p in best))
    worst = _plans(ctx.get("worst_plans"), op)
    if worst:
        parts.append(rng.choice(_WORST_LEAD) + "\n" + "\n".join(_plan_line(p, op, True) for p in worst))
    if not best and not worst:
        parts.append("No plan summaries were recorded yet; record a clear plan for every step.")
    return "\n\n".join(parts)


def evolve_agent(ctx: dict, rng: random.Random) -> dict:
    """The ``submit_agent_texts`` arguments for an ``evolve_agent`` CTX: ``role``, a text per
    operation agents write (:func:`swarm_evo.operators.registry.agent_operations`), ``rationale``;
    all non-empty strings."""
    agent = ctx.get("agent") or {}
    elite = ctx.get("elite") or None
    if not _texts(elite):
        elite = None
    agent_id = str(agent.get("id") or "the agent")
    elite_id = str((elite or {}).get("id") or agent_id)
    generation = int(_num(ctx.get("generation"), 1))
    stats = agent.get("stats") or {}
    old = _texts(agent)

    out: dict[str, str] = {}
    operations = registry.agent_operations()
    for op in operations:
        text = _fit(_base_text(op, elite, agent), lessons_block(op, ctx, rng))
        if text == str(old.get(op) or ""):
            text = _fit(_base_text(op, elite, agent), lessons_block(op, ctx, rng) + " Revised again.")
        out[op] = text

    steps = int(_num(stats.get("steps")))
    success, quality = _num(stats.get("success_rate")), _num(stats.get("mean_quality"))
    mode = _mode(steps, success, quality)
    marker = f"(strategy generation {generation}, evolved from {elite_id})"
    focus = f"{FOCUS_PREFIX} {rng.choice(_FOCUS[mode])} {marker}"
    role = _fit(_base_text("role", elite, agent), focus)
    if role == str(old.get("role") or ""):
        role = _fit(_base_text("role", elite, agent), f"{FOCUS_PREFIX} {_FOCUS[mode][0]} (revised) {marker}")
    out["role"] = role

    elite_score = _num(((elite or {}).get("stats") or {}).get("score"))
    reason = {"reliability": f"its success rate {success:.2f} is below 0.5, so the texts put reliability first",
              "quality": f"it succeeds ({success:.2f}) but its mean quality {quality:.2f} is low, "
                         "so the texts push for quality",
              "refine": f"its record is solid (success {success:.2f}, quality {quality:.2f}), "
                        "so the texts refine what works",
              "untried": "it has no recorded steps yet, so the texts ask for a robust baseline"}[mode]
    n_best, n_worst = len(ctx.get("best_plans") or []), len(ctx.get("worst_plans") or [])
    out["rationale"] = (
        f"Rewrote {agent_id} (score {_num(stats.get('score')):.3f}) from the texts of elite {elite_id} "
        f"(score {elite_score:.3f}) for generation {generation}; {reason}. "
        f"Lessons use {n_best} best and {n_worst} worst plans of {agent_id}.")
    return {k: out[k] for k in ("role", *operations, "rationale")}
