#!/usr/bin/env bash
# Make sure a Docker engine answers on this host, installing and starting one if needed
# (Debian/Ubuntu, as root). Used by .ci/run and by the README's test command.
#
#   bash deployments/start-docker-engine.sh
#
# Installs docker.io (the engine) and debootstrap (for build-sandbox-image-offline.sh) with
# apt-get when missing, starts dockerd in the background when nothing answers (no systemd
# needed; log: /tmp/dockerd.log), and waits up to 60 s for it.
set -euo pipefail

die() { echo "start-docker-engine: $*" >&2; exit 1; }

if docker info >/dev/null 2>&1 && command -v debootstrap >/dev/null; then
  echo "Docker engine $(docker info -f '{{ .ServerVersion }}') answers"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "no Docker engine answers and installing one needs root"

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd (log: /tmp/dockerd.log)"
  nohup dockerd >/tmp/dockerd.log 2>&1 &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 /tmp/dockerd.log >&2; die "dockerd did not come up"; }
fi
echo "Docker engine $(docker info -f '{{ .ServerVersion }}') answers"
