# The sandbox runtime image (SPEC §10) for hosts that can pull from an image registry:
# Debian bookworm, CPython 3.11, the pinned `tabular` profile (requirements-tabular.txt: the
# Kaggle stack with LightGBM, XGBoost, CatBoost, optuna, pillow, scikit-image) in /opt/venv: the
# same file `swarm-evo env build` installs for the local backend.
# Equivalent to build-sandbox-image-offline.sh (debootstrap + docker import, no registry).
#
#   docker build -f deployments/sandbox.Dockerfile -t swarm-evo-sandbox:latest deployments
#
# The build context is deployments/ (only requirements-tabular.txt is used). GPU hosts:
# sandbox-cuda.Dockerfile. The image a docker work pool runs the flow in: flow.Dockerfile.
FROM python:3.11-slim-bookworm

# pip's compiled bytecode stays in the image: the sandbox's root filesystem is read-only, so
# programs could not cache it and would recompile numpy/pandas/sklearn on every execution.

# Same pins as the offline build; the label records them like the offline script does.
# libgomp1: LightGBM's OpenMP runtime (its wheel links the system's libgomp.so.1).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/*
COPY requirements-tabular.txt /tmp/requirements.txt
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check \
      --only-binary=:all: -r /tmp/requirements.txt \
 && /opt/venv/bin/python -c "import numpy, pandas, sklearn, scipy, lightgbm, xgboost, catboost, optuna, PIL, skimage; print('python stack ok')" \
 && rm /tmp/requirements.txt \
 && mkdir -p /workspace

ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8
LABEL org.swarm-evo.sandbox=1 org.swarm-evo.profile=tabular
WORKDIR /workspace
CMD ["python"]
