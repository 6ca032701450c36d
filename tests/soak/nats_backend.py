"""The campaign's NATS: a three-node cluster (``switchboard.natscluster``) when the library has
it, else one ``NatsServer``. One small interface, so the chaos driver and the services do not
care which: a fault on "a node" is a single node of the cluster, or the whole server."""

from __future__ import annotations

import contextlib
import importlib
import os
import secrets
import signal
import time
from pathlib import Path
from typing import Any, Protocol

from switchboard import natsauth
from switchboard.embedded import NatsServer


class NatsBackend(Protocol):
    kind: str  # "cluster" or "single"
    size: int

    @property
    def admin_url(self) -> str: ...

    def service_env(self, service: str) -> dict[str, str]: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def kill_node(self, index: int) -> None: ...

    def restart_node(self, index: int) -> None: ...

    def pids(self) -> list[int]: ...


class SingleNats:
    """One nats-server with a NATS user per service; a node fault takes the whole server down."""

    kind = "single"
    size = 1

    def __init__(self, store: Path) -> None:
        credentials = natsauth.Credentials.derive("p" + secrets.token_hex(18))
        self.server = NatsServer(store, credentials=credentials)

    @property
    def admin_url(self) -> str:
        return self.server.admin_url

    def service_env(self, service: str) -> dict[str, str]:
        return self.server.service_env(service)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def kill_node(self, index: int) -> None:
        """SIGKILL, as a crash would (no JetStream flush); stop() then only tidies up."""
        pid = self.server.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while self.server.running and time.monotonic() < deadline:
                time.sleep(0.02)
        self.server.stop()

    def restart_node(self, index: int) -> None:
        self.server.start()  # same port and store: restart() keeps both

    def pids(self) -> list[int]:
        return [self.server.pid] if self.server.pid is not None else []


class ClusterNats:
    """``switchboard.natscluster.NatsCluster`` (three nodes on loopback, streams at three
    replicas: SB_NATS_REPLICAS, which :meth:`service_env` adds)."""

    kind = "cluster"

    def __init__(self, store: Path, size: int = 3) -> None:
        module = importlib.import_module("switchboard.natscluster")
        self.size = size
        credentials = natsauth.Credentials.derive("p" + secrets.token_hex(18))
        self.cluster: Any = module.NatsCluster(store, size=size, credentials=credentials)

    @property
    def admin_url(self) -> str:
        url = getattr(self.cluster, "admin_url", None)
        return str(url if url is not None else self.cluster.url)

    def service_env(self, service: str) -> dict[str, str]:
        env = dict(self.cluster.service_env(service))
        env.setdefault("SB_NATS_REPLICAS", str(self.size))
        return env

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop()

    def kill_node(self, index: int) -> None:
        self.cluster.kill_node(index)

    def restart_node(self, index: int) -> None:
        self.cluster.restart_node(index)

    def pids(self) -> list[int]:
        found = []
        for node in self.cluster.nodes:
            pid = getattr(node, "pid", None)
            if pid is not None:
                found.append(int(pid))
        return found


def cluster_available() -> bool:
    try:
        module = importlib.import_module("switchboard.natscluster")
    except ImportError:
        return False
    return hasattr(module, "NatsCluster")


def make_nats(store: Path, want_cluster: bool = True) -> NatsBackend:
    """The cluster of three when ``want_cluster`` and the library has it, else one server."""
    if want_cluster and cluster_available():
        return ClusterNats(store)
    return SingleNats(store)
