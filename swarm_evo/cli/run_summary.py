"""The end of ``swarm-evo run`` and ``resume``: the run's summary, printed, and its exit code."""

from __future__ import annotations


def print_summary(summary: dict) -> int:
    """Print what ``run``/``resume`` tell at the end from the flow's summary (run directory, nodes,
    best metric, improvements, a problem's scores or the grade, model calls and cost, an early
    stop); returns the exit code: 0 for a valid submission (a correct problem program), else 1."""
    print(f"run directory: {summary['run_dir']}")
    print(f"nodes: {summary['nodes']} (phase 1: {summary['phase1_nodes']}, phase 2: {summary['phase2_nodes']}), "
          f"valid: {summary['valid']}, dead: {summary['dead']}")
    best = summary.get("best_node") or {}
    print(f"best validation metric: {best.get('metric')}")
    if best.get("hidden_score") is not None:  # issue 41: what the run selected on
        print(f"best hidden-split score: {best['hidden_score']}")
    if summary.get("improvements"):
        from swarm_evo.reporting.operation_stats import improvement_line

        print(improvement_line(summary["improvements"], summary.get("best_lineage")))
    if summary.get("problem_report") is not None:
        report = summary["problem_report"]
        if report.get("instance"):
            print(f"instance: {report['instance']}")
        print(f"{report['score_name']}: {report['raw_score']} (initial program: {report['initial_raw_score']}, "
              f"best known: {report['known_best']}); combined_score {report['score']} "
              f"(initial {report['initial_score']})")
        return 0 if report.get("correct") else 1
    grade = summary.get("grade_report") or {}
    hand_in = summary.get("hand_in") or {}
    if hand_in.get("node_id") and hand_in["node_id"] != best.get("id"):
        print(f"handed in: node {hand_in['node_id'][:8]} (step {hand_in['step']}): {hand_in['reason']}")
    llm = summary.get("llm") or {}
    if llm.get("calls"):
        from swarm_evo.llm.ledger import cost_text

        cost = cost_text(llm)
        print(f"model calls: {llm['calls']} ({llm['failed_calls']} failed), "
              f"{llm['prompt_tokens']} prompt + {llm['completion_tokens']} completion tokens, cost {cost}")
    if summary.get("stop_reason"):
        print(f"stopped early: {summary['stop_reason']}")
    fit = hand_in.get("final_fit")
    if fit:
        print(f"final fit: {'refitted on the full training data' if fit['status'] == 'refit' else fit['status']}"
              + (f" ({fit['reason'][:200]}); the original submission is handed in" if fit.get("reason") else ""))
    print(f"score: {grade.get('score')} (valid submission: {grade.get('valid_submission')})")
    return 0 if grade.get("valid_submission") else 1
