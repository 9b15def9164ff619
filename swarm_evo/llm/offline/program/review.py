"""The ``review`` reply: ``submit_review`` arguments for a program-optimisation node.

Read from ``evaluation`` (correct, error, combined_score, public_metrics), the traceback, and
the code's ``# allele:`` comments and parameters (the suggested direction is an allele swap,
a parameter to tune or one of the problem's directions).
"""

from __future__ import annotations

import math
import random
import re

from swarm_evo.population import genes as G

from .alleles import allele_description, allele_label, allele_table, current_allele
from .params import find_params
from .problem import problem_loci, problem_of
from .repairs import error_line
from .tags import approach_tag, tag_signature


def _numbers(d: dict | None) -> dict[str, float]:
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[str(k)] = float(v)
    return out


def review(ctx: dict, rng: random.Random) -> dict:
    """``submit_review`` arguments from ``evaluation`` ({correct, error, combined_score,
    public_metrics}) and the code's ``# allele:`` comments and parameters."""
    p = problem_of(ctx)
    code = ctx.get("code") or ""
    ev = ctx.get("evaluation") if isinstance(ctx.get("evaluation"), dict) else {}
    exc = ctx.get("exc_type")
    score_name = str(p.get("score_name") or "combined_score")
    score = ev.get("combined_score")
    finite = isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score)
    correct = bool(ev.get("correct")) and finite and not exc
    tag = approach_tag(code, ctx)
    public = _numbers(ev.get("public_metrics"))
    table = allele_table(ctx)
    _, genes = G.split_program(code)
    if not correct:
        err = str(ev.get("error") or "") or error_line(ctx.get("term_out") or "")
        kind = exc or (err.split(":")[0] if re.match(r"^\w+(Error|Exception)\b", err) else None)
        summary = (f"The program failed: {err[:300]}" if kind and err.startswith(kind)
                   else f"The program failed with {kind}: {err[:300]}" if kind and err
                   else f"The program's output was rejected: {err[:300]}" if err
                   else "The program produced no valid result.")
        bottleneck = f"runtime error ({kind})" if kind else "invalid program output"
        direction = (f"fix the {kind} with a minimal change, keeping every section marker" if kind
                     else "make the output satisfy the problem's validity constraints")
        insight = "No score is available until the program produces a valid output."
    else:
        raw = public.get(score_name)
        summary = (f"The program ran correctly with combined score {score:.6g}"
                   + (f" ({score_name} = {raw:.6g})" if raw is not None else "")
                   + f", using {tag_signature(tag)}.")
        shown = [f"{k} = {v:.6g}" for k, v in public.items() if k != score_name][:4]
        insight = ("Public metrics: " + ", ".join(shown) + ".") if shown else \
            f"{score_name} is the only signal reported for this program."
        options = []
        for locus in sorted(table):
            cur = current_allele(locus, genes.get(locus, ""), table)
            for name in sorted(table[locus]):
                if name != cur:
                    desc = allele_description(table[locus][name])
                    options.append((locus, f"swap the {locus} section for allele '{name}'"
                                           + (f" ({allele_label(desc, 80)})" if desc else "")))
        for locus in problem_loci(ctx, code):
            for m in find_params(genes.get(locus, "")):
                options.append((locus, f"tune {m.group('name')} in {locus} (now {m.group('value')})"))
        options += [("", str(d)) for d in p.get("directions") or []]
        if options:
            locus, direction = rng.choice(options)
        else:
            locus, direction = "", "try a different algorithm for the main section"
        bottleneck = (f"the {locus} section ({allele_label(allele_description(genes[locus]) or 'baseline code')})"
                      if locus and locus in genes else "the overall algorithm")
    return {
        "is_bug": not correct,
        "has_csv_submission": False,
        "summary": summary,
        "key_change": f"uses {tag}",
        "insight": insight,
        "bottleneck": bottleneck,
        "suggested_direction": direction,
        "approach_tag": tag,
        "metric": float(score) if correct else None,
        "metric_name": score_name,
    }
