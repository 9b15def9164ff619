# The CUDA sandbox runtime image (SPEC §10) for GPU hosts: CUDA 12.6 + cuDNN runtime on
# Ubuntu 24.04, CPython 3.12 in /opt/venv with the pins of sandbox-requirements.txt plus a
# CUDA 12.6 build of PyTorch. Same layout as sandbox.Dockerfile (PATH, /workspace, label).
#
#   docker build -f deployments/sandbox-cuda.Dockerfile -t swarm-evo-sandbox-cuda:latest deployments
#
# The build context is deployments/. Needs the registry (nvidia/cuda) and the package indexes
# pypi.org and download.pytorch.org. Running it with GPUs needs the NVIDIA driver and the
# NVIDIA Container Toolkit on the host:
#   docker run --rm --gpus all swarm-evo-sandbox-cuda:latest \
#     python -c "import torch; print(torch.cuda.is_available(), torch.cuda.get_device_name(0))"
# Use it for the sandbox with `--executor docker --image swarm-evo-sandbox-cuda:latest --gpus all`,
# or as the base of the flow image (flow.Dockerfile, --build-arg BASE=swarm-evo-sandbox-cuda:latest).
FROM nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04

# torch 2.7.1 has cp312 manylinux_2_28 wheels built against CUDA 12.6 (its metadata pins
# nvidia-cuda-runtime-cu12==12.6.77 and nvidia-cudnn-cu12==9.5.1.17); the local version
# "+cu126" exists only on the PyTorch index, so the pin cannot resolve to another build.
ARG TORCH_SPEC=torch==2.7.1+cu126
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu126

# Ubuntu 24.04's python3 is 3.12; the sandbox-requirements.txt pins all have cp312 wheels.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*

COPY sandbox-requirements.txt /tmp/sandbox-requirements.txt
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
      --extra-index-url "$TORCH_INDEX" -r /tmp/sandbox-requirements.txt "$TORCH_SPEC" \
 && /opt/venv/bin/python -c "import numpy, pandas, sklearn, scipy, torch; print('python stack ok, torch', torch.__version__, 'cuda', torch.version.cuda)" \
 && rm /tmp/sandbox-requirements.txt \
 && mkdir -p /workspace

ENV PATH=/opt/venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.swarm-evo.sandbox=1 org.swarm-evo.cuda=12.6
WORKDIR /workspace
CMD ["python"]
