"""Every deployment of prefect.yaml confines its programs (issue 42, item 2).

The test walks prefect.yaml's deployments. A deployment on the process work pool runs its flow
on the worker's host: the hunt (``tests/hostile/hunt.py``: the answers, host files and secrets,
other processes' environments, every listening port and unix socket of the host, the Prefect
API) runs through the sandbox that deployment's flow builds from its parameters. A deployment on
the docker work pool (``docker-gpu``) runs its flow in a container of its image: the test makes
that container from the deployment's job variables as prefect-docker 0.7.4's
``DockerWorker._build_container_settings`` does (image, volumes with ``$PWD`` templated, host
networking for a 127.0.0.1 API, ``container_create_kwargs``; the GPU request is left out on a
host without the NVIDIA runtime) and runs the hunt there through the sandbox the flow builds.
Before issue 42 that container's programs ran "NOT confined" and found the answers of the
mounted data directory and reached the Prefect API.

What the container runs is the deployment's image as this machine can make it without the
package index (which no test may use): the sandbox image (built offline by ``.ci/run``) with this
checkout, its virtual environments and their interpreter mounted read-only at their own paths,
the same project and program environment ``deployments/flow.Dockerfile`` installs into the real
image (``deployments/build-flow-image-offline.sh`` builds that one, ≈ 3 min with the index). What
confines is the container's settings (the job variables: capabilities, volumes, shared memory,
network) and the local backend inside it; both are the deployment's own here. Without the
deployment's capabilities the same container refuses to run programs; with
``sandbox.allow_unconfined`` it runs them, says so, and the same hunt finds the answers (the
probes are not vacuous there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from test_confinement_run import open_world  # noqa: F401 - fixture
from test_confinement import (  # noqa: F401 - fixtures
    TIMEOUT,
    World,
    _make_world,
    assert_confined,
    host_listening_ports,
    host_unix_sockets,
    probes_of,
    stand_in_server,
    world,
)

REPO = Path(__file__).resolve().parents[1]
SPEC = yaml.safe_load((REPO / "prefect.yaml").read_text())
POOL_TYPES = {"swarm-evo-process": "process", "swarm-evo-docker": "docker"}
"""The work pools prefect.yaml's comments create (``prefect work-pool create NAME --type TYPE``)."""
CHECKOUT = "/opt/swarm-evo"
"""Where the flow image holds the code (the docker deployment's pull step)."""


def deployments(pool_type: str) -> list[dict]:
    found = [d for d in SPEC["deployments"] if POOL_TYPES.get(d["work_pool"]["name"]) == pool_type]
    return found


def test_every_deployment_is_on_a_known_work_pool():
    unknown = [(d["name"], d["work_pool"]["name"]) for d in SPEC["deployments"] if d["work_pool"]["name"] not in POOL_TYPES]
    assert not unknown, f"a deployment on a work pool this test does not know: {unknown}"
    assert deployments("process") and deployments("docker")


# ------------------------------------------------------------------------------ process work pool


def flow_sandbox(entrypoint: str, parameters: dict):
    """The sandbox the deployment's flow builds from its parameters (the flows' own calls)."""
    executor = parameters.get("executor") or "local"
    if entrypoint.startswith("flows/evaluate_program.py"):  # run_evaluation's call
        from swarm_evo.config import load_config
        from swarm_evo.sandbox.factory import make_sandbox

        return make_sandbox(load_config(None).with_overrides({"sandbox.backend": executor}))
    from flows.run_config import resolve_config  # two_phase_evo and benchmark_sweep's runs
    from swarm_evo.run.session import open_sandbox

    return open_sandbox(resolve_config(None, executor=executor)[0])[0]


@pytest.mark.slow
@pytest.mark.parametrize("deployment", deployments("process"), ids=lambda d: f"{d['entrypoint'].split(':')[1]}/{d['name']}")
def test_process_pool_deployment_confines_its_programs(deployment, world: World):  # noqa: F811
    sandbox = flow_sandbox(deployment["entrypoint"], deployment.get("parameters") or {})
    result = sandbox.execute(world.code(), world.root / "runs" / deployment["name"], world.public, TIMEOUT)
    probes = probes_of(f"deployment {deployment['name']} ({deployment['entrypoint']})", result)
    assert_confined(probes)


# ------------------------------------------------------------------------------ docker work pool

INNER = textwrap.dedent("""
    # Inside the flow container: plant a secret in root's home and a process whose environment
    # holds one, build the sandbox as the flow does, run the hunt through it.
    import json, logging, os, subprocess, sys
    from pathlib import Path
    args = json.loads(sys.argv[1])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    secret = Path("/root/.cache") / args["marker"] / "token"
    secret.parent.mkdir(parents=True)
    secret.write_text(args["marker"])
    decoy = subprocess.Popen(["sleep", "300"], env={**os.environ, "SWARM_EVO_PROBE_SECRET": args["marker"]})
    try:
        from flows.run_config import resolve_config
        from swarm_evo.run.session import open_sandbox
        config = resolve_config(None, executor=args["executor"])[0].with_overrides(args["overrides"])
        sandbox, runtime = open_sandbox(config)
        res = sandbox.execute(args["code"], Path(args["workdir"]), Path(args["public"]), args["timeout"])
        out = {"stdout": res.stdout, "exc": res.exc_type, "info": res.exc_info, "term_out": res.term_out[-3000:],
               "confinement": runtime.confinement, "confined": runtime.confined, "memory_limit_mb": runtime.memory_limit_mb}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        decoy.kill()
    print("RESULT=" + json.dumps(out), flush=True)
""")


class _Result:
    def __init__(self, out: dict):
        self.stdout, self.exc_type, self.exc_info, self.term_out = out["stdout"], out["exc"], out["info"], out["term_out"]


@pytest.fixture(scope="module")
def flow_image(docker_client) -> dict:
    """The docker deployment's runtime (see the module): ``{"image", "volumes", "python"}``."""
    from swarm_evo.sandbox import DEFAULT_IMAGE

    [image] = {d["work_pool"]["job_variables"]["image"] for d in deployments("docker")}
    assert image == "swarm-evo-flow:latest" and "-f deployments/flow.Dockerfile" in (REPO / "prefect.yaml").read_text()
    docker_client.images.get(DEFAULT_IMAGE)  # fails (never skips) when .ci/run's image is missing
    return {"image": DEFAULT_IMAGE, "python": sys.executable,
            "volumes": [f"{path}:{path}:ro" for path in sorted({sys.base_prefix, str(REPO)})]}


def _nvidia_runtime(client) -> bool:
    return "nvidia" in (client.info().get("Runtimes") or {})


def container_settings(deployment: dict, checkout: Path, api_url: str, client, runtime: dict,
                       drop: tuple[str, ...] = ()) -> dict:
    """``containers.create`` arguments for the deployment, as prefect-docker's worker makes them,
    on ``runtime`` (:func:`flow_image`) instead of the image."""
    jv = deployment["work_pool"]["job_variables"]
    volumes = [v.replace("{{ $PWD }}", str(checkout)) for v in jv.get("volumes") or []] + runtime["volumes"]
    kwargs = dict(jv.get("container_create_kwargs") or {})
    if not _nvidia_runtime(client):  # "could not select device driver": the GPU request is left out here
        assert kwargs.pop("device_requests"), "the docker deployment asks for the GPUs"
    for key in drop:
        kwargs.pop(key)
    host = urlparse(api_url).hostname
    return dict(image=runtime["image"], volumes=volumes, network_mode="host" if host in ("127.0.0.1", "localhost") else None,
                environment={"PREFECT_API_URL": api_url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
                working_dir=deployment["pull"][0]["prefect.deployments.steps.set_working_directory"]["directory"],
                **kwargs)


def run_in_flow_container(client, deployment: dict, world: World, checkout: Path, api_url: str,  # noqa: F811
                          runtime: dict, drop: tuple[str, ...] = (), overrides: dict | None = None) -> dict:
    """The hunt through the flow's sandbox in the deployment's container; INNER's result."""
    name = f"{deployment['name']}-{uuid.uuid4().hex[:6]}"
    inside = World(Path(CHECKOUT), Path(CHECKOUT) / world.public.relative_to(checkout),
                   Path(CHECKOUT) / world.answers.relative_to(checkout), "/root", world.marker, world.ports,
                   targets=[str(Path(CHECKOUT) / world.answers.relative_to(checkout))], unix=world.unix)
    args = {"marker": world.marker, "executor": (deployment.get("parameters") or {}).get("executor") or "local",
            "overrides": overrides or {}, "code": inside.code(), "timeout": TIMEOUT,
            "workdir": f"{CHECKOUT}/runs/{name}/node", "public": str(inside.public)}
    settings = container_settings(deployment, checkout, api_url, client, runtime, drop)
    container = client.containers.create(command=[runtime["python"], "-c", INNER, json.dumps(args)], **settings)
    try:
        container.start()
        status = container.wait(timeout=TIMEOUT + 120)
        logs = container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)
    lines = [line for line in logs.splitlines() if line.startswith("RESULT=")]
    assert lines, f"exit {status}: {logs[-4000:]}"
    return {**json.loads(lines[-1][len("RESULT="):]), "logs": logs}


@pytest.fixture()
def checkout(stand_in_server, prefect_api_url):  # noqa: F811
    """``$PWD`` of the deploying checkout: data/ (one competition, its answers marked) and runs/."""
    w, cleanup = _make_world(stand_in_server, prefect_api_url, "/root", None)
    yield w
    for path in cleanup:
        subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("deployment", deployments("docker"), ids=lambda d: d["name"])
def test_docker_pool_deployment_confines_its_programs(deployment, flow_image, docker_client, checkout: World,
                                                      prefect_api_url):
    out = run_in_flow_container(docker_client, deployment, checkout, checkout.root, prefect_api_url, flow_image)
    assert "error" not in out, out
    probes = probes_of(f"deployment {deployment['name']} (flow container)", _Result(out))
    assert_confined(probes)
    assert probes["interfaces"] == ["lo"]
    assert out["confined"] and out["confinement"].startswith("namespaces"), out["confinement"]
    assert "per execution" in out["confinement"] and out["memory_limit_mb"], out  # a memory cgroup in the container


@pytest.mark.slow
def test_flow_container_without_the_capabilities_refuses_or_warns(flow_image, docker_client, checkout: World,
                                                                  prefect_api_url):
    """Without CAP_SYS_ADMIN/CAP_NET_ADMIN (a docker pool set up as before issue 42) the flow refuses
    to run programs; with ``sandbox.allow_unconfined`` it runs them unconfined, says so, and the
    hunt finds the answers."""
    [deployment] = [d for d in deployments("docker") if d["name"] == "docker-gpu"]
    refused = run_in_flow_container(docker_client, deployment, checkout, checkout.root, prefect_api_url, flow_image,
                                    drop=("cap_add",))
    assert refused.get("error", "").startswith("SandboxUnavailableError"), refused
    for words in ("cannot confine", "CAP_SYS_ADMIN", "sandbox.allow_unconfined: true"):
        assert words in refused["error"], refused["error"]
    allowed = run_in_flow_container(docker_client, deployment, checkout, checkout.root, prefect_api_url, flow_image,
                                    drop=("cap_add",), overrides={"sandbox.allow_unconfined": True})
    assert "error" not in allowed, allowed
    probes = probes_of("deployment docker-gpu without capabilities, allow_unconfined", _Result(allowed))
    assert not allowed["confined"] and allowed["confinement"].startswith("NOT confined"), allowed["confinement"]
    assert "programs are NOT confined (sandbox.allow_unconfined)" in allowed["logs"]
    assert f"{CHECKOUT}/data/comp-x/prepared/private/test.csv" in probes["targets"], probes
    assert urlparse(prefect_api_url).port in probes["ports"], probes["ports"]


@pytest.mark.slow
def test_a_run_in_a_flow_container_that_cannot_confine_stops_or_warns_in_its_first_lines_and_report(
        flow_image, docker_client, tmp_path, prefect_api_url):
    """``swarm-evo run`` (the flow the deployment runs) in the docker-gpu container without its
    capabilities: exit 2 before any step, naming the fixes; with ``sandbox.allow_unconfined: true``
    the run goes on and says so in its first lines, its log and its report."""
    from swarm_evo.cli.commands import main

    [deployment] = [d for d in deployments("docker") if d["name"] == "docker-gpu"]
    checkout = Path("/tmp") / f"swarm-evo-ck-{uuid.uuid4().hex[:8]}"
    (checkout / "runs").mkdir(parents=True)
    try:
        assert main(["prepare", "sklearn-diabetes", "--data-dir", str(checkout / "data")]) == 0
        (checkout / "runs" / "allow.yaml").write_text("sandbox:\n  allow_unconfined: true\n")
        subprocess.run(["chmod", "-R", "a+rX", str(checkout)], check=True)
        settings = container_settings(deployment, checkout, prefect_api_url, docker_client, flow_image,
                                      drop=("cap_add",))  # the session API (host network): no ephemeral API inside
        settings["environment"]["PREFECT_HOME"] = "/tmp/prefect"
        outputs = {}
        for case, extra in (("refused", []), ("allowed", ["--config", f"{CHECKOUT}/runs/allow.yaml"])):
            command = [str(Path(flow_image["python"]).parent / "swarm-evo"), "run", "--competition-id", "sklearn-diabetes", "--data-dir", f"{CHECKOUT}/data",
                       "--model", "offline", "--max-steps", "1", "--parallel-workers", "1", "--executor",
                       deployment["parameters"]["executor"], "--run-dir", f"{CHECKOUT}/runs/{case}", *extra]
            container = docker_client.containers.create(command=command, **settings)
            try:
                container.start()
                status = container.wait(timeout=600)["StatusCode"]
                outputs[case] = (status, container.logs(stdout=True, stderr=False).decode(errors="replace"),
                                 container.logs(stdout=False, stderr=True).decode(errors="replace"))
            finally:
                container.remove(force=True)
        status, out, err = outputs["refused"]
        assert status == 2 and "cannot confine programs here" in err and "sandbox.allow_unconfined: true" in err, err[-3000:]
        assert not (checkout / "runs" / "refused").exists(), "nothing ran, nothing was written"
        status, out, err = outputs["allowed"]
        assert status == 0, (out[-3000:], err[-3000:])
        first = out.splitlines()[:5]
        assert any(line.startswith("confinement: NOT confined (sandbox.allow_unconfined)") for line in first), first
        assert "programs are NOT confined (sandbox.allow_unconfined)" in out + err
        report = (checkout / "runs" / "allowed" / "report.md").read_text()
        assert "**Warning: programs ran unconfined:** NOT confined" in report, report[:2000]
        journal = json.loads((checkout / "runs" / "allowed" / "journal.json").read_text())
        assert journal["info"]["runtime"]["confined"] is False
    finally:
        subprocess.run(["rm", "-rf", str(checkout)], check=False)


# ------------------------------------------------------------------------------ the Eval Service


@pytest.mark.slow
def test_eval_service_confines_its_programs(world: World, prefect_api_url):  # noqa: F811
    """``swarm-evo eval run`` (the evaluate-program flow in this process, as ``eval serve`` and the
    process pool run it): the hunt as the evaluated program finds nothing and reaches nothing."""
    program = world.root / "runs" / "hunt.py"
    program.write_text(world.code())
    results = world.root / "runs" / "eval"
    env = {**os.environ, "PREFECT_API_URL": prefect_api_url}
    done = subprocess.run([sys.executable, "-m", "swarm_evo.cli", "eval", "run", "--problem", "circle-packing",
                           str(program), "--results-dir", str(results), "--num-runs", "1"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=world.root)
    log = results / "runs" / "run-0" / "stdout.txt"
    assert log.is_file(), done.stdout[-2000:] + done.stderr[-3000:]
    ran = _Result({"stdout": log.read_text(), "exc": None, "info": None, "term_out": done.stderr[-3000:]})
    assert_confined(probes_of("swarm-evo eval run (evaluate-program)", ran))


# ------------------------------------------------------------------------------ sweeps


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_sweep_confines_its_runs_programs(open_world, prefect_api_url):  # noqa: F811
    """``swarm-evo sweep`` (runs in this process): every draft of its run hunts for the answers and
    the host's ports (stand-in model, scenario ``answer_hunt``) and finds nothing."""
    from llm_server.runner import run_env

    root, server = open_world
    server.use("answer_hunt")
    work = root / "work-sweep"
    work.mkdir()
    (work / "config.yaml").write_text(yaml.safe_dump({
        "model": {"api_base": server.openai_base, "timeout": 20, "num_retries": 1},
        "sandbox": {"exec_timeout": 120, "python": sys.executable}}))
    done = subprocess.run([sys.executable, "-m", "swarm_evo.cli", "sweep", "--data-dir", str(root / "data"),
                           "--competitions", "spaceship-titanic", "--seeds", "1", "--max-steps", "3",
                           "--model", "openai/stand-in", "--config", str(work / "config.yaml"), "--out",
                           str(work / "out")],
                          env=run_env(work, model="openai/stand-in", api_base=server.openai_base,
                                      prefect_api_url=prefect_api_url),
                          cwd=work, capture_output=True, text=True, timeout=800)
    hunts = [line for stdout in sorted((work / "out").rglob("nodes/*/stdout.txt"))
             for line in stdout.read_text(errors="replace").splitlines() if line.startswith("HUNT:")]
    assert hunts, done.stdout[-2000:] + done.stderr[-3000:]
    assert set(hunts) == {"HUNT: answers=none; ports=none"}, sorted(set(hunts))
