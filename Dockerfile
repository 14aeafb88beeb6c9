# fairgate images. Two targets:
#   docker build --target cpu  -t fairgate:cpu  .   # gateway, and CPU engine servers
#   docker build --target cuda -t fairgate:cuda .   # engine servers on NVIDIA GPUs (triton kernels)
# A first stage, `wheel`, builds the package both install. The same image runs `fairgate serve`
# (gateway) or `fairgate engine` (engine server); see deploy/compose.yaml and deploy/k8s/. Models
# are mounted, never baked in.

ARG PYTHON_VERSION=3.11

# The package, built once: one wheel whose only top-level name is `fairgate` (tests/test_packaging.py)
FROM python:${PYTHON_VERSION}-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY backends ./backends
COPY gateway ./gateway
COPY kernels ./kernels
COPY migrations ./migrations
COPY policies ./policies
COPY scheduler ./scheduler
RUN pip wheel --no-cache-dir --no-deps -w /dist .

FROM python:${PYTHON_VERSION}-slim-bookworm AS cpu
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# A C compiler and OpenMP: the native CPU kernels are built with -march=native for the CPU the
# container runs on (at the engine's first start, cached in FAIRGATE_KERNEL_CACHE), so they cannot
# be built here; without gcc the engine would fall back to the torch reference path.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libgomp1 \
    && rm -rf /var/lib/apt/lists/*
# torch from the CPU index: the default wheel drags in 2 GB of CUDA libraries a gateway never uses
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
COPY --from=wheel /dist/ /tmp/dist/
RUN pip install /tmp/dist/fairgate-*.whl && rm -r /tmp/dist && useradd --system --uid 10001 --home /app fairgate
ENV FAIRGATE_KERNEL_CACHE=/tmp/fairgate-kernels
USER 10001
EXPOSE 8000 8100
HEALTHCHECK --interval=10s --timeout=3s CMD ["python", "-c", "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:' + __import__('os').environ.get('FAIRGATE_PORT', '8000') + '/health/liveness', timeout=2)"]
ENTRYPOINT ["fairgate"]
CMD ["serve"]

FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS cuda
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip python3-dev build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
RUN pip3 install --index-url https://download.pytorch.org/whl/cu128 "torch==2.13.0"
COPY --from=wheel /dist/ /tmp/dist/
RUN pip3 install /tmp/dist/fairgate-*.whl && rm -r /tmp/dist && useradd --system --uid 10001 --home /app fairgate
USER 10001
EXPOSE 8100
ENTRYPOINT ["fairgate"]
CMD ["engine", "--help"]
