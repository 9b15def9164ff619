#!/usr/bin/env bash
# Build the sandbox runtime image with no image registry (SPEC §10; ../shared/NOTES.md):
# a Debian bookworm root filesystem from debootstrap, the pinned Python stack of
# requirements-tabular.txt (the `tabular` profile, the same file `swarm-evo env build` installs for
# the local backend) in /opt/venv, then `docker import`. Equivalent to sandbox.Dockerfile.
#
#   bash deployments/build-sandbox-image-offline.sh [IMAGE]      (default swarm-evo-sandbox:latest)
#
# Needs root, debootstrap, a running Docker engine, the Debian mirror, and python3 -m pip on the
# host with access to a package index: wheels are downloaded by the host's pip (its index,
# proxy and certificate settings apply) and installed inside with --no-index. Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# SWARM_EVO_REBUILD=1 to rebuild an image that already exists (else it is kept: CI caches it).
set -euo pipefail

IMAGE="${1:-swarm-evo-sandbox:latest}"
HERE="$(cd "$(dirname "$0")" && pwd)"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
REQUIREMENTS="$HERE/requirements-tabular.txt"

die() { echo "build-sandbox-image-offline: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (debootstrap and chroot need it)"
command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install -y debootstrap"
docker info >/dev/null 2>&1 || die "no Docker engine answers: start dockerd (see docs/sandbox.md)"

# The requirements file's hash is a label of the image: a changed pin means a rebuild.
REQ_HASH="$(sha256sum "$REQUIREMENTS" | cut -c1-16)"
if [ "${SWARM_EVO_REBUILD:-0}" != 1 ] && \
   [ "$(docker image inspect -f '{{ index .Config.Labels "org.swarm-evo.requirements" }}' "$IMAGE" 2>/dev/null)" = "$REQ_HASH" ]; then
  echo "image $IMAGE is up to date (requirements $REQ_HASH); SWARM_EVO_REBUILD=1 to rebuild"
  exit 0
fi

ROOTFS="$(mktemp -d /tmp/swarm-evo-rootfs.XXXXXX)"
cleanup() {
  umount "$ROOTFS/proc" 2>/dev/null || true
  rm -rf "$ROOTFS"
}
trap cleanup EXIT

start=$(date +%s)
echo "[1/4] debootstrap bookworm into $ROOTFS"
# libgomp1: LightGBM's OpenMP runtime (its wheel links the system's libgomp.so.1).
debootstrap --variant=minbase --include=python3,python3-venv,libgomp1 \
  bookworm "$ROOTFS" "$MIRROR" >/tmp/swarm-evo-debootstrap.log 2>&1 \
  || { tail -20 /tmp/swarm-evo-debootstrap.log >&2; die "debootstrap failed (log: /tmp/swarm-evo-debootstrap.log)"; }

echo "[2/4] pinned Python stack into /opt/venv"
# Wheels for CPython 3.11 on manylinux x86_64 (bookworm's python3 is 3.11, glibc 2.36).
mkdir -p "$ROOTFS/tmp/wheels"
cp "$REQUIREMENTS" "$ROOTFS/tmp/requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$ROOTFS/tmp/wheels" -r "$REQUIREMENTS"
mount -t proc proc "$ROOTFS/proc"
# A clean environment inside: nothing from the host's pip settings applies there.
in_root() { chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root "$@"; }
in_root python3 -m venv /opt/venv
in_root /opt/venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check \
  --no-index --find-links /tmp/wheels -r /tmp/requirements.txt
in_root /opt/venv/bin/python -c "import numpy, pandas, sklearn, scipy, lightgbm, xgboost, catboost, optuna, PIL, skimage; print('python stack ok')"
umount "$ROOTFS/proc"

echo "[3/4] trim"
mkdir -p "$ROOTFS/workspace"
rm -rf "$ROOTFS/tmp/"* "$ROOTFS/var/cache/apt/archives/"*.deb "$ROOTFS/var/lib/apt/lists/"* \
  "$ROOTFS/usr/share/doc" "$ROOTFS/usr/share/man" "$ROOTFS/usr/share/locale"
# Keep the bytecode pip compiled: the root filesystem is read-only in the sandbox, so without
# it every execution would compile numpy/pandas/sklearn from source (≈ 1.5 s measured).

echo "[4/4] docker import $IMAGE"
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["python"]' \
  --change "LABEL org.swarm-evo.sandbox=1 org.swarm-evo.profile=tabular org.swarm-evo.requirements=$REQ_HASH" \
  - "$IMAGE" >/dev/null
echo "built $IMAGE in $(( $(date +%s) - start )) s: $(docker image inspect -f '{{ .Size }}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
