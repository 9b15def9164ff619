"""GPU specs, device requests and per-execution device leases (SPEC §10)."""

from __future__ import annotations

import threading
import time

import pytest

from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.sandbox.gpus import (
    DevicePool,
    default_limit_name,
    describe_spec,
    device_request,
    parse_gpus,
)


@pytest.mark.parametrize(
    "value, spec",
    [
        (None, None), ("none", None), ("", None), (0, None), ("0", None),
        ("all", "all"), ("ALL", "all"), (2, 2), ("2", 2),
        ("0,1", ("0", "1")), ("device=3", ("3",)), ([0, 2], ("0", "2")),
        (["GPU-8f2c9b1e-1234"], ("GPU-8f2c9b1e-1234",)),
    ],
)
def test_parse_gpus(value, spec):
    assert parse_gpus(value) == spec


@pytest.mark.parametrize("value", [True, -1, "some", "0,,1", "0,0", [], 1.5, {"count": 1}])
def test_parse_gpus_rejects_with_the_accepted_forms(value):
    with pytest.raises(ValueError, match="gpus="):
        parse_gpus(value)


def test_device_request_matches_docker_gpus_flag():
    assert device_request(None) is None
    assert device_request("all") == {"driver": "nvidia", "capabilities": [["gpu"]], "count": -1}
    assert device_request(2)["count"] == 2
    assert device_request(("1", "3"))["device_ids"] == ["1", "3"]
    assert [describe_spec(s) for s in (None, "all", 1, ("0", "1"))] == ["no GPU", "all GPUs", "1 GPU", "GPUs 0,1"]


def test_device_ids_are_dealt_into_disjoint_groups():
    assert DevicePool(("0", "1", "2", "3"), parallel_workers=2).groups == [("0", "2"), ("1", "3")]
    assert DevicePool(("0", "1"), parallel_workers=4).groups == [("0",), ("1",)]
    pool = DevicePool(("0", "1", "2"), parallel_workers=3)
    assert pool.shared_limit is None


def test_parallel_leases_never_share_a_device():
    pool = DevicePool(("0", "1"), parallel_workers=4)
    in_use: list[str] = []
    seen: list[tuple] = []
    lock = threading.Lock()
    errors = []

    def work():
        with pool.lease() as group:
            with lock:
                if set(group) & set(in_use):
                    errors.append(group)
                in_use.extend(group)
                seen.append(group)
            time.sleep(0.05)
            with lock:
                for device in group:
                    in_use.remove(device)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(seen) == 8 and set(seen) == {("0",), ("1",)}


def test_shared_specs_use_a_global_limit():
    for spec in ("all", 2):
        pool = DevicePool(spec, parallel_workers=2)
        assert pool.shared_limit == default_limit_name()
        with pool.lease() as got:
            assert got == spec
    assert DevicePool(None, 2).shared_limit is None
    assert default_limit_name().startswith("swarm-evo-gpus-")


def test_config_gpus_need_the_docker_backend():
    config = RunConfig().with_overrides({"sandbox.backend": "docker", "sandbox.gpus": "0,1"})
    assert config.sandbox.gpus == ["0", "1"]
    assert RunConfig().with_overrides({"sandbox.backend": "docker", "sandbox.gpus": "none"}).sandbox.gpus is None
    with pytest.raises(ConfigError, match="gpus needs backend docker"):
        RunConfig().with_overrides({"sandbox.gpus": "all"})
    with pytest.raises(ConfigError, match="sandbox.gpus"):
        RunConfig().with_overrides({"sandbox.backend": "docker", "sandbox.gpus": "many"})
