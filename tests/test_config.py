"""Configuration: defaults from SPEC §13, unknown keys and wrong types are errors naming the key."""

from __future__ import annotations

import pytest

from swarm_evo.config import ConfigError, RunConfig, load_config


def test_defaults_match_spec():
    c = RunConfig()
    s = c.search
    assert (s.max_steps, s.time_limit, s.steps_per_epoch, s.phase1_target_nodes) == (100, 43_200, 10, 8)
    assert (s.debug_max_attempts, s.parallel_workers, s.tournament_k, s.merge_probability, s.stub_threshold) == (
        2, 2, 3, 0.5, 20)
    assert c.sandbox.exec_timeout == 3_600
    assert (c.model.name, c.model.fault_rate, c.model.repair_rate) == ("offline", 0.2, 0.8)


def test_yaml_file_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("search:\n  max_steps: 30\nmodel:\n  fault_rate: 0.5\n")
    c = load_config(path).with_overrides({"search.parallel_workers": 3, "seed": None})
    assert (c.search.max_steps, c.search.parallel_workers, c.model.fault_rate, c.seed) == (30, 3, 0.5, 0)


def test_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("search:\n  max_step: 30\n")
    with pytest.raises(ConfigError, match=r"c\.yaml.*unknown key 'search\.max_step'"):
        load_config(path)


def test_wrong_type_names_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("search:\n  parallel_workers: many\n")
    with pytest.raises(ConfigError, match=r"'search\.parallel_workers'.*'many'"):
        load_config(path)


def test_unknown_override_key():
    with pytest.raises(ConfigError, match="unknown configuration key 'search.nope'"):
        RunConfig().with_overrides({"search.nope": 1})


def test_a_deployment_sweep_sends_its_config_files_contents_not_its_path(tmp_path):
    """A sweep on a deployment sends the config file's contents (``config_data``): the pool's
    workers need not see the sweep machine's files (tests/test_many_machines.py runs it on a pool
    with no shared disk). In this process the path goes, as before; ``resolve_config`` reads either,
    never both."""
    from flows._sweep_deployment import run_config_source
    from flows.run_config import resolve_config

    path = tmp_path / "sweep.yaml"
    path.write_text("sandbox:\n  exec_timeout: 19\nsearch:\n  steps_per_epoch: 4\n")
    assert run_config_source(None, "two-phase-evo/default") == {}
    assert run_config_source(str(path), None) == {"config_path": str(path.resolve())}
    sent = run_config_source(str(path), "two-phase-evo/default")
    assert sent == {"config_data": {"sandbox": {"exec_timeout": 19}, "search": {"steps_per_epoch": 4}}}
    path.unlink()  # what a worker on another machine sees of the file: nothing
    config, _ = resolve_config(**sent, max_steps=6)
    assert (config.sandbox.exec_timeout, config.search.steps_per_epoch, config.search.max_steps) == (19, 4, 6)
    with pytest.raises(ConfigError, match=r"config_data: unknown key 'search\.max_step'"):
        resolve_config(config_data={"search": {"max_step": 3}})
    with pytest.raises(ConfigError, match="not both"):
        resolve_config(str(path), config_data={})
    with pytest.raises(ConfigError, match=r"sweep\.yaml: cannot read config file"):
        run_config_source(str(path), "two-phase-evo/default")


# ----------------------------------------------------------------------------- renamed keys (issue 55, item 3)
@pytest.fixture
def a_rename(monkeypatch):
    """The migration table as it would be after renaming ``search.tournament_k`` to
    ``search.tournament_size`` (the field renamed too) and removing ``sandbox.old_flag``."""
    from swarm_evo.config import migrations

    monkeypatch.setattr(migrations, "MIGRATIONS", (
        migrations.Renamed("search.tournament_size", "search.tournament_k", "a test's rename"),
        migrations.Removed("sandbox.old_flag", "a test's removal"),
    ))


def test_a_renamed_key_is_read_as_its_new_name_by_a_file_a_resume_and_an_override(a_rename, tmp_path, caplog):
    import json

    from swarm_evo.run.resume import read_run_info

    path = tmp_path / "c.yaml"
    path.write_text("search:\n  tournament_size: 5\nsandbox:\n  old_flag: true\n")
    assert load_config(path).search.tournament_k == 5
    assert "'search.tournament_size' is now 'search.tournament_k'" in caplog.text
    assert "'sandbox.old_flag' is read no more (a test's removal)" in caplog.text
    assert RunConfig().with_overrides({"search.tournament_size": 7}).search.tournament_k == 7
    saved = RunConfig().model_dump()  # a run started before the rename saved the old name
    saved["search"]["tournament_size"] = saved["search"].pop("tournament_k")
    saved["sandbox"]["old_flag"] = 1
    (tmp_path / "journal.json").write_text(json.dumps(
        {"info": {"competition_id": "x", "config": saved}, "nodes": []}))
    assert read_run_info(tmp_path).config.search.tournament_k == 3
    assert saved["search"]["tournament_size"] == 3, "the saved mapping is not changed in place"


def test_a_renamed_key_given_with_its_new_name_is_bad_input(a_rename):
    from swarm_evo.config import config_from_mapping

    with pytest.raises(ConfigError, match=r"f\.yaml: 'search\.tournament_size' was renamed 'search\.tournament_k'.*"
                                          r"keep 'search\.tournament_k' and remove 'search\.tournament_size'"):
        config_from_mapping({"search": {"tournament_size": 4, "tournament_k": 4}}, source="f.yaml")


def test_every_migration_names_keys_that_exist_now():
    """A rename's new name is a key; an old or removed name is not (else it would shadow one)."""
    from swarm_evo.config.keys import keys
    from swarm_evo.config.migrations import MIGRATIONS, Renamed

    known = {key for key, _, _ in keys()}
    for entry in MIGRATIONS:
        old = entry.old if isinstance(entry, Renamed) else entry.key
        assert old not in known, f"{old} is still a key: drop its migration line"
        assert not isinstance(entry, Renamed) or entry.new in known, f"{entry.new} is no key"


def test_backend_only_keys_are_marked_from_the_registry():
    """The "(docker)"/"(local)" marks come from ``Backend.keys`` (issue 55, item 4), not by hand."""
    from swarm_evo.config import SandboxConfig
    from swarm_evo.sandbox import backends

    for name, field in SandboxConfig.model_fields.items():
        readers = backends.readers(name)
        marked = readers != backends.NAMES
        assert field.description.startswith(f"({', '.join(readers)}) ") is marked, name
        assert marked or not any(field.description.startswith(f"({b})") for b in backends.NAMES), name


def test_the_key_table_is_written_between_its_markers(tmp_path):
    from swarm_evo.config.keys import BEGIN, END, key_table, write_table

    page = tmp_path / "cli.md"
    page.write_text(f"# Keys\n\n{BEGIN}\nold\n{END}\n\nafter\n")
    assert write_table(page) is True and write_table(page) is False
    assert page.read_text() == f"# Keys\n\n{key_table()}\n\nafter\n"
    assert "| `search.max_steps` | `100` |" in key_table()
    page.write_text("no markers\n")
    with pytest.raises(ValueError, match="no generated table"):
        write_table(page)
