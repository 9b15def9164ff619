"""One page per node for people (issue 54, item 3): what a node is, its scores, its error, the
tail of its output, its diff to its parent (for a merge, per gene source), its debug chain and
its code — Markdown of bounded size that ``tasks/persist.py`` publishes as a Prefect markdown
artifact when the node is appended, so the run's page in the Prefect UI reaches every node's code
and diffs on one machine or on a pool (no file of the run directory needed).

No Prefect here; the diffs are :mod:`difflib` unified diffs.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.reporting.failures import error_line, tail
from swarm_evo.reporting.fitness_report import HIDDEN_NAME, fmt_score, score_name, shown_score
from swarm_evo.reporting.report import node_status

MAX_PAGE_CHARS = 60_000
"""Largest page (characters): a Prefect artifact is a database row, and the UI lists them."""
MAX_CODE_CHARS = 24_000
"""Largest code listing on a page (head kept; a line says how much was cut)."""
MAX_DIFF_CHARS = 12_000
"""Largest diff on a page (each; head kept)."""
MAX_OUTPUT_CHARS = 4_000
"""Largest output tail on a page (the node's, and each debug attempt's)."""


def _fence(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _head(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a closing line saying how many were left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters left out)"


def unified_diff(old: str, new: str, old_name: str, new_name: str, limit: int = MAX_DIFF_CHARS) -> str:
    """The unified diff (3 lines of context) of two programs, cut to ``limit`` characters; ``""``
    when they are equal."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=old_name, tofile=new_name)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return _head(text, limit)


def _get(journal: Journal, node_id: str | None) -> Node | None:
    if not node_id:
        return None
    try:
        return journal.get(node_id)
    except KeyError:
        return None


def _ref(node: Node | None, node_id: str | None) -> str:
    if node is None:
        return f"`{(node_id or '')[:8]}` (not in the journal)" if node_id else "—"
    return f"step {node.step} ({node.operation}, `{node.id[:8]}`)"


def _facts(journal: Journal, node: Node, best: Node | None, name: str) -> list[str]:
    usage = node.llm_usage
    timings = node.metadata.get("timings") or {}
    rows: list[tuple[str, Any]] = [
        ("node", f"`{node.id}`"),
        ("status", node_status(node, best)),
        ("phase / epoch", f"{node.phase} / {node.epoch}"),
        ("parent", _ref(_get(journal, node.parent_id), node.parent_id)),
        (name + " (what the run selects on)", fmt_score(shown_score(node, name))),
    ]
    if name == HIDDEN_NAME:
        rows.append(("printed validation metric", fmt_score(node.metric_value)))
    rows += [
        ("metric direction", "lower is better" if node.lower_is_better else "higher is better"),
        ("debug attempts", node.debug_attempts),
        ("agent", node.agent_id or "—"),
        ("approach", (node.approach_tag or "—").replace("|", "\\|").replace("\n", " ")[:300]),
        ("model calls", "none" if not usage.calls else
         f"{usage.calls} ({usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens, "
         f"{'unknown cost' if usage.cost is None else f'${usage.cost:.4f}'})"),
        ("seconds", f"execution {timings.get('exec', '—')} (all attempts), last {node.exec_time if node.exec_time is not None else '—'}, "
                    f"step {timings.get('wall', '—')}"),
    ]
    if node.metadata.get("target_locus"):
        rows.append(("mutated locus", node.metadata["target_locus"]))
    return ["| field | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]


def _diff_section(journal: Journal, node: Node) -> list[str]:
    parent = _get(journal, node.parent_id)
    lines: list[str] = []
    if parent is not None:
        diff = unified_diff(parent.code, node.code, f"step {parent.step} ({parent.id[:8]})", f"step {node.step} ({node.id[:8]})")
        lines += ["", f"## Diff to its parent, {_ref(parent, parent.id)}", "",
                  _fence(diff, "diff") if diff else "The same program as its parent."]
    elif node.parent_id:
        lines += ["", f"## Diff to its parent", "", f"Its parent `{node.parent_id[:8]}` is not in the journal."]
    by_source: dict[str, list[str]] = {}
    for locus, source in node.gene_sources.items():
        by_source.setdefault(source, []).append(str(locus))
    if by_source:
        lines += ["", "## Genes per source (merge)", ""]
        for source_id, loci in by_source.items():
            source = _get(journal, source_id)
            lines.append(f"### {', '.join(loci)} from {_ref(source, source_id)}")
            if source is None:
                continue
            parts = [unified_diff(source.genes.get(locus, ""), node.genes.get(locus, ""), f"{locus} of step {source.step}",
                                  f"{locus} of step {node.step}", MAX_DIFF_CHARS // max(1, len(node.gene_sources)))
                     for locus in loci]
            parts = [p for p in parts if p]
            lines += ["", _fence("".join(parts), "diff") if parts else "Taken unchanged.", ""]
    return lines


def _chain_section(node: Node) -> list[str]:
    history = [h for h in node.metadata.get("debug_history") or [] if isinstance(h, dict)]
    if not history:
        return []
    lines = ["", "## Debug chain", ""]
    previous = None
    for entry in history:
        n = entry.get("attempt")
        problems = entry.get("problems")
        outcome = "succeeded" if problems == [] else f"failed: {entry.get('exc_type') or 'no exception'}"
        lines.append(f"### Attempt {n}: {outcome}")
        if problems:
            lines += ["", *(f"- {str(p).strip()[:500]}" for p in problems)]
        if entry.get("term_out"):
            lines += ["", "Output (tail):", "", _fence(tail(entry["term_out"], MAX_OUTPUT_CHARS))]
        code = entry.get("code")
        if previous is not None and code is not None:
            diff = unified_diff(previous, code, f"attempt {n - 1}" if isinstance(n, int) else "before", f"attempt {n}",
                                MAX_DIFF_CHARS // 2)
            lines += ["", f"Fix (diff to the program before it):", "", _fence(diff, "diff") if diff else "No change."]
        previous = code if code is not None else previous
        lines.append("")
    return lines


def node_page_markdown(journal: Journal, node: Node, *, flow_run_url: str | None = None) -> str:
    """The node's page (Markdown, at most :data:`MAX_PAGE_CHARS` characters): a table of its facts
    (status, parent, the score the run selects on with the printed metric beside it, model calls
    and seconds), its error (exception and output tail) when it failed, its diff to its parent
    and, for a merge, per gene source the diff of the genes it took, its debug chain (each
    attempt's outcome, output tail and fix as a diff) and its code. ``flow_run_url`` links the
    step's flow run."""
    page = _page(journal, node, flow_run_url, MAX_CODE_CHARS)
    if len(page) > MAX_PAGE_CHARS:  # every section is bounded; the code gives way first, whole fences kept
        page = _page(journal, node, flow_run_url, max(2_000, MAX_CODE_CHARS - (len(page) - MAX_PAGE_CHARS) - 200))
    if len(page) > MAX_PAGE_CHARS:
        page = page[: MAX_PAGE_CHARS - 200] + "\n\n… (page cut to its size limit; the node's files are in the run directory)\n"
    return page


def _page(journal: Journal, node: Node, flow_run_url: str | None, code_chars: int) -> str:
    best = journal.best_node()
    name = score_name(journal)
    lines = [f"# Node step {node.step}: {node.operation} ({node_status(node, best)})", ""]
    if flow_run_url:
        lines += [f"Step flow run: [{flow_run_url}]({flow_run_url})", ""]
    lines += _facts(journal, node, best, name)
    if node.is_buggy or node.dead:
        lines += ["", "## Error", "", _fence(error_line(node.exc_type, node.exc_info)[:2000])]
    if node.term_out:
        lines += ["", "## Output (tail)", "", _fence(tail(node.term_out, MAX_OUTPUT_CHARS))]
    lines += _diff_section(journal, node)
    lines += _chain_section(node)
    lines += ["", "## Code", "", _fence(_head(node.code, code_chars), "python")]
    return "\n".join(lines) + "\n"
