"""Budget (SPEC §6, seed 000 decisions I and J): node count shared by parallel steps, time limit."""

from __future__ import annotations

import threading
import time

import pytest

from swarm_evo.run.budget import Budget


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_reserve_commit_counts_slots():
    b = Budget(3)
    s1, s2 = b.reserve(), b.reserve()
    assert (s1, s2) == (1, 2)
    assert b.used == 0 and b.in_flight == 2 and b.remaining == 1
    b.commit(s1)
    assert b.used == 1 and b.in_flight == 1 and b.remaining == 1
    s3 = b.reserve()
    assert s3 == 3 and b.exhausted and b.reserve() is None
    b.commit(s2)
    b.commit(s3)
    assert b.used == 3 and b.remaining == 0 and b.exhausted


def test_release_frees_a_slot_and_slots_stay_unique():
    b = Budget(4)
    s1, s2, s3 = b.reserve(), b.reserve(), b.reserve()
    b.release(s2)
    assert b.remaining == 2 and b.used == 0
    s4 = b.reserve()
    assert s4 not in {s1, s3} and 1 <= s4 <= 4
    b.commit(s3)
    s5 = b.reserve()
    assert s5 not in {s1, s4} and s5 <= 4
    assert b.reserve() is None


def test_bad_slots_raise():
    b = Budget(2)
    s = b.reserve()
    b.commit(s)
    with pytest.raises(ValueError):
        b.commit(s)
    with pytest.raises(ValueError):
        b.release(99)
    with pytest.raises(ValueError):
        Budget(-1)
    with pytest.raises(ValueError):
        Budget(3, used=-1)


def test_eight_threads_never_exceed_max_steps():
    b = Budget(50)
    peak = []
    lock = threading.Lock()
    taken: list[int] = []

    def worker():
        while True:
            slot = b.reserve()
            if slot is None:
                return
            with lock:
                taken.append(slot)
                peak.append(b.used + b.in_flight)
            time.sleep(0.0005)
            b.commit(slot)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert b.used == 50 and b.in_flight == 0
    assert len(taken) == 50 and max(peak) <= 50
    assert sorted(taken) == list(range(1, 51))  # without releases the slots are exactly 1..max_steps


def test_resume_continues_from_journal_count():
    b = Budget(10, used=7)
    assert b.remaining == 3
    assert b.reserve() == 8
    over = Budget(5, used=9)  # e.g. max_steps lowered on resume
    assert over.remaining == 0 and over.exhausted and over.reserve() is None
    clock = FakeClock()
    r = Budget.for_journal(4, 10, time_limit=100.0, elapsed=30.0, clock=clock)
    assert r.used == 4 and r.time_left() == pytest.approx(70.0)


def test_deadline_with_fake_clock():
    clock = FakeClock()
    b = Budget(100, time_limit=60.0, clock=clock)
    assert b.time_left() == 60.0 and not b.time_up()
    assert b.exec_timeout(3600.0) == 60.0  # never beyond the deadline
    clock.t += 50
    assert b.time_left() == pytest.approx(10.0)
    assert b.exec_timeout(5.0) == 5.0
    assert b.exec_timeout(30.0) == pytest.approx(10.0)
    slot = b.reserve()
    assert slot == 1
    clock.t += 15
    assert b.time_up() and b.time_left() == 0.0 and b.done
    assert b.exec_timeout(30.0) == 0.0
    assert b.reserve() is None  # checked before every step
    b.commit(slot)  # a step already running still counts when it appends
    assert b.used == 1 and not b.exhausted


def test_no_time_limit():
    b = Budget(1)
    assert b.time_left() is None and not b.time_up()
    assert b.exec_timeout(123.0) == 123.0


def test_started_at_is_respected():
    clock = FakeClock(500.0)
    b = Budget(5, time_limit=10.0, started_at=495.0, clock=clock)
    assert b.time_left() == pytest.approx(5.0)
    assert b.elapsed() == pytest.approx(5.0)


def test_elapsed_recorder_keeps_run_state_current(tmp_path):
    """Issue 31 item 7: RUN_DIR/run_state.json follows the budget's clock (start, every interval,
    a last write on stop or when the run is done); resume takes the larger of it and the journal."""
    import json

    from swarm_evo.run.budget import RUN_STATE_FILE, RUN_STATE_INTERVAL, ElapsedRecorder, recorded_elapsed

    assert RUN_STATE_INTERVAL <= 60
    clock = FakeClock(1000.0)
    budget = Budget.for_journal(0, 10, time_limit=100.0, elapsed=20.0, clock=clock)
    path = tmp_path / RUN_STATE_FILE
    recorder = ElapsedRecorder(budget, path, interval=0.02).start()
    assert json.loads(path.read_text())["elapsed_seconds"] == 20.0 and recorder._thread.daemon
    clock.t += 15.0
    deadline = time.monotonic() + 5
    while json.loads(path.read_text())["elapsed_seconds"] != 35.0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert recorded_elapsed(tmp_path, {"elapsed_seconds": 21.0}) == 35.0
    assert recorded_elapsed(tmp_path, {"elapsed_seconds": 50.0}) == 50.0
    clock.t += 5.0
    recorder.stop()
    assert not recorder.running and json.loads(path.read_text())["elapsed_seconds"] == 40.0
    path.write_text("{not json")
    assert recorded_elapsed(tmp_path, {"elapsed_seconds": 3.0}) == 3.0
    assert recorded_elapsed(tmp_path / "missing", {}) == 0.0

    done = ElapsedRecorder(budget, path, interval=0.02, done=lambda: True).start()
    done._thread.join(timeout=5)
    assert not done.running, "a run that can start no step stops recording by itself"
    gone = tmp_path / "gone"
    gone.mkdir()
    vanished = ElapsedRecorder(budget, gone / RUN_STATE_FILE, interval=0.02).start()
    (gone / RUN_STATE_FILE).unlink()
    gone.rmdir()
    vanished._thread.join(timeout=5)
    assert not vanished.running and not gone.exists(), "a removed run directory is never made again"
