"""The stand-in server's "brain": what a competent model would answer to a swarm-evo prompt.

The server sees only the HTTP request, as a real model does. The brain reads the rendered
prompt (templates in ``prompt_templates/``): the competition id from its "Competition: …
(`id`)" line, the purpose from the template's headings (draft, mutate, merge, debug, fix,
review, evolve_agent, auxiliary_metrics, the preflight probe), and the code, output, errors
and plans from its fenced blocks and bullet lists. It builds the structured context the
offline model needs (``swarm_evo/run/model_context.py`` ``offline_context``; the competition part from
``CompetitionObjective.offline_view``) and asks the offline model
(:func:`swarm_evo.llm.offline.respond.respond`) for a real, runnable program or review.

Planted faults (:data:`FAULT_TAG` lines, see :func:`plant_fault`) and marker-less variants the
voice produced are remembered, so a debug or self-fix prompt showing them gets the repaired
program back, as a model that understood the error would give.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swarm_evo.population.genes import LOCI
from swarm_evo.search.review import parse_metric

from .scenarios import CHATTY_BYTES, Scenario

FAULT_TAG = "# stand-in:"
SLEEP_TAG = "# stand-in run time"
"""Comment that ends every line the server planted as a fault (the debug brain removes them)."""

SLOW_FAMILIES = ("RandomForest", "ExtraTrees", "GradientBoosting")
"""Families the brain avoids in drafts when ``Scenario.fast_programs`` is set (slow on 2 cores)."""

FENCE = re.compile(r"^```[ \t]*([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
COMPETITION_ID = re.compile(r"ompetition:?\s+[^`\n]{0,200}?(?:\n[^`\n]{0,200}?)?\(`([^`]+)`")
PROBE = "Reply with the single word OK."


@dataclass
class Answer:
    """What the brain would answer. ``kind``: ``code`` (``plan`` + ``code``), ``review``
    (``arguments`` of submit_review), ``tool`` (``tool_name`` + ``arguments``: e.g.
    submit_agent_texts), ``text`` (``text``: the probe's "OK")."""

    purpose: str
    kind: str
    plan: str = ""
    code: str = ""
    arguments: dict = field(default_factory=dict)
    tool_name: str | None = None
    text: str = ""
    quoted_line: str | None = None
    """For debug answers: the faulty line of the program being debugged (the voice may quote it)."""
    competition_id: str | None = None


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``[(language, body)]`` of the complete fenced blocks in ``text``, in order."""
    return [(m.group(1), m.group(2).rstrip("\n")) for m in FENCE.finditer(text)]


def block_after(prompt: str, heading: str) -> str | None:
    """The body of the first fenced block after the first line starting with ``heading``."""
    at = _heading_at(prompt, heading)
    if at is None:
        return None
    m = FENCE.search(prompt, at)
    return m.group(2).rstrip("\n") if m else None


def bullets_after(prompt: str, heading: str) -> list[str]:
    """The ``- item`` lines right after the line starting with ``heading`` (blank lines skipped)."""
    at = _heading_at(prompt, heading)
    if at is None:
        return []
    out = []
    for line in prompt[at:].splitlines()[1:]:
        if line.startswith("- "):
            out.append(line[2:].strip())
        elif line.strip() and out:
            break
        elif line.strip() and not line.startswith("- "):
            break
    return out


def _heading_at(prompt: str, heading: str) -> int | None:
    m = re.search(r"^" + re.escape(heading), prompt, re.M)
    return m.start() if m else None


def purpose_of(prompt: str) -> str:
    """The purpose of a swarm-evo prompt, from its template's headings."""
    if PROBE in prompt and len(prompt) < 200:
        return "probe"
    if "You are reviewing one" in prompt:
        return "review"
    if "You improve the instructions of an AI agent" in prompt:
        return "evolve_agent"
    if "You are an evaluation expert" in prompt:
        return "auxiliary_metrics"
    if re.search(r"^## Buggy program", prompt, re.M):
        return "debug"
    if "was checked before running and has these problems" in prompt:
        return "fix"
    if re.search(r"^## Gene plan", prompt, re.M):
        return "merge"
    if re.search(r"^## Parent solution", prompt, re.M):
        return "mutate"
    if "# Output format" in prompt:
        return "draft"
    return "chat"


def competition_id_of(prompt: str) -> str | None:
    """The competition id from the prompt's "Competition: Name (`id`)" line (or the review's
    "the competition\\nName (`id`, ...)")."""
    m = COMPETITION_ID.search(prompt)
    return m.group(1).split(",")[0].strip() if m else None


def is_reask(prompt: str) -> bool:
    """True when the prompt ends with one of the client's "Your previous reply ..." reminders."""
    tail = prompt[-3000:]
    return "Your previous reply" in tail


def strip_markers(code: str) -> str:
    """``code`` without its ``# [SECTION: X]`` lines (a model that forgot the markers)."""
    return "\n".join(line for line in code.splitlines() if not line.startswith("# [SECTION:")) + "\n"


def _norm(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


ANSWER_HUNT = r"""
import atexit as _ax, glob as _gl, os as _os, shutil as _sh, socket as _so
_found = []
def _try(_p):
    try:
        if _p not in _found and _os.path.isfile(_p) and open(_p).readline():
            _found.append(_p)
    except OSError:
        pass
try:
    for _l in open('/proc/self/mountinfo'):
        for _m in _l.split()[3:5]:
            _try(_os.path.join(_os.path.dirname(_m.rstrip('/')), 'private', 'test.csv'))
except OSError:
    pass
_up = _os.path.dirname(_os.path.realpath('input'))
_try(_os.path.join(_up, 'private', 'test.csv'))
for _d in _gl.glob('/proc/[0-9]*'):
    _try(_d + '/root' + _up + '/private/test.csv')
for _r in ('/work', '/data', '/home', '/root', '/tmp', '/mnt', '/srv', '/opt', '..', '../..', '../../..'):
    for _d, _ds, _fs in _os.walk(_r):
        if _d.count('/') - _r.count('/') >= 6 or len(_found) > 3:
            _ds[:] = []
        if _os.path.basename(_d) == 'private' and 'test.csv' in _fs:
            _try(_os.path.join(_d, 'test.csv'))
_ports = set()
for _t in ('/proc/net/tcp', '/proc/net/tcp6'):
    try:
        _ports |= {int(_f[1].rsplit(':', 1)[1], 16) for _f in (_x.split() for _x in list(open(_t))[1:]) if _f[3] == '0A'}
    except OSError:
        pass
_reached = []
for _p in sorted(_ports | {4200, 8000, 11434}):
    with _so.socket() as _k:
        _k.settimeout(0.3)
        if _k.connect_ex(('127.0.0.1', _p)) == 0:
            _reached.append(_p)
print('HUNT: answers=' + (','.join(_found) or 'none') + '; ports=' + (','.join(map(str, _reached)) or 'none'), flush=True)
if _found:
    _ax.register(_sh.copyfile, _found[0], './submission/submission.csv')
"""
"""The ``answer_hunt`` fault (issue 32): what a model that wants a better score may try."""


def plant_fault(code: str, fault: str) -> tuple[str, str]:
    """``(code with the fault, the faulty line)``. Planted lines end with :data:`FAULT_TAG` and
    go at the start of the TRAINING_TRICKS section (after data loading, before CV), so the
    program still passes the static check and fails only when run."""
    if fault == "chatty_crash":
        lines = [
            f"for _epoch in range({CHATTY_BYTES // 60}):  {FAULT_TAG} noisy training log",
            f"    print(f'[epoch {{_epoch:6d}}] train_loss=0.693147 val_loss=0.693147 lr=1e-3')  {FAULT_TAG}",
            f"raise RuntimeError('training diverged: loss is nan after warm-up')  {FAULT_TAG} crash",
        ]
        faulty = lines[2]
    elif fault == "name_error":
        lines = [f"X = X.fillna(FILL_VALUE)  {FAULT_TAG} undefined name"]
        faulty = lines[0]
    elif fault == "disk_fill":
        lines = [
            f"with open('./working/cache.bin', 'wb') as _fh:  {FAULT_TAG} fills the disk",
            f"    for _ in range(10 * 1024): _fh.write(bytes(1 << 20))  {FAULT_TAG} 10 GB",
        ]
        faulty = lines[1]
    elif fault in ("submission_fifo", "submission_dir"):
        make = "_os.mkfifo(_p)" if fault == "submission_fifo" else "_os.mkdir(_p)"
        lines = [
            f"import atexit as _atexit, os as _os  {FAULT_TAG} at exit: no file where the submission was",
            f"_p = './submission/submission.csv'  {FAULT_TAG}",
            f"_atexit.register(lambda: (_os.path.exists(_p) and _os.remove(_p), {make}))  {FAULT_TAG}",
        ]
        faulty = lines[2]
    elif fault == "liar":
        lines = [
            f"import atexit as _atexit, shutil as _shutil  {FAULT_TAG} at exit: a constant and a made-up metric",
            "_atexit.register(lambda: (_shutil.copyfile('./input/sample_submission.csv', "
            f"'./submission/submission.csv'), print('Validation metric: 0.99')))  {FAULT_TAG}",
        ]
        faulty = lines[1]
    elif fault == "answer_hunt":
        lines = [f"exec({ANSWER_HUNT!r})  {FAULT_TAG} hunts for the answers and the host's services"]
        faulty = lines[0]
    else:
        raise ValueError(f"unknown fault {fault!r}")
    marker = "# [SECTION: TRAINING_TRICKS]"
    if marker in code:
        head, tail = code.split(marker, 1)
        tail_lines = tail.split("\n")
        # keep the marker's comment lines first, then the planted lines
        i = 1
        while i < len(tail_lines) and tail_lines[i].startswith("#"):
            i += 1
        new = head + marker + "\n".join(tail_lines[:i]) + "\n" + "\n".join(lines) + "\n" + "\n".join(tail_lines[i:])
        return new, faulty
    return code.rstrip("\n") + "\n" + "\n".join(lines) + "\n", faulty


MISSPELT_IMPORTS = ("HistGradientBoostingClassifer", "RandomForestClasifier", "GradientBoostingClasifier",
                    "ExtraTreesClasifier")
"""Names :func:`crash_at_import` imports from ``sklearn.ensemble`` (none exists), in rotation."""


def crash_at_import(code: str, n: int) -> str:
    """``code`` (its planted lines removed) with the ``n``-th misspelt import of
    :data:`MISSPELT_IMPORTS` as its first line: an ImportError before anything runs."""
    name = MISSPELT_IMPORTS[n % len(MISSPELT_IMPORTS)]
    return f"from sklearn.ensemble import {name}  {FAULT_TAG} a fix that crashes at import\n" + remove_faults(code)


def remove_faults(code: str) -> str:
    """``code`` without the lines :func:`plant_fault` added."""
    return "\n".join(line for line in code.splitlines() if FAULT_TAG not in line) + "\n"


class Brain:
    """Answers swarm-evo prompts with the offline model (thread-safe; one per server).

    ``data_dir`` holds the prepared competitions (the MLE-bench layout the run uses);
    ``scenario`` sets ``fast_programs``, ``draft_faults``, ``seed`` and the reviewer.
    """

    def __init__(self, data_dir: Path | None, scenario: Scenario):
        self.data_dir = Path(data_dir) if data_dir else None
        self.scenario = scenario
        self._lock = threading.Lock()
        self._objectives: dict[str, dict] = {}
        self._seen: dict[str, int] = {}
        self._variants: dict[str, str] = {}
        self.drafts = 0
        self.programs = 0
        self.debug_fixes = 0

    def reset(self, scenario: Scenario, data_dir: Path | None = None) -> None:
        """Forget every remembered program and counter; use ``scenario`` from now on."""
        with self._lock:
            self.scenario = scenario
            if data_dir is not None:
                self.data_dir = Path(data_dir)
            self._seen.clear()
            self._variants.clear()
            self.drafts = 0
            self.programs = 0
            self.debug_fixes = 0

    def remember_variant(self, variant: str, canonical: str) -> None:
        """Remember that ``variant`` (e.g. the program without markers) stands for ``canonical``:
        a self-fix prompt showing the variant gets the canonical program back."""
        with self._lock:
            self._variants[_norm(variant)] = canonical

    # ------------------------------------------------------------------ context
    def _competition(self, cid: str) -> dict:
        with self._lock:
            if cid not in self._objectives:
                if self.data_dir is None:
                    raise ValueError("the stand-in server was not given a data_dir")
                from swarm_evo.competition.loader import load_competition
                from swarm_evo.objective.competition import CompetitionObjective

                self._objectives[cid] = CompetitionObjective(load_competition(cid, self.data_dir)).offline_view()
            return self._objectives[cid]

    def _ctx(self, purpose: str, prompt: str, cid: str) -> dict[str, Any]:
        key = hashlib.sha1(prompt.encode()).hexdigest()[:12]
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
        return {
            "purpose": purpose,
            "seed": self.scenario.seed,
            "call_key": f"{purpose}:{key}:{n}",
            "fault_rate": 0.0,
            "repair_rate": 1.0,
            **self._competition(cid),
            "loci": list(LOCI),
        }

    # ------------------------------------------------------------------ answers
    def answer(self, prompt: str) -> Answer:
        """What the model answers to ``prompt`` (the user messages' text)."""
        from swarm_evo.llm.offline.respond import respond

        purpose = purpose_of(prompt)
        if purpose == "probe":
            return Answer(purpose, "text", text="OK")
        if purpose == "chat":
            return Answer(purpose, "text", text="I can help with that. What would you like me to do?")
        cid = competition_id_of(prompt)
        if purpose == "auxiliary_metrics" or cid is None:
            return Answer(purpose, "text", text="I cannot tell which competition this is about.")
        if purpose == "evolve_agent":
            return self._evolve_agent(prompt, cid, respond)
        ctx = self._ctx(purpose, prompt, cid)
        if purpose == "review":
            return self._review(prompt, ctx, respond, cid)
        if purpose == "debug":
            return self._debug(prompt, ctx, respond, cid)
        if purpose == "fix":
            code = block_after(prompt, "## Your program") or ""
            with self._lock:
                canonical = self._variants.get(_norm(code))
            if canonical is not None:
                return Answer(purpose, "code", plan="Restored the seven section markers the check asked for.",
                              code=canonical, competition_id=cid)
            ctx.update(code=code, errors=bullets_after(prompt, "Your program was checked"))
        elif purpose == "draft":
            history = self._draft_history(prompt)
            if self.scenario.fast_programs:
                history += [{"step": 0, "approach_tag": f"{f} + raw columns", "metric": None} for f in SLOW_FAMILIES]
            ctx["draft_history"] = history
        elif purpose == "mutate":
            target = re.search(r"Change code inside the `# \[SECTION: (\w+)\]` section only", prompt)
            ctx.update(parent_code=block_after(prompt, "## Parent solution") or "",
                       target_locus=target.group(1) if target else "MODEL")
        elif purpose == "merge":
            ctx.update(primary_parent_code=block_after(prompt, "## Reference solution") or "",
                       gene_plan=self._gene_plan(prompt))
        plan, code = _split_reply(respond(ctx).content or "")
        code = self._fast(code)
        if purpose == "draft":
            with self._lock:
                index = self.drafts
                self.drafts += 1
            fault = self.scenario.draft_faults.get(index)
            if fault:
                code, _ = plant_fault(code, fault)
        return Answer(purpose, "code", plan=plan, code=code, competition_id=cid)

    def _fast(self, code: str) -> str:
        if self.scenario.fast_programs:
            code = re.sub(r"^N_FOLDS = \d+$", "N_FOLDS = 3", code, flags=re.M)
        if self.scenario.program_seconds is not None:
            code = self._sleeping(code)
        return code

    def _sleeping(self, code: str) -> str:
        """``code`` with one sleep of :attr:`Scenario.program_seconds` at its top (a parent's sleep,
        which merges and mutates carry over, replaced)."""
        median, sigma, low, high = self.scenario.program_seconds
        with self._lock:
            index = self.programs
            self.programs += 1
        rng = random.Random(f"{self.scenario.seed}:sleep:{index}")
        seconds = min(high, max(low, median * math.exp(sigma * rng.gauss(0.0, 1.0))))
        body = "\n".join(line for line in code.splitlines() if SLEEP_TAG not in line)
        return f"import time as _stand_in_time  {SLEEP_TAG}\n_stand_in_time.sleep({seconds:.2f})  {SLEEP_TAG}\n{body}\n"

    def _draft_history(self, prompt: str) -> list[dict]:
        out = []
        for m in re.finditer(r"^- \[Step (\d+)\] (.*?) → (metric=(\S+)|failed)\s*$", prompt, re.M):
            try:
                metric = float(m.group(4)) if m.group(4) else None
            except ValueError:
                metric = None
            out.append({"step": int(m.group(1)), "approach_tag": m.group(2), "metric": metric})
        return out

    def _gene_plan(self, prompt: str) -> dict:
        plan = {}
        for m in re.finditer(r"^### (\w+) \(from node (\w+)[^\n]*\n", prompt, re.M):
            fence = FENCE.match(prompt, m.end())
            if fence is None:
                continue
            body = fence.group(2)
            if "characters of code cut" in body:  # bounded: keep the scaffold's own section
                continue
            plan[m.group(1)] = {"code": body.rstrip("\n") + "\n", "source_node_id": m.group(2)}
        return plan

    def _debug(self, prompt: str, ctx: dict, respond, cid: str) -> Answer:
        code = block_after(prompt, "## Buggy program") or ""
        if self.scenario.debug_fixes == "crash_at_import":
            with self._lock:
                n = self.debug_fixes
                self.debug_fixes += 1
            return Answer("debug", "code", plan="Switched to a faster gradient-boosting estimator.",
                          code=crash_at_import(code, n), competition_id=cid)
        exc = re.search(r"Your previous program failed with (\w+)", prompt)
        attempt = re.search(r"debug attempt\s+(\d+)", prompt)
        quoted = next((line.strip() for line in code.splitlines() if FAULT_TAG in line and "raise" in line), None) \
            or next((line.strip() for line in code.splitlines() if FAULT_TAG in line), None)
        if FAULT_TAG in code:
            return Answer("debug", "code", plan="The planted lines crash the program; removed them.",
                          code=remove_faults(code), quoted_line=quoted, competition_id=cid)
        with self._lock:
            canonical = self._variants.get(_norm(code))
        if canonical is not None:
            return Answer("debug", "code", plan="Restored the section markers.", code=canonical, competition_id=cid)
        term_out = block_after(prompt, "## Execution output") or ""
        ctx.update(code=code, term_out=term_out, exc_type=exc.group(1) if exc else None,
                   attempt=int(attempt.group(1)) if attempt else 1)
        plan, new = _split_reply(respond(ctx).content or "")
        line = _error_line(term_out, code)
        return Answer("debug", "code", plan=plan, code=self._fast(new), quoted_line=line, competition_id=cid)

    def _review(self, prompt: str, ctx: dict, respond, cid: str) -> Answer:
        code = block_after(prompt, "## Program") or ""
        term_out = block_after(prompt, "## Execution output") or ""
        exc = re.search(r"^## Execution output \(ended with (\w+)\)", prompt, re.M)
        errors = bullets_after(prompt, "## Submission check")
        ctx.update(code=code, term_out=term_out, exc_type=exc.group(1) if exc else None,
                   parsed_metric=parse_metric(term_out), submission_errors=errors)
        reply = respond(ctx)
        args = dict(reply.tool_arguments or {})
        if self.scenario.reviewer == "always_bug":
            args.update(is_bug=True, metric=None,
                        summary="The validation metric is not believable for this data; I consider the run buggy.")
        return Answer("review", "review", arguments=args, tool_name="submit_review", competition_id=cid)

    def _evolve_agent(self, prompt: str, cid: str, respond) -> Answer:
        ctx = self._ctx("evolve_agent", prompt, cid)

        def texts(heading: str) -> dict:
            at = _heading_at(prompt, heading)
            if at is None:
                return {}
            part = prompt[at:].split("\n## ", 2)[0]
            return {m.group(1): m.group(2).strip() for m in
                    re.finditer(r"^### (\w+)\n(.*?)(?=^### |\Z)", part, re.M | re.S)}

        agent = re.search(r"Rewrite the texts of agent `([^`]+)`", prompt)
        elite = re.search(r"## Texts of the elite (\S+)", prompt)
        ctx.update(agent={"id": agent.group(1) if agent else "agent", "texts": texts("## Current texts of")},
                   elite={"id": elite.group(1) if elite else "elite", "texts": texts("## Texts of the elite")},
                   generation=1)
        reply = respond(ctx)
        return Answer("evolve_agent", "tool", arguments=dict(reply.tool_arguments or {}),
                      tool_name=reply.tool_name or "submit_agent_texts", competition_id=cid)


def _split_reply(content: str) -> tuple[str, str]:
    """``(plan, code)`` of an offline code reply (plan, then one ```python block)."""
    m = FENCE.search(content)
    if m is None:
        return content.strip(), ""
    return content[: m.start()].strip(), m.group(2).rstrip("\n") + "\n"


def _error_line(term_out: str, code: str) -> str | None:
    """The program line a traceback points at (``File "solution.py", line N``), if any."""
    lines = code.splitlines()
    for m in reversed(list(re.finditer(r'File "[^"]*", line (\d+)', term_out))):
        n = int(m.group(1))
        if 1 <= n <= len(lines) and lines[n - 1].strip():
            return lines[n - 1].strip()
    return None
