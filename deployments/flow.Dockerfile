# The image a Prefect *docker* work pool runs the `two-phase-evo` flow in (prefect.yaml,
# deployment `docker-gpu`): the sandbox runtime image plus this repository installed into its
# /opt/venv. Inside it the flow uses the *local* sandbox backend (each program in namespaces of
# its own, as on a process worker) with the GPUs the container got from the work pool, so no
# Docker socket is needed.
#
# Build context = the repository root (.dockerignore keeps .git, venvs, runs/ and data/ out):
#   bash deployments/build-sandbox-image-offline.sh       # or: docker build -f deployments/sandbox.Dockerfile -t swarm-evo-sandbox:latest deployments
#   docker build -f deployments/flow.Dockerfile -t swarm-evo-flow:latest .
# GPU hosts (CUDA 12.6 + torch; see sandbox-cuda.Dockerfile):
#   docker build -f deployments/sandbox-cuda.Dockerfile -t swarm-evo-sandbox-cuda:latest deployments
#   docker build -f deployments/flow.Dockerfile --build-arg BASE=swarm-evo-sandbox-cuda:latest -t swarm-evo-flow:latest .
#
# Behind a TLS-intercepting proxy, pip in the build needs the proxy's CA. Put a CA bundle at
# build/pip-ca.pem (build/ is git-ignored) before building:
#   mkdir -p build && cp /etc/ssl/certs/ca-certificates.crt build/pip-ca.pem
# Only the first stage sees it (as PIP_CERT); the image gets the installed packages, not the
# file. Without it pip uses its own CA bundle (certifi), as on any ordinary machine.
# Works with the classic builder and with BuildKit; needs no registry when BASE is local.
# Without an image registry (the base built by build-sandbox-image-offline.sh) and where the build's
# containers reach the package index only through the host's network:
#   bash deployments/build-flow-image-offline.sh   (docker build --network host, the host's CA bundle)
#
# The container needs CAP_SYS_ADMIN (prefect.yaml, docker-gpu: cap_add) so that the local backend
# can confine each program in namespaces and a memory cgroup (docs/sandbox.md); without it the
# flow refuses to run programs unless sandbox.allow_unconfined is set.
ARG BASE=swarm-evo-sandbox:latest

# ---- stage 1: install the project and its dependencies into /opt/overlay -------------------
FROM ${BASE} AS build
COPY . /src
# flow_overlay.py --resolve downloads one consistent set of wheels that keeps the program stack's
# pins the project accepts, with constraints.txt pinning exactly those versions (pip then has
# nothing to search). --prefix installs only what /opt/venv lacks or has at another version, so
# stage 2 adds just these files on top of the base image. Programs run with /opt/venv's
# interpreter, which holds the tabular profile: the agent and its programs share one environment
# (the programs in namespaces of their own, docs/sandbox.md).
RUN set -e; \
    if [ -s /src/build/pip-ca.pem ]; then export PIP_CERT=/src/build/pip-ca.pem; fi; \
    py=/opt/venv/bin/python; tool=/src/deployments/flow_overlay.py; \
    $py $tool --resolve /tmp/wheels; \
    $py $tool --installed > /tmp/installed.txt; \
    $py -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location \
      --prefix /opt/overlay --no-index --find-links /tmp/wheels -c /tmp/wheels/constraints.txt /src; \
    $py $tool --replaced /opt/overlay /tmp/installed.txt > /opt/replaced.txt; \
    rm -rf /tmp/wheels; \
    rm -rf /src/build /src/*.egg-info; \
    find /src -name __pycache__ -prune -exec rm -rf {} +

# ---- stage 2: the runtime image ----------------------------------------------------------------
FROM ${BASE}
COPY --from=build /opt/replaced.txt /tmp/replaced.txt
RUN xargs -r /opt/venv/bin/python -m pip uninstall -y -q < /tmp/replaced.txt && rm /tmp/replaced.txt
COPY --from=build /opt/overlay/ /opt/venv/
COPY --from=build /src /opt/swarm-evo
# The flow runs the local sandbox; litellm reads its bundled price map (no download at import).
ENV LITELLM_LOCAL_MODEL_COST_MAP=True \
    DO_NOT_TRACK=1
RUN python -c "import prefect, litellm, swarm_evo, flows.two_phase_evo; print('prefect', prefect.__version__)" \
 && mkdir -p /opt/swarm-evo/data /opt/swarm-evo/runs
LABEL org.swarm-evo.flow=1
WORKDIR /opt/swarm-evo
CMD ["prefect", "version"]
