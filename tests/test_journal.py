"""Journal (SPEC §5): step assignment, atomic save and reload, duplicate ids, valid pool."""

from __future__ import annotations

import json
import threading

import pytest
from factories import make_node, program

from swarm_evo.population import journal as J
from swarm_evo.population.journal import Journal, JournalError

STUB = "# Not applicable — handled by the model.\n"


def test_append_assigns_one_based_steps():
    j = Journal()
    n = make_node()
    assert n.step is None
    for i in range(1, 4):
        node = make_node() if i > 1 else n
        assert j.append(node).step == i
    assert [x.step for x in j.nodes] == [1, 2, 3]
    assert len(j) == 3 and j.get(n.id) is n


def test_duplicate_id_is_rejected():
    j = Journal()
    n = make_node()
    j.append(n)
    with pytest.raises(JournalError):
        j.append(n.model_copy())
    assert len(j) == 1


def test_save_and_reload_round_trip(tmp_path):
    path = tmp_path / "run" / J.JOURNAL_FILE
    j = Journal(path, info={"competition_id": "spaceship-titanic", "seed": 1})
    a = j.append(make_node(metric=0.7, approach_tag="lgbm"))
    j.append(make_node(metric=None, is_buggy=True, dead=True, parent_id=a.id, operation="mutate", phase=2))
    assert path.exists()  # saved after every append
    # no temporary files left behind
    assert [p.name for p in path.parent.iterdir()] == [J.JOURNAL_FILE]
    again = Journal.load(path)
    assert again.info == j.info
    assert [n.model_dump() for n in again.nodes] == [n.model_dump() for n in j.nodes]
    # appending to a reloaded journal continues the step numbering
    assert again.append(make_node()).step == 3
    assert len(json.loads(path.read_text())["nodes"]) == 3


def test_save_is_atomic_when_replace_fails(tmp_path, monkeypatch):
    path = tmp_path / J.JOURNAL_FILE
    j = Journal(path)
    j.append(make_node())
    before = path.read_text()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(J.os, "replace", boom)
    with pytest.raises(OSError):
        j.append(make_node())
    assert path.read_text() == before  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == [J.JOURNAL_FILE]  # temp file removed


def test_in_memory_journal_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    j = Journal()
    j.append(make_node())
    j.save()
    assert list(tmp_path.iterdir()) == []


def test_load_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(JournalError, match="bad.json"):
        Journal.load(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"nodes": [{"operation": "draft", "phase": 3}]}))
    with pytest.raises(JournalError, match="node 1"):
        Journal.load(wrong)
    dup = tmp_path / "dup.json"
    n = make_node().model_dump(mode="json")
    dup.write_text(json.dumps({"nodes": [n, n]}))
    with pytest.raises(JournalError, match="repeats id"):
        Journal.load(dup)


def test_valid_pool_rules():
    j = Journal()
    ok = j.append(make_node(metric=0.5))
    j.append(make_node(is_buggy=True))
    j.append(make_node(dead=True))
    j.append(make_node(metric=None))
    j.append(make_node(code=program(MODEL=STUB)))  # MODEL stub
    j.append(make_node(code=program().replace("# [SECTION: LOSS]\n", "")))  # missing marker
    ok2 = j.append(make_node(code=program(LOSS=STUB, OPTIMIZER=STUB)))  # optional stubs fine
    assert [n.id for n in j.valid_pool()] == [ok.id, ok2.id]


def test_best_node_is_direction_aware():
    j = Journal()
    lo = j.append(make_node(metric=0.1, lower_is_better=True))
    j.append(make_node(metric=0.9, lower_is_better=True))
    assert j.best_node() is lo
    j2 = Journal()
    j2.append(make_node(metric=0.1))
    hi = j2.append(make_node(metric=0.9))
    assert j2.best_node() is hi
    assert Journal().best_node() is None


def test_children_of_includes_gene_sources_and_counts():
    j = Journal()
    a = j.append(make_node())
    b = j.append(make_node())
    m = j.append(make_node(operation="mutate", phase=2, parent_id=a.id, dead=True, is_buggy=True))
    g = j.append(make_node(operation="merge", phase=2, parent_id=a.id,
                           metadata={"gene_sources": {"DATA": a.id, "MODEL": b.id}}))
    assert [n.id for n in j.children_of(a.id)] == [m.id, g.id]
    assert [n.id for n in j.children_of(b.id)] == [g.id]
    assert j.count(dead=True) == 1 and j.count(phase=2) == 2 and j.count() == 4


def test_parallel_appends_get_unique_steps(tmp_path):
    j = Journal(tmp_path / J.JOURNAL_FILE)

    def work():
        for _ in range(5):
            j.append(make_node())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(n.step for n in j.nodes) == list(range(1, 41))
    assert len(Journal.load(tmp_path / J.JOURNAL_FILE)) == 40
