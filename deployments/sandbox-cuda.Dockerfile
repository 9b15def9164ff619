# The CUDA sandbox runtime image (SPEC §10; issue 15's `deep` profile) for GPU hosts: Debian
# bookworm, CPython 3.11, /opt/venv holding requirements-deep.txt: the tabular stack plus torch,
# torchvision and timm. torch 2.14.1 from PyPI is a CUDA 13 build with its own CUDA libraries.
# Same layout as sandbox.Dockerfile (PATH, /workspace, labels).
#
#   docker build -f deployments/sandbox-cuda.Dockerfile -t swarm-evo-sandbox-cuda:latest deployments
#
# The build context is deployments/ (requirements-deep.txt includes requirements-tabular.txt).
# Needs the registries docker.io (python:3.11-slim-bookworm) and pypi.org; about 6.5 GB.
# Running it with GPUs needs the NVIDIA driver (CUDA 13: driver >= 580) and the NVIDIA Container Toolkit on the host:
#   docker run --rm --gpus all swarm-evo-sandbox-cuda:latest \
#     python -c "import torch; print(torch.cuda.is_available(), torch.cuda.get_device_name(0))"
# Use it for the sandbox with `--executor docker --image swarm-evo-sandbox-cuda:latest --gpus all`,
# or as the base of the flow image (flow.Dockerfile, --build-arg BASE=swarm-evo-sandbox-cuda:latest).
# No nvidia/cuda base is needed: PyPI's torch wheels carry the CUDA runtime, cuBLAS and cuDNN
# (nvidia-* packages), and the NVIDIA Container Toolkit mounts the host driver (libcuda) into
# any image run with --gpus when NVIDIA_DRIVER_CAPABILITIES includes compute (set below).
FROM python:3.11-slim-bookworm

# libgomp1: LightGBM's OpenMP runtime (its wheel links the system's libgomp.so.1).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/*

COPY requirements-tabular.txt requirements-deep.txt /tmp/
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
      -r /tmp/requirements-deep.txt \
 && /opt/venv/bin/python -c "import numpy, pandas, sklearn, lightgbm, xgboost, catboost, optuna, PIL, skimage, torch, torchvision, timm; print('python stack ok, torch', torch.__version__, 'cuda', torch.version.cuda)" \
 && rm /tmp/requirements-*.txt \
 && mkdir -p /workspace

ENV PATH=/opt/venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.swarm-evo.sandbox=1 org.swarm-evo.profile=deep org.swarm-evo.cuda=13.0
WORKDIR /workspace
CMD ["python"]
