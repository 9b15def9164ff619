# The image a Prefect *docker* work pool runs the `two-phase-evo` flow in (prefect.yaml,
# deployment `docker-gpu`): the sandbox runtime image plus this repository installed into its
# /opt/venv. Inside it the flow uses the *local* sandbox backend: the container is the sandbox
# and already got its GPUs from the work pool, so no Docker socket is needed.
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
ARG BASE=swarm-evo-sandbox:latest

# ---- stage 1: install the project and its dependencies into /opt/overlay -------------------
FROM ${BASE} AS build
COPY . /src
# --prefix installs only what /opt/venv lacks (the sandbox stack counts as installed and the
# constraints keep it at its pins), so stage 2 adds just these files on top of the base image.
# Programs then run with /opt/venv's interpreter, which holds the tabular profile: inside this
# image the container is the sandbox, so the agent and its programs share one environment.
RUN set -e; \
    if [ -s /src/build/pip-ca.pem ]; then export PIP_CERT=/src/build/pip-ca.pem; fi; \
    /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --no-warn-script-location \
      --prefix /opt/overlay -c /src/deployments/requirements-tabular.txt /src; \
    rm -rf /src/build /src/*.egg-info; \
    find /src -name __pycache__ -prune -exec rm -rf {} +

# ---- stage 2: the runtime image ----------------------------------------------------------------
FROM ${BASE}
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
