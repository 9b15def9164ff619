"""GPU slots on every backend (SPEC §10; issue 52, item 3): specs, discovery, device groups, the
allocator, and what an execution of each backend is given.

There is no GPU here: discovery is fed fake ``nvidia-smi`` output and fake driver and ``/dev``
directories, and the tests assert on the environment, the device list and the Docker request
an execution gets. The real local executions below show that a program sees only its group's
``CUDA_VISIBLE_DEVICES`` and no ``/dev/nvidia*`` node (none exists on this machine).
"""

from __future__ import annotations

import json
import subprocess
import threading
import types
from pathlib import Path

import pytest

from swarm_evo.config import ConfigError, RunConfig
from swarm_evo.sandbox import gpu_slots as gpu_slots_mod
from swarm_evo.sandbox import gpus as gpus_mod
from swarm_evo.sandbox.base import SandboxUnavailableError
from swarm_evo.sandbox.gpus import CONTROL_NODES, Gpu, default_limit_name, describe_spec, discover_gpus, parse_gpus
from swarm_evo.sandbox.gpu_slots import DeviceAllocator, DeviceGroup, device_groups, device_request, execution_slots, shared_allocator
from swarm_evo.sandbox.local import LocalSandbox
from swarm_evo.sandbox.supervisor_root import device_nodes, hidden_gpu_dirs

UUIDS = ("GPU-aaaaaaaa-0000", "GPU-bbbbbbbb-1111", "GPU-cccccccc-2222", "GPU-dddddddd-3333")


def four_gpus() -> tuple[Gpu, ...]:
    """A host with four GPUs whose device minors differ from their indices (as they may)."""
    return tuple(Gpu(str(i), i, minor, UUIDS[i]) for i, minor in enumerate((1, 0, 2, 3)))


def no_gpu() -> tuple[Gpu, ...]:
    return ()


# ------------------------------------------------------------------------------ the spec


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


# ------------------------------------------------------------------------------ discovery


def _smi(text: str, code: int = 0):
    def run(argv, **kwargs):
        assert argv == ["nvidia-smi", "-L"]
        return subprocess.CompletedProcess(argv, code, stdout=text, stderr="")
    return run


def _no_smi(argv, **kwargs):
    raise FileNotFoundError("nvidia-smi")


def _driver(root: Path, gpus: list[tuple[str, int, str]]) -> Path:
    """A fake /proc/driver/nvidia/gpus: ``(bus id, device minor, uuid)`` per GPU."""
    for bus, minor, uuid in gpus:
        (root / bus).mkdir(parents=True)
        (root / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nIRQ:   \t\t 42\nGPU UUID: \t\t {uuid}\nDevice Minor: \t\t {minor}\n"
            f"Bus Location: \t\t {bus}\n")
    return root


def _dev(root: Path, names: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / name).write_text("")
    return root


SMI = ("GPU 0: NVIDIA H200 (UUID: GPU-aaaaaaaa-0000)\n"
       "  MIG 1g.18gb     Device  0: (UUID: MIG-0b3a1d2e-5b2a-5c6f-9d3c-1a2b3c4d5e6f)\n"
       "GPU 1: NVIDIA H200 (UUID: GPU-bbbbbbbb-1111)\n")


def test_discovery_takes_indices_from_nvidia_smi_and_minors_from_the_driver(tmp_path):
    proc = _driver(tmp_path / "proc", [("0000:17:00.0", 1, "GPU-aaaaaaaa-0000"), ("0000:65:00.0", 0, "GPU-bbbbbbbb-1111")])
    dev = _dev(tmp_path / "dev", ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps"])
    assert discover_gpus(_smi(SMI), proc, dev) == (Gpu("0", 0, 1, "GPU-aaaaaaaa-0000", "0000:17:00.0"),
                                                   Gpu("1", 1, 0, "GPU-bbbbbbbb-1111", "0000:65:00.0"))
    # no driver directory: a GPU's node is the one of its index
    assert discover_gpus(_smi(SMI), tmp_path / "none", dev) == (
        Gpu("0", 0, 0, "GPU-aaaaaaaa-0000"), Gpu("1", 1, 1, "GPU-bbbbbbbb-1111"))


def test_discovery_without_nvidia_smi_reads_the_driver_then_the_device_nodes(tmp_path):
    proc = _driver(tmp_path / "proc", [("0000:65:00.0", 0, "GPU-bbbbbbbb-1111"), ("0000:17:00.0", 1, "GPU-aaaaaaaa-0000")])
    dev = _dev(tmp_path / "dev", ["nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm-tools"])
    # the driver's GPUs in PCI bus order (nvidia-smi's default order)
    assert discover_gpus(_no_smi, proc, dev) == (Gpu("0", 0, 1, "GPU-aaaaaaaa-0000", "0000:17:00.0"),
                                                 Gpu("1", 1, 0, "GPU-bbbbbbbb-1111", "0000:65:00.0"))
    assert discover_gpus(_smi("", code=9), tmp_path / "none", dev) == (
        Gpu("0", 0, 0, None), Gpu("1", 1, 1, None), Gpu("2", 2, 10, None))
    assert discover_gpus(_no_smi, tmp_path / "none", tmp_path / "none") == ()


def test_this_machine_has_no_gpu():
    assert gpus_mod.host_gpus() == ()


# ------------------------------------------------------------------------------ device groups and slots


def _config(backend: str = "local", **sandbox) -> RunConfig:
    return RunConfig().with_overrides({"sandbox.backend": backend, **{f"sandbox.{k}": v for k, v in sandbox.items()}})


@pytest.mark.parametrize("slots_per_gpu", [1, 2])
@pytest.mark.parametrize("spec, names", [
    ("all", ["0", "1", "2", "3"]), (2, ["0", "1"]), ("2,0", ["2", "0"]), ([UUIDS[3]], [UUIDS[3]]),
])
def test_every_gpu_given_is_a_group_and_slots_are_groups_times_slots_per_gpu(spec, names, slots_per_gpu):
    groups = device_groups(parse_gpus(spec), four_gpus)
    assert [g.names for g in groups] == [(n,) for n in names]
    assert [g.gpus[0].minor for g in groups] == [{"0": 1, "1": 0, "2": 2, "3": 3}[n] if n.isdigit() else 3 for n in names]
    for backend in ("local", "docker"):
        config = _config(backend, gpus=spec, slots_per_gpu=slots_per_gpu)
        assert execution_slots(config, four_gpus) == len(names) * slots_per_gpu
    assert DeviceAllocator(groups, slots_per_gpu).slots == len(names) * slots_per_gpu


def test_no_gpus_no_slots_and_slots_per_gpu_needs_gpus():
    assert execution_slots(RunConfig(), four_gpus) is None
    assert device_groups(None, four_gpus) == []
    assert RunConfig().sandbox.slots_per_gpu == 1
    with pytest.raises(ConfigError, match="slots_per_gpu=2 shares GPUs, but sandbox.gpus is none"):
        _config(slots_per_gpu=2)
    with pytest.raises(ConfigError, match="slots_per_gpu"):
        _config(gpus="all", slots_per_gpu=0)
    assert _config(gpus="0,1").sandbox.gpus == ["0", "1"]  # every backend takes gpus now


def test_gpus_the_host_lacks_are_clear_errors():
    with pytest.raises(SandboxUnavailableError, match="sandbox.gpus='all': no NVIDIA GPU found.*sandbox.gpus: none"):
        device_groups("all", no_gpu)
    with pytest.raises(SandboxUnavailableError, match="sandbox.gpus=5: this machine has 4 GPUs.*at most 4"):
        device_groups(5, four_gpus)
    with pytest.raises(SandboxUnavailableError, match="names GPU '7', which this machine does not have"):
        device_groups(("0", "7"), four_gpus)
    with pytest.raises(SandboxUnavailableError, match="no NVIDIA GPU found"):
        execution_slots(_config(gpus="all"), no_gpu)


def test_docker_sends_all_or_a_count_as_it_is_when_no_gpu_is_visible_here():
    (whole,) = device_groups("all", no_gpu, docker=True)
    assert whole.whole == "all" and whole.request() == device_request("all") and whole.environment(docker=True) == {}
    assert execution_slots(_config("docker", gpus=2, slots_per_gpu=2), no_gpu) == 2
    # ids need no discovery: the index is taken as its node's minor
    (group,) = device_groups(("3",), no_gpu)
    assert group.gpus == (Gpu("3", 3, 3, None),) and group.request()["device_ids"] == ["3"]


# ------------------------------------------------------------------------------ the allocator


def _hold(allocator: DeviceAllocator, n: int) -> tuple[list, list[threading.Event], list[threading.Thread]]:
    """Start ``n`` threads that each lease a group and hold it until released; wait for the leases."""
    got, release, threads, leased = [], [threading.Event() for _ in range(n)], [], threading.Semaphore(0)

    def work(i):
        with allocator.lease() as group:
            got.append(group)
            leased.release()
            release[i].wait(10)

    for i in range(n):
        threads.append(threading.Thread(target=work, args=(i,)))
        threads[-1].start()
        assert leased.acquire(timeout=10)
    return got, release, threads


def _done(release, threads):
    for event in release:
        event.set()
    for t in threads:
        t.join(10)


@pytest.mark.parametrize("gpus, slots_per_gpu, shared", [(2, 1, False), (2, 2, False), (1, 2, True)])
def test_two_concurrent_executions_get_different_or_shared_groups_as_configured(gpus, slots_per_gpu, shared):
    allocator = DeviceAllocator(device_groups(gpus, four_gpus), slots_per_gpu)
    got, release, threads = _hold(allocator, 2)
    try:
        assert (got[0] == got[1]) is shared
        assert sorted(allocator.in_use(), reverse=True) == ([2] if shared else [1, 1])
    finally:
        _done(release, threads)
    assert allocator.in_use() == [0] * gpus


def test_a_lease_waits_while_every_slot_is_taken():
    allocator = DeviceAllocator(device_groups(2, four_gpus), slots_per_gpu=2)
    got, release, threads = _hold(allocator, 4)  # GPUs 0, 1, 0, 1: spread before shared
    assert [g.names for g in got] == [("0",), ("1",), ("0",), ("1",)]
    waiting = threading.Event()
    fifth = []

    def late():
        waiting.set()
        with allocator.lease() as group:
            fifth.append(group)

    t = threading.Thread(target=late)
    t.start()
    waiting.wait(10)
    t.join(0.2)
    assert t.is_alive() and not fifth, "a fifth execution must wait for a slot"
    release[1].set()  # the execution on GPU 1 ends
    t.join(10)
    assert [g.names for g in fifth] == [("1",)]
    _done(release, threads)
    assert allocator.in_use() == [0, 0]


def test_no_groups_lease_none_and_sandboxes_of_one_process_share_an_allocator():
    with DeviceAllocator([]).lease() as group:
        assert group is None
    groups = device_groups(2, four_gpus)
    assert shared_allocator(groups, 2) is shared_allocator(list(groups), 2)
    assert shared_allocator(groups, 1) is not shared_allocator(groups, 2)
    with pytest.raises(ValueError, match="slots_per_gpu=0"):
        DeviceAllocator(groups, 0)


# ------------------------------------------------------------------------------ local backend


def test_local_execution_environment_and_device_nodes_of_a_group():
    (group,) = device_groups(("1",), four_gpus)  # index 1 is /dev/nvidia0 on this fake host
    cfg = LocalSandbox.gpu_config(group)
    assert cfg["env_extra"] == {"CUDA_VISIBLE_DEVICES": UUIDS[1], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cfg["env_unconfined"] == cfg["env_extra"]  # a UUID names the GPU in every mode
    assert cfg["gpu_devices"] == ["/dev/nvidia0"] + [f"/dev/{n}" for n in CONTROL_NODES]
    # without UUIDs: the group's own numbering inside the namespaces, the host's indices outside
    bare = DeviceGroup((Gpu("2", 2, 2, None), Gpu("3", 3, 3, None)))
    assert bare.environment(confined=True)["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert bare.environment(confined=False)["CUDA_VISIBLE_DEVICES"] == "2,3"
    # no GPU given: no node at all, and CUDA sees nothing where the host's nodes are visible
    assert LocalSandbox.gpu_config(None) == {"env_extra": {}, "env_unconfined": {"CUDA_VISIBLE_DEVICES": ""},
                                             "gpu_devices": [], "gpu_buses": []}


def test_the_program_proc_hides_the_other_gpus_driver_directories(tmp_path):
    proc = _driver(tmp_path / "gpus", [("0000:17:00.0", 1, UUIDS[0]), ("0000:65:00.0", 0, UUIDS[1])])
    (group,) = device_groups(("1",), lambda: discover_gpus(_smi(SMI), proc, tmp_path / "none"))
    cfg = LocalSandbox.gpu_config(group)
    assert cfg["gpu_buses"] == ["0000:65:00.0"]
    assert hidden_gpu_dirs(cfg, str(proc)) == [f"{proc}/0000:17:00.0"]
    assert hidden_gpu_dirs(LocalSandbox.gpu_config(None), str(proc)) == [f"{proc}/0000:17:00.0", f"{proc}/0000:65:00.0"]
    assert hidden_gpu_dirs({"gpu_buses": None}, str(proc)) == []  # unknown bus ids: nothing hidden
    assert DeviceGroup((Gpu("1", 1, 1),)).buses() is None


def test_the_program_root_binds_only_the_groups_nodes_that_exist(tmp_path):
    dev = _dev(tmp_path / "dev", ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"])
    group = DeviceGroup((Gpu("1", 1, 1, None),))
    bound = device_nodes({"gpu_devices": group.device_nodes(str(dev))})
    assert [b for b in bound if b.startswith(str(dev))] == [f"{dev}/nvidia1", f"{dev}/nvidiactl", f"{dev}/nvidia-uvm"]
    assert "/dev/null" in bound and not [b for b in device_nodes({}) if "nvidia" in b]


def test_a_gpu_without_a_known_node_is_refused_by_the_local_backend():
    with pytest.raises(SandboxUnavailableError, match="GPU 'MIG-1a2b'.*docker backend for MIG"):
        LocalSandbox(gpus=[DeviceGroup((Gpu("MIG-1a2b"),))])
    with pytest.raises(SandboxUnavailableError, match="no NVIDIA GPU found"):
        LocalSandbox(gpus="all")  # this machine has none


PROBE = ("import glob, json, os\n"
         "print(json.dumps([os.environ.get('CUDA_VISIBLE_DEVICES'), sorted(glob.glob('/dev/nvidia*'))]))\n")


@pytest.fixture()
def public_dir(tmp_path: Path) -> Path:
    d = tmp_path / "public"
    d.mkdir()
    (d / "train.csv").write_text("id,y\n1,2\n")
    return d


def _seen(result) -> list:
    assert result.ok, result.term_out
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_real_local_execution_sees_only_its_group(tmp_path, public_dir):
    """Two GPUs (fake UUIDs; no /dev/nvidia* exists here), one slot each: while GPU 0 is held
    the execution gets GPU 1, sees its UUID and no device node; forked from a program server
    (``import json`` preloaded) it sees the same."""
    groups = device_groups(2, four_gpus)
    sandbox = LocalSandbox(gpus=groups, slots_per_gpu=1, preload=("json",), num_threads=1)
    with sandbox.devices.lease() as held:
        assert held.names == ("0",)
        seen = _seen(sandbox.execute(PROBE, tmp_path / "node", public_dir, timeout=30))
    assert seen == [UUIDS[1], []]
    assert sandbox.devices.in_use() == [0, 0]
    plain = LocalSandbox(gpus=groups, preload=(), num_threads=1)
    assert _seen(plain.execute(PROBE, tmp_path / "node2", public_dir, timeout=30)) == [UUIDS[0], []]


def test_a_real_unconfined_execution_gets_the_hosts_indices_or_no_gpu(tmp_path, public_dir):
    """Without namespaces every host node would be visible: CUDA's variables select the group
    (host indices, PCI bus order) or nothing."""
    group = DeviceGroup((Gpu("3", 3, 3, None),))
    sandbox = LocalSandbox(gpus=[group], isolate=False, preload=(), num_threads=1)
    assert _seen(sandbox.execute(PROBE, tmp_path / "a", public_dir, timeout=30))[0] == "3"
    none = LocalSandbox(isolate=False, preload=(), num_threads=1)
    assert _seen(none.execute(PROBE, tmp_path / "b", public_dir, timeout=30))[0] == ""


def test_the_factory_gives_the_local_backend_its_groups(monkeypatch):
    from swarm_evo.sandbox.factory import make_sandbox
    from swarm_evo.sandbox.gpu_slots import execution_workers

    monkeypatch.setattr(gpu_slots_mod, "host_gpus", four_gpus)
    config = _config(gpus=2, slots_per_gpu=2).with_overrides({"sandbox.preload": []})
    assert execution_workers(config) == 4 and execution_workers(RunConfig()) == RunConfig().search.parallel_workers
    sandbox = make_sandbox(config)
    assert isinstance(sandbox, LocalSandbox) and [g.names for g in sandbox.gpu_groups] == [("0",), ("1",)]
    assert sandbox.devices.slots == 4 and sandbox.gpu_limit is None


# ------------------------------------------------------------------------------ docker backend


class _FakeClient:
    """Enough of ``docker.DockerClient`` to build a DockerSandbox and its container arguments."""

    def __init__(self):
        self.images = types.SimpleNamespace(get=lambda name: object())
        self.created = []

    def ping(self):
        return True


def _docker_sandbox(**kw):
    from swarm_evo.sandbox.docker_sandbox import DockerSandbox

    return DockerSandbox(client=_FakeClient(), num_threads=1, **kw)


def test_docker_request_and_environment_name_the_group(tmp_path):
    sb = _docker_sandbox(gpus=device_groups("0,2", four_gpus), slots_per_gpu=2)
    assert sb.devices.slots == 4 and sb.gpu_limit is None
    (request,) = sb.container_kwargs(tmp_path, tmp_path, sb.gpu_groups[1], "x")["device_requests"]
    assert request["Driver"] == "nvidia" and request["DeviceIDs"] == ["2"] and request["Capabilities"] == [["gpu"]]
    env = sb.container_kwargs(tmp_path, tmp_path, sb.gpu_groups[1], "x")["environment"]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "2" and env["CUDA_VISIBLE_DEVICES"] == UUIDS[2]
    none = sb.container_kwargs(tmp_path, tmp_path, None, "x")
    assert none["device_requests"] is None and "CUDA_VISIBLE_DEVICES" not in none["environment"]
    # a spec (as before) is one group; "all" unseen from here is Docker's choice under the host-wide limit
    assert sb.container_kwargs(tmp_path, tmp_path, ("1", "3"), "x")["device_requests"][0]["DeviceIDs"] == ["1", "3"]
    whole = _docker_sandbox(gpus=device_groups("all", no_gpu, docker=True))
    assert whole.gpu_limit == default_limit_name()
    assert whole.container_kwargs(tmp_path, tmp_path, whole.gpu_groups[0], "x")["device_requests"][0]["Count"] == -1


def test_docker_executions_each_hold_a_group(tmp_path, public_dir):
    sb = _docker_sandbox(gpus=device_groups(2, four_gpus))
    used = []
    sb.create_container = lambda workdir, public, gpus: types.SimpleNamespace(remove=lambda **kw: None, gpus=gpus)

    def run(container, workdir, timeout, gpus, owner=None):
        used.append((gpus.names, sb.devices.in_use()))
        return "done"

    sb._run = run
    with sb.devices.lease() as held:
        assert held.names == ("0",)
        assert sb.execute("print(1)", tmp_path / "node", public_dir, 5) == "done"
    assert used == [(("1",), [1, 1])] and sb.devices.in_use() == [0, 0]


def test_the_confinement_line_names_the_gpus(tmp_path):
    local = LocalSandbox(gpus=device_groups(2, four_gpus), slots_per_gpu=2, preload=())
    assert local.describe_confinement().endswith(
        "; GPUs: 0, 1 (one per execution, 2 executions per GPU: 4 slots; GPU memory not bounded)")
    assert "GPU" not in LocalSandbox(preload=()).describe_confinement()
    whole = _docker_sandbox(gpus=device_groups("all", no_gpu, docker=True))
    assert whole.describe_confinement().endswith(
        f"; GPUs: all GPUs of the Docker host, shared by its containers (global concurrency limit "
        f"{default_limit_name()}; GPU memory not bounded)")
