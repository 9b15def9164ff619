"""Crash and resume (issue 7): a run SIGKILLed at any moment continues from its run directory.

The end-to-end test kills a real ``swarm-evo`` process (its own Prefect ephemeral API, local
sandbox, offline model) during a model call, during a program execution, while the journal
is being written and at a random moment, resuming with ``swarm-evo resume`` after each kill.
After every kill the journal parses and keeps every node it had; at the end the journal holds
exactly the budget, no node twice, and the experience pool and dispatcher saw each node once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarm_evo.learning.dispatcher import Dispatcher
from swarm_evo.learning.experience import ExperiencePool, record_for
from swarm_evo.population.journal import Journal
from swarm_evo.population.node import Node
from swarm_evo.run.resume import (
    INTERRUPTED_DIR,
    RunDirectoryError,
    read_run_info,
    reconcile,
)

LAUNCHER = Path(__file__).with_name("crash_launcher.py")
BUDGET = 10


def _node(i: int, agent: str = "agent-0") -> Node:
    return Node(id=f"n{i}", operation="draft", phase=1, epoch=1, agent_id=agent, plan=f"plan {i}",
                code="print(1)\n", metric_value=0.5 + i / 100, metadata={"quality": 0.25 * (i % 4)})


# ------------------------------------------------------------------ reconcile, in process
def test_reconcile_repairs_what_a_kill_after_the_journal_append_leaves(tmp_path):
    journal = Journal(tmp_path / "journal.json", info={"competition_id": "c"})
    for i in range(1, 4):
        journal.append(_node(i))
    dispatcher = Dispatcher(["agent-0"], 0.3, 0.5, tmp_path / "agents" / "dispatcher.json")
    experience = ExperiencePool(tmp_path / "experience.jsonl")
    for node in journal.nodes[:2]:  # node n3 was appended, then the process died
        dispatcher.update(node.agent_id, node.operation, node.metadata["quality"], node.id)
        experience.add(record_for(node, node.metadata["quality"]))
    with open(tmp_path / "experience.jsonl", "a") as fh:  # ... in the middle of writing its record
        fh.write('{"agent_id": "agent-0", "operation": "dr')
    (tmp_path / "nodes" / "n3").mkdir(parents=True)
    (tmp_path / "nodes" / "in-flight").mkdir()  # a step that was running: no journal entry
    (tmp_path / "nodes" / "in-flight" / "solution.py").write_text("print('half')\n")
    (tmp_path / ".journal.json.abc.tmp").write_text('{"info": {')

    reopened = ExperiencePool(tmp_path / "experience.jsonl")
    assert reopened.dropped_partial_line and len(reopened) == 2
    dispatcher = Dispatcher.open(["agent-0"], 0.3, 0.5, tmp_path / "agents" / "dispatcher.json")
    report = reconcile(tmp_path, journal, reopened, dispatcher)

    assert report.interrupted_nodes == ["in-flight"]
    assert (tmp_path / INTERRUPTED_DIR / "in-flight" / "solution.py").read_text() == "print('half')\n"
    assert sorted(p.name for p in (tmp_path / "nodes").iterdir()) == ["n3"]
    assert report.temp_files_removed == 1 and not list(tmp_path.glob(".*.tmp"))
    assert (report.experience_records_added, report.dispatcher_updates_applied) == (1, 1)
    assert report.experience_partial_line_dropped
    assert reopened.node_ids() == {"n1", "n2", "n3"}
    assert ExperiencePool(tmp_path / "experience.jsonl").node_ids() == {"n1", "n2", "n3"}
    state = json.loads((tmp_path / "agents" / "dispatcher.json").read_text())
    assert state["applied"] == ["n1", "n2", "n3"] and state["updates"]["agent-0"]["draft"] == 3
    # Replaying is idempotent: a second resume changes nothing.
    again = reconcile(tmp_path, journal, ExperiencePool(tmp_path / "experience.jsonl"),
                      Dispatcher.open(["agent-0"], 0.3, 0.5, tmp_path / "agents" / "dispatcher.json"))
    assert not again.repaired
    assert [r["nodes"] for r in json.loads((tmp_path / "journal.json").read_text())["info"]["resumes"]] == [3, 3]


def test_dispatcher_never_folds_a_node_in_twice(tmp_path):
    dispatcher = Dispatcher(["a"], 0.0, 0.5, tmp_path / "d.json")
    assert dispatcher.update("a", "draft", 1.0, "n1") == 1.0
    assert dispatcher.update("a", "draft", 0.0, "n1") == 1.0
    assert dispatcher.update("a", "draft", 0.0, "n2") == 0.5


def test_read_run_info_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(RunDirectoryError, match=r"journal.json not found: .* is not a run directory"):
        read_run_info(tmp_path)
    (tmp_path / "journal.json").write_text('{"info": {"competition_id": "c"}, "nodes": []}')
    with pytest.raises(RunDirectoryError, match="info has no config"):
        read_run_info(tmp_path)
    (tmp_path / "journal.json").write_text('{"info": {"competition_id": "c", "config": {"seed": "x"}}, "nodes": []}')
    with pytest.raises(RunDirectoryError, match=r"info.config.seed"):
        read_run_info(tmp_path)


def test_resume_cli_rejects_a_folder_without_journal(tmp_path):
    from swarm_evo.cli.commands import main

    assert main(["resume", str(tmp_path / "nothing")]) == 2
    assert not (tmp_path / "nothing").exists()


# ------------------------------------------------------------------ SIGKILL, end to end
def _env(tmp_path: Path, api_url: str | None) -> dict:
    """A `swarm-evo` process's environment: no Prefect settings but ``api_url`` (the session API;
    None: the process starts Prefect's ephemeral API of its own, migrating a database first, as a
    user's run does — seconds of CPU at every launch)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PREFECT_LOGGING_LEVEL="WARNING")
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def _launch(tmp_path: Path, api_url: str | None, kind: str, nth: int, args: list[str],
            random_kill: random.Random | None = None, during=None) -> int:
    """Run the launcher; with ``random_kill``, SIGKILL it from outside at a random moment
    (0-3 s) after its first new journal node, i.e. somewhere in the middle of a step; ``during``
    is called with its pid at that node (the run still going)."""
    cmd = [sys.executable, str(LAUNCHER), kind, str(nth), "--", *args]
    run_dir = Path(args[-1]) if args[0] == "resume" else Path(args[args.index("--run-dir") + 1])
    before = len(_journal_ids(run_dir)) if (run_dir / "journal.json").exists() else 0
    with open(tmp_path / "log.txt", "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, env=_env(tmp_path, api_url), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        if random_kill is not None or during is not None:
            while proc.poll() is None and len(_journal_ids(run_dir)) <= before:
                time.sleep(0.2)
        if during is not None:
            during(proc.pid)
        if random_kill is not None:
            time.sleep(random_kill.uniform(0.0, 3.0))
            proc.send_signal(signal.SIGKILL)
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung run
            proc.kill()
            proc.wait()
    return proc.returncode


def _journal_ids(run_dir: Path) -> list[str]:
    data = json.loads((run_dir / "journal.json").read_text())  # must always parse
    nodes = data["nodes"]
    assert [n["step"] for n in nodes] == list(range(1, len(nodes) + 1)), "steps are 1..N, no gap"
    ids = [n["id"] for n in nodes]
    assert len(set(ids)) == len(ids), "no node twice"
    return ids


@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory) -> Path:
    from swarm_evo.competition import prepare_competition

    root = tmp_path_factory.mktemp("resume-data")
    prepare_competition("sklearn-breast-cancer", None, root)
    return root


@pytest.mark.slow  # five `swarm-evo` processes
def test_sigkill_at_random_moments_then_resume_loses_and_duplicates_nothing(tmp_path, breast_cancer, prefect_api_url):
    run_dir = tmp_path / "run"
    start = ["run", "--competition-id", "sklearn-breast-cancer", "--data-dir", str(breast_cancer),
             "--max-steps", str(BUDGET), "--seed", "3", "--parallel-workers", "2", "--run-dir", str(run_dir),
             "--python", sys.executable]
    resume = ["resume", str(run_dir)]
    kills = [  # the first with an ephemeral API of its own (checked below: it dies with the run), the rest the session's
        ("model", 7, start, None),    # during the 7th model call (two steps in flight)
        ("exec", 3, resume, None),    # during a program execution
        ("journal", 5, resume, None),  # half-way through writing the journal (2nd append)
        ("none", 0, resume, random.Random(7)),  # from outside, at a random moment in a step
    ]
    history: list[list[str]] = []
    for kind, nth, args, random_kill in kills:
        code = _launch(tmp_path, None if args is start else prefect_api_url, kind, nth, args, random_kill)
        log = (tmp_path / "log.txt").read_text()
        if kind != "none":
            assert code == -signal.SIGKILL, f"{kind}:{nth} did not kill the run (exit {code}):\n{log[-3000:]}"
        ids = _journal_ids(run_dir)
        for before in history:
            assert ids[: len(before)] == before, "a kill never removes or reorders a journal node"
        history.append(ids)
        if kind == "journal":
            assert list(run_dir.glob(".journal.json.*.tmp")), "the kill hit the journal write"
        if code != -signal.SIGKILL:
            break  # the run finished before the random kill
    second: list[tuple[int, int, str]] = []

    def second_opener(pid: int) -> None:  # one process per run directory (issue 53, item 2)
        import contextlib
        import io

        from swarm_evo.cli.commands import main

        err = io.StringIO()
        with contextlib.chdir(tmp_path), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(resume)  # this process (the test's) is not the run's: refused at once
        second.append((pid, code, err.getvalue()))

    code = _launch(tmp_path, prefect_api_url, "none", 0, resume, during=second_opener)
    assert code == 0, (tmp_path / "log.txt").read_text()[-4000:]
    pid, code, err = second[0]
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"swarm-evo: error: {run_dir} is open in another process (pid {pid} on host "), err

    ids = _journal_ids(run_dir)
    assert len(ids) == BUDGET, "the final node count equals the budget"
    for before in history:
        assert ids[: len(before)] == before
    journal = json.loads((run_dir / "journal.json").read_text())
    assert len(journal["info"]["resumes"]) >= 3
    interrupted = [n for r in journal["info"]["resumes"] for n in r["interrupted_nodes"]]
    assert interrupted, "the steps in flight at the kills were redone"
    assert not set(interrupted) & set(ids), "an interrupted step never becomes a node"
    assert sorted(p.name for p in (run_dir / "nodes").iterdir()) == sorted(ids)
    assert not list(run_dir.glob(".*.tmp"))
    agent_nodes = [n["id"] for n in journal["nodes"] if n.get("agent_id")]
    records = [json.loads(line)["node_id"] for line in (run_dir / "experience.jsonl").read_text().splitlines()]
    assert sorted(records) == sorted(agent_nodes), "one experience record per node"
    state = json.loads((run_dir / "agents" / "dispatcher.json").read_text())
    assert sorted(state["applied"]) == sorted(agent_nodes), "the dispatcher saw each node once"
    assert sum(sum(ops.values()) for ops in state["updates"].values()) == len(agent_nodes)
    assert journal["info"]["elapsed_seconds"] > 0, "the run's age is saved for the time limit"
    grade = json.loads((run_dir / "grade_report.json").read_text())
    assert grade["valid_submission"] is True
    # Nothing of the killed processes outlived them: no program, no Prefect API server (the first one's).
    assert not _leftovers(run_dir, tmp_path / "prefect-home"), "processes left behind by the killed runs"


def _leftovers(run_dir: Path, prefect_home: Path, wait: float = 5.0) -> list[str]:
    """Processes (pid and command) whose command line names ``run_dir`` or whose environment
    has ``PREFECT_HOME=prefect_home``, after waiting up to ``wait`` s for them to go."""
    import psutil

    marker = f"PREFECT_HOME={prefect_home}"
    deadline = time.monotonic() + wait
    while True:
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmd = " ".join(proc.info["cmdline"] or [])
                env = proc.environ() if proc.pid != os.getpid() else {}
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if str(run_dir) in cmd or f"PREFECT_HOME={env.get('PREFECT_HOME')}" == marker:
                found.append(f"{proc.pid}: {cmd[:200]}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_flow_resume_parameter_refuses_what_the_journal_fixes(prefect_server, tmp_path):
    from flows.two_phase_evo import two_phase_evo

    with pytest.raises(ValueError, match=r"resume takes competition_id, seed from .*journal.json: leave them unset"):
        two_phase_evo(resume=str(tmp_path), competition_id="sklearn-iris", seed=1)
    with pytest.raises(RunDirectoryError, match="not a run directory"):
        two_phase_evo(resume=str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists()


def test_time_limit_continues_across_resumes(tmp_path, breast_cancer):
    """The run's age is saved with every node; a continued session's budget starts from it."""
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session

    config = RunConfig().with_overrides({"search.time_limit": 40.0})
    run_dir = tmp_path / "run"

    def session():
        return open_session(competition_id="sklearn-breast-cancer", data_dir=breast_cancer, run_dir=run_dir,
                            config=config, endpoint=endpoint_for(config.model))

    first = session()
    assert not first.budget.time_up() and first.resume_report is None
    first.journal.info["elapsed_seconds"] = 50.0  # what append_node records at each node
    first.journal.save()
    close_session(run_dir)
    again = session()
    try:
        assert again.resume_report is not None
        assert again.budget.elapsed() >= 50.0 and again.budget.time_up()
    finally:
        close_session(run_dir)


_KILLED_MID_STEP = """
import os, signal, sys, time
from pathlib import Path

import swarm_evo.run.budget
swarm_evo.run.budget.RUN_STATE_INTERVAL = 0.2  # production: every 30 s
from swarm_evo.config import RunConfig
from swarm_evo.llm.endpoint import endpoint_for
from swarm_evo.population.node import Node
from swarm_evo.run.session import open_session
from swarm_evo.step import persistence
from swarm_evo.step.request import OperationRequest

data, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
config = RunConfig().with_overrides({"search.time_limit": 3600.0, "sandbox.python": sys.executable})
session = open_session(competition_id="sklearn-breast-cancer", data_dir=data, run_dir=run_dir, config=config,
                       endpoint=endpoint_for(config.model))
slot = session.budget.reserve()
request = OperationRequest(operation="draft", phase=1, slot=slot, template="draft.j2", prompt="p", ctx={})
persistence.append_node(session, Node(id="n1", operation="draft", phase=1, epoch=1, dead=True), request)
session.budget.reserve()  # the next step: a long execution, then the machine is lost
time.sleep(4.0)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_time_of_a_step_killed_long_after_the_last_append_is_kept(tmp_path, breast_cancer):
    """Issue 31 item 7: the run's age is saved at least every minute (RUN_DIR/run_state.json),
    not only at appends, so a process killed mid-step does not get its time back on resume."""
    from swarm_evo.config import RunConfig
    from swarm_evo.llm.endpoint import endpoint_for
    from swarm_evo.run.session import close_session, open_session

    run_dir = tmp_path / "run"
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_MID_STEP)
    proc = subprocess.run([sys.executable, str(script), str(breast_cancer), str(run_dir)], env=_env(tmp_path, None),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    at_append = json.loads((run_dir / "journal.json").read_text())["info"]["elapsed_seconds"]
    config = RunConfig().with_overrides({"search.time_limit": 3600.0})
    again = open_session(competition_id="sklearn-breast-cancer", data_dir=breast_cancer, run_dir=run_dir,
                         config=config, endpoint=endpoint_for(config.model))
    try:
        assert again.resume_report is not None and len(again.journal) == 1
        assert again.budget.elapsed() >= at_append + 3.5, "the 4 s since the last append count"
        assert again.budget.time_left() <= 3600.0 - at_append - 3.5
        recorder = again.elapsed_recorder
        assert recorder.running and recorder._thread.daemon, "a daemon thread: it never keeps a process alive"
    finally:
        close_session(run_dir)
    assert not recorder.running, "closing the session stops its recorder"
    assert json.loads((run_dir / "run_state.json").read_text())["elapsed_seconds"] >= at_append + 3.5


def test_a_resumed_phase1_drafts_until_k_valid_then_phase2_with_the_epochs_of_the_node_count(
        prefect_server, tmp_path, breast_cancer):
    """Issue 52 (decision A without the epoch barrier): a run stopped by its budget in Phase 1
    resumes by drafting until the valid pool holds K = 2, not to the end of an epoch; Phase 2
    follows at once, and every node's epoch is the count of nodes when its step started
    (``1 + nodes // steps_per_epoch``), across the resume."""
    import yaml

    from flows.two_phase_evo import two_phase_evo

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"search": {"steps_per_epoch": 4, "phase1_target_nodes": 2,
                                                 "parallel_workers": 1, "proposal_backlog": 0},
                                      "model": {"fault_rate": 0.0}}))
    run_dir = tmp_path / "run"
    two_phase_evo(competition_id="sklearn-breast-cancer", data_dir=str(breast_cancer), run_dir=str(run_dir),
                  max_steps=1, seed=0, config_path=str(config))
    first = json.loads((run_dir / "journal.json").read_text())["nodes"]
    assert [(n["epoch"], n["phase"]) for n in first] == [(1, 1)]
    two_phase_evo(resume=str(run_dir), max_steps=6)
    nodes = json.loads((run_dir / "journal.json").read_text())["nodes"]
    assert len(nodes) == 6
    valid_after = [sum(not m["is_buggy"] for m in nodes[: i + 1]) for i in range(len(nodes))]
    k_at = valid_after.index(2)  # the step at which the valid pool reached K
    assert all(n["phase"] == 1 and n["operation"] == "draft" for n in nodes[: k_at + 1])
    assert all(n["phase"] == 2 for n in nodes[k_at + 1:]), "one step at a time: no draft was running at K"
    assert [n["epoch"] for n in nodes] == [1 + i // 4 for i in range(6)]
