"""two_phase_evo: the main flow (SPEC §1, §6, §11, §12; seed 000 §14).

Phase 1 (``phase1_draft``) drafts until the valid pool reaches K; Phase 2 (``phase2_evolve``)
merges and mutates until the budget or the time limit runs out; then the best valid node's
submission is graded and the final report published. Deployed as ``two-phase-evo/<name>``.
For ablations (SPEC §12) ``policy`` swaps the two phases for the ``greedy`` (AIDE) or
``random`` search (``flows/policy_search.py``) on the same budget, sandbox and model.
The same flow evolves a program-optimisation problem (``problem=``): its initial program is
evaluated first and the evaluation agent writes the auxiliary metrics; every node is then
evaluated through the Eval Service core and the report compares the best with the initial.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows._heartbeat_guard import heartbeats_guarded
from flows._process_heap import heap_settled
from flows._scheduler import close_scheduler, open_scheduler
from flows._state_watch import stop_when_declared_dead
from flows._subflow import subflow_context
from flows._writer_state import flow_run_state
from flows.phase1_draft import phase1_draft
from flows.phase2_evolve import phase2_evolve
from flows.policy_search import policy_search
from flows.run_config import resolve_config
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.llm.ledger import cost_text
from swarm_evo.population.journal import RESULT_FILE, atomic_write_text
from swarm_evo.population.ranking import phase1_complete
from swarm_evo.run.resume import check_policy, read_run_info
from swarm_evo.run.session import (
    RunDeclaredDeadError,
    RunStoppedError,
    RunSupersededError,
    close_session,
    default_run_dir,
    open_session,
)
from swarm_evo.store import resolve_run
from swarm_evo.store.lease import new_owner
from tasks.artifacts import (
    publish_final_report,
    publish_lanes,
    publish_node_table,
    publish_run_report,
    start_progress,
    update_progress,
)
from swarm_evo.sandbox import backends
from swarm_evo.sandbox.program_env import program_env_warning, resolve_program_python
from tasks.gpu import ensure_gpu_limit
from tasks.grade import grade_best, write_run_report
from tasks.problem import evaluate_initial_program, write_auxiliary_metrics


def record_policy(journal, policy: str) -> str:
    """Write the search policy to ``journal.info["policy"]`` and return it.

    Raises:
        RunDirectoryError: the journal already has nodes of another policy (a journal
            without the key is a two_phase run); mixing policies would spoil the ablation.
    """
    check_policy(journal, policy)
    journal.info["policy"] = policy
    journal.save()
    return policy


@flow(name="two-phase-evo", log_prints=True, persist_result=True, result_serializer="json")
@heartbeats_guarded  # never declared dead while alive (flows/_heartbeat_guard.py)
@heap_settled  # in its own flow-run process: the import-time heap frozen (flows/_process_heap.py)
def two_phase_evo(
    competition_id: str | None = None,
    data_dir: str | None = None,
    problem: str | None = None,
    instance: str | None = None,
    run_dir: str | None = None,
    model: str | None = None,
    max_steps: int | None = None,
    seed: int | None = None,
    parallel_workers: int | None = None,
    time_limit: float | None = None,
    config_path: str | None = None,
    config_data: dict | None = None,
    executor: str | None = None,
    image: str | None = None,
    gpus: str | int | list[str] | None = None,
    llm_block: str | None = None,
    sandbox_block: str | None = None,
    policy: str | None = None,  # a str, not the Literal: served flows are pickled by value
    resume: str | None = None,
    mlebench_repo: str | None = None,
    python: str | None = None,
    max_consecutive_failures: int | None = None,
    store: str | None = None,
    take_over: bool = False,
) -> dict:
    """Solve one competition, or one optimisation problem, with the two-phase evolutionary search
    (or, for ablations, the ``greedy`` or ``random`` search policy).

    Args:
        competition_id: a built-in id or a folder ``<data_dir>/<id>`` with config.yaml.
        data_dir: MLE-bench data directory (``<data_dir>/<id>/prepared/{public,private}``;
            default ``data``), or a store location holding the same (an fsspec URL such as
            ``s3://bucket/prefix/data``, read through this machine's data cache, the private
            answers only to grade: swarm_evo/store/data.py); for a problem, the local folder
            where its data file is looked up.
        problem: a problem to evolve instead of a competition: a built-in name
            (circle-packing, tsp, count-primes) or a problem folder (SPEC §11).
        instance: the problem's instance (``problem.instance``), e.g. ``kroA100`` for tsp, looked
            up as ``tsp/kroA100.tsp`` under ``data_dir`` (or the default data directories);
            None = the problem's default. ProblemError for an unknown instance (names the
            directories searched and the available ones) or a problem without instances.
        run_dir: where the journal and files go (default ``runs/<id>-<time>-s<seed>``); an
            existing run directory of the same competition or problem is continued.
        model: litellm model name or ``offline``; overrides the config file and the block.
        max_steps, seed, parallel_workers, time_limit: override the config file.
        config_path: YAML config (docs/cli.md lists the keys), a path on the machine
            that runs the flow.
        config_data: the same config's contents as a mapping, instead of ``config_path``: what a
            sweep on a deployment sends, since the workers need not see the sweep's files.
        executor: sandbox backend, ``local`` or ``docker`` (``sandbox.backend``).
        image: Docker sandbox image (``sandbox.image``).
        gpus: ``none``, ``all``, a count or device ids (``sandbox.gpus``, local and docker): each GPU
            a device group, the run's lanes its GPU slots (``sandbox.slots_per_gpu`` per GPU).
        python: interpreter or virtual environment that runs programs on the local backend
            (``sandbox.python``; default: the program environment ``swarm-evo env build`` made).
        llm_block, sandbox_block: names of saved LLMSettings / SandboxSettings blocks.
        max_consecutive_failures: stop the run (exit 1) after this many generation failures in a
            row (``model.max_consecutive_failures``); a resumed run counts only its own.
        policy: search policy (``search.policy``): ``two_phase`` (default), ``greedy`` (AIDE)
            or ``random`` (drafts only), SPEC §12. Recorded as ``journal.info["policy"]``; a
            run directory is continued only with the policy it was started with.
        store: the run store, a directory or an fsspec URL (``store``; default ``$SWARM_EVO_STORE``):
            the run directory is mirrored to ``STORE/runs/<run directory's name>/`` as the run goes
            (swarm_evo/store/mirror.py). StoreError when it cannot be reached or written.
        take_over: with a store, take the run's location over even while its writer is alive (its
            flow run Running, its process alive on this host, or its last write to the store recent):
            that copy stops at its next check (swarm_evo/store/liveness.py). Without it such a
            resume is refused (WriterAliveError) before anything is written.
        resume: a run directory to continue after a crash or a stop (swarm_evo/run/resume.py),
            or a run in a store, ``STORE/runs/<name>`` (fetched into ``runs/<name>`` here unless
            that already holds the run, then mirrored back to the same place):
            the competition or problem, its instance, configuration, model, seed, policy and LLM block come
            from its journal, so those parameters must be left unset; data_dir (when the data
            moved), max_steps, time_limit, parallel_workers, executor, image, gpus, python,
            max_consecutive_failures and the blocks may change. The budget, epochs, phase, valid pool, agents and experience pool
            continue; steps that were in flight are redone.

    Returns:
        The run summary (swarm_evo.reporting.report.run_summary) plus ``run_dir``, ``epochs`` and ``policy``.
    """
    base = None
    if resume:
        fixed = dict(competition_id=competition_id, problem=problem, instance=instance, run_dir=run_dir,
                     config_path=config_path, config_data=config_data, model=model, seed=seed, policy=policy)
        given = sorted(k for k, v in fixed.items() if v is not None)
        if given:
            raise ValueError(f"resume takes {', '.join(given)} from {resume}/journal.json: leave them unset")
        resume_dir, resume_store = resolve_run(resume)
        info = read_run_info(resume_dir)
        competition_id, problem, run_dir = info.competition_id, info.problem, str(resume_dir)
        store = store or resume_store
        data_dir = data_dir or info.data_dir  # the data may have moved (another machine or container)
        base, llm_block = info.config, llm_block or info.llm_block
    config, api_key = resolve_config(
        config_path, base=base, model=model, max_steps=max_steps, seed=seed, parallel_workers=parallel_workers,
        time_limit=time_limit, executor=executor, image=image, gpus=gpus,
        llm_block=llm_block, sandbox_block=sandbox_block, policy=policy, mlebench_repo=mlebench_repo,
        python=python, instance=instance, max_consecutive_failures=max_consecutive_failures, store=store,
        config_data=config_data,
    )
    name = problem if problem is not None else competition_id
    if problem is not None and config.problem.instance:
        name = f"{Path(str(problem)).name}-{config.problem.instance}"
    run_path = Path(run_dir) if run_dir else default_run_dir(Path(str(name)).name, config.seed)
    session = open_session(
        competition_id=competition_id,
        problem=problem,
        data_dir=data_dir or (None if problem else "data"),  # a local folder or a store URL
        run_dir=run_path,
        config=config,
        endpoint=endpoint_for(config.model, api_key),
        owner=new_owner(flow_run.get_id(), flow_run.get_name()),  # named in a superseded copy's message
        take_over=take_over,
        writer_state=flow_run_state,  # the lease holder's flow run, where the API knows it (issue 53, item 3)
    )
    try:
        with stop_when_declared_dead(session):  # a live run marked Crashed stops (issue 53, item 11)
            return _search(session, config, llm_block)
    finally:  # stops the run's clock (RUN_DIR/run_state.json) whether the search ended or raised
        close_session(session.run_dir)


def _run_phases(session, key: str, policy: str) -> None:
    """The policy's phase flows on the run's scheduler: Phase 1 until K valid nodes (skipped when
    the journal already has them or Phase 2 has begun), then Phase 2 while budget and time are
    left; ``greedy``/``random`` run ``policy_search`` instead."""
    config, journal = session.config, session.journal
    heartbeats = config.search.subflow_heartbeats  # phase flows are subflows: this run's heartbeat covers them
    if policy != "two_phase":
        with subflow_context(heartbeats):
            policy_search(run_dir=key, policy=policy)
        return
    if not (journal.count(phase=2) > 0 or phase1_complete(len(journal.valid_pool()), config.search.phase1_target_nodes)):
        with subflow_context(heartbeats):
            phase1_draft(run_dir=key)
    if session.finished or session.budget.remaining == 0:
        get_run_logger().info("Phase 2 not started: %s", session.stop_reason or "the budget or the time is spent")
        return
    with subflow_context(heartbeats):
        phase2_evolve(run_dir=key)


def _search(session, config, llm_block: str | None) -> dict:
    """The run on an open session: log its set-up, run the policy's phases, grade and report
    (:func:`two_phase_evo`'s body after the session is opened)."""
    logger = get_run_logger()
    key = str(session.run_dir)
    if session.resume_report is not None:
        report = session.resume_report
        logger.info(
            "continuing %s: %s nodes in the journal; redoing %s interrupted step(s) %s; repaired %s experience "
            "record(s), %s dispatcher update(s), %s temp file(s), %s container(s)",
            key, report.nodes, len(report.interrupted_nodes), report.interrupted_nodes,
            report.experience_records_added, report.dispatcher_updates_applied, report.temp_files_removed,
            len(report.containers_removed),
        )
    if llm_block:
        session.journal.info["llm_block"] = llm_block  # the block's name (never its key), for resume
    policy = record_policy(session.journal, config.search.policy)
    logger.info("run directory: %s (model %s, budget %s nodes, policy %s)", key, config.model.name,
                config.search.max_steps, policy)
    logger.info("sandbox: %s backend; python %s (%s); %s; packages: %s", config.sandbox.backend,
                session.runtime.python, session.runtime.executable, session.device, session.packages)
    # unconfined programs (sandbox.allow_unconfined) are a warning in the run's first lines (issue 42)
    (logger.info if session.runtime.confined else logger.warning)("confinement: %s", session.runtime.confinement)
    if "python" in backends.get(config.sandbox.backend).keys:  # the backend runs programs with sandbox.python
        warning = program_env_warning(resolve_program_python(config.sandbox.python), session.runtime)
        if warning:
            logger.warning(warning)
    for warning in session.probe_warnings:
        logger.warning("model preflight: %s", warning)
    if session.sandbox.gpu_limit:
        ensure_gpu_limit(session.sandbox.gpu_limit)
    start_progress(key)
    if session.objective.kind == "problem":
        initial = evaluate_initial_program(key)
        logger.info("initial program: combined_score %s (correct %s)", initial.get("combined_score"), initial.get("correct"))
        try:
            write_auxiliary_metrics(key)  # a continued run keeps its file (no model call)
        except Exception as exc:  # transient model errors that outlived the task's retries
            logger.warning("no dynamic auxiliary metrics (%s: %s); the run goes on", type(exc).__name__, exc)
    journal = session.journal
    open_scheduler(key)  # the run's lanes, shared by its phases (issue 52)
    try:
        _run_phases(session, key, policy)
    finally:  # every step still in flight ends and is appended before grading (or before the error goes up)
        close_scheduler(key)
    epoch = max((n.epoch for n in journal.nodes), default=0)
    if session.superseded:  # another process resumed the run: this copy grades and uploads nothing
        raise RunSupersededError(f"{session.superseded} (local copy: {key})")
    if session.declared_dead:  # the orchestrator says the run is over: this copy grades nothing
        raise RunDeclaredDeadError(session.stop_reason)
    update_progress(key, final=True)  # the steps update it at most every PROGRESS_INTERVAL s
    best, grade = grade_best(key)
    publish_node_table(key)
    publish_lanes(key)
    publish_run_report(key, write_run_report(key))
    summary = publish_final_report(key, grade)
    summary["run_dir"] = key
    summary["epochs"] = epoch
    summary["policy"] = policy
    atomic_write_text(session.run_dir / RESULT_FILE, json.dumps(summary, indent=1, default=str))
    logger.info("best metric %s; final score %s", best.metric_value if best else None, getattr(grade, "score", None))
    llm = summary["llm"]
    logger.info("model calls: %s (%s failed), %s prompt + %s completion tokens, cost %s", llm["calls"],
                llm["failed_calls"], llm["prompt_tokens"], llm["completion_tokens"],
                cost_text(llm))
    if session.stop_reason:
        logger.warning("the run stopped early: %s", session.stop_reason)
    if session.stop_is_failure:  # the best work so far is handed in above; the run itself failed
        raise RunStoppedError(session.stop_reason)
    return summary
