#!/usr/bin/env bash
# Build the flow image of the `docker-gpu` deployment (deployments/flow.Dockerfile: the sandbox
# image plus this project) with no image registry (../shared/NOTES.md): on the local base image,
# with the build's containers on the host's network (here containers reach no package index
# otherwise) and the host's CA bundle (a TLS-inspecting proxy) as build/pip-ca.pem.
#
#   bash deployments/build-flow-image-offline.sh [IMAGE [BASE]]
#       (defaults swarm-evo-flow:latest and swarm-evo-sandbox:latest; CUDA hosts:
#        BASE=swarm-evo-sandbox-cuda:latest)
#
# Needs a running Docker engine and the base image (bash deployments/build-sandbox-image-offline.sh).
# An image whose label org.swarm-evo.source equals the hash of the sources, the pins and the base
# image is kept (tests/test_deployments_confined.py calls this script; SWARM_EVO_REBUILD=1 rebuilds).
set -euo pipefail

IMAGE="${1:-swarm-evo-flow:latest}"
BASE="${2:-swarm-evo-sandbox:latest}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

die() { echo "build-flow-image-offline: $*" >&2; exit 1; }
docker info >/dev/null 2>&1 || die "no Docker engine answers: bash deployments/start-docker-engine.sh"
base_id="$(docker image inspect -f '{{ .Id }}' "$BASE" 2>/dev/null)" \
  || die "base image $BASE missing: bash deployments/build-sandbox-image-offline.sh"

cd "$ROOT"
# What goes into the image: the installed packages' sources, the pins, the Dockerfile, the base.
source_hash="$( { find swarm_evo flows tasks blocks prompt_templates -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
                    -print0 | sort -z | xargs -0 sha256sum;
                  sha256sum pyproject.toml deployments/flow.Dockerfile deployments/flow_overlay.py \
                    deployments/requirements-tabular.txt;
                  echo "$base_id"; } | sha256sum | cut -c1-16)"
if [ "${SWARM_EVO_REBUILD:-0}" != 1 ] && \
   [ "$(docker image inspect -f '{{ index .Config.Labels "org.swarm-evo.source" }}' "$IMAGE" 2>/dev/null)" = "$source_hash" ]; then
  echo "image $IMAGE is up to date (sources $source_hash); SWARM_EVO_REBUILD=1 to rebuild"
  exit 0
fi

start=$(date +%s)
mkdir -p build
for ca in "${PIP_CERT:-}" /etc/ssl/certs/ca-certificates.crt; do
  if [ -n "$ca" ] && [ -s "$ca" ]; then cp "$ca" build/pip-ca.pem; break; fi
done
echo "docker build $IMAGE (base $BASE)"
docker build --quiet --network host -f deployments/flow.Dockerfile --build-arg "BASE=$BASE" \
  --label "org.swarm-evo.source=$source_hash" -t "$IMAGE" . >/dev/null
echo "built $IMAGE in $(( $(date +%s) - start )) s: $(docker image inspect -f '{{ .Size }}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
