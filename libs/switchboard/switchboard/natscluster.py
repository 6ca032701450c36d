"""A NATS cluster on this machine: ``size`` nats-server nodes routed to each other on loopback.

Production runs NATS as a cluster with the streams at three replicas; this runs that shape on one
machine so the launcher (``switchboard up --nats-cluster 3``) and the fault campaign get it:
one node may die (SIGKILL) and the streams go on through the others, and the node comes back on
the same ports with the same store and catches up.

Each node is a :class:`~switchboard.embedded.NatsServer` (JetStream, its own store dir, the same
users and permissions of :mod:`switchboard.natsauth`) with a ``cluster`` block: a name, a route
port and routes to every other node. Routes need a password too (without one, any local process
could join the cluster as a route and bypass every user's permissions); it is generated per
cluster and written only into each node's config file (mode 0600; nats-server takes the
credentials of explicit routes from their URLs, not from the environment).

Clients get every node's client URL, comma-separated in ``SB_NATS_URL`` (:func:`bus.servers`):
they connect to any node and reconnect to another when theirs dies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import secrets
import signal
import threading
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import nats

from . import natsauth
from .embedded import NatsServer, ServerError
from .ports import free_port

__all__ = ["ROUTE_USER", "NatsCluster"]

ROUTE_USER = "route"  # the user nodes authenticate their routes to each other with
JS_INFO = "$JS.API.INFO"


class NatsCluster:
    """``size`` nodes named ``<name>-1`` .. ``<name>-N``, node ``i`` (0-based) in ``nodes[i]``
    with its store in ``store_dir/node-<i+1>`` and its log in ``log_dir/nats-<i+1>.log``.

    ``ports``: the nodes' client ports (default: free ports, picked now and kept, so
    :meth:`restart_node` comes back where clients look for it). ``size`` 1 is a plain server
    (no cluster block): what ``switchboard up`` runs by default.
    """

    def __init__(
        self,
        store_dir: Path | str,
        size: int = 3,
        *,
        credentials: natsauth.Credentials | None = None,
        log_dir: Path | None = None,
        ports: Sequence[int] | None = None,
        host: str = "127.0.0.1",
        name: str = "sb",
    ) -> None:
        if size < 1:
            raise ValueError(f"a NATS cluster needs at least one node, not {size}")
        if ports is not None and len(ports) != size:
            raise ValueError(f"{len(ports)} client ports given for {size} nodes")
        self.store_dir = Path(store_dir)
        self.size = size
        self.credentials = credentials
        self.host = host
        self.name = name
        log_dir = Path(log_dir) if log_dir else self.store_dir
        client_ports = list(ports) if ports else [free_port(host) for _ in range(size)]
        self.cluster_ports = [free_port(host) for _ in range(size)] if size > 1 else []
        self._route_password = "p" + secrets.token_hex(24)
        # stop() wins over a restart_node() running in another thread (a launcher's watcher):
        # no node is started again once the cluster is stopped.
        self._lock = threading.Lock()
        self._stopped = False
        self.nodes: list[NatsServer] = [
            NatsServer(
                self.store_dir / f"node-{i + 1}",
                client_ports[i],
                host=host,
                log_file=log_dir / f"nats-{i + 1}.log",
                credentials=credentials,
                config=self._cluster_config(i),
                start_timeout=30.0,
            )
            for i in range(size)
        ]

    # --- what clients need ------------------------------------------------------------------

    @property
    def ports(self) -> list[int]:
        """Every node's client port."""
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        """Every node's client URL, comma-separated: what ``SB_NATS_URL`` takes."""
        return ",".join(node.url for node in self.nodes)

    @property
    def admin_url(self) -> str:
        """:attr:`url` with the admin's credentials in each URL (operators' tools, tests)."""
        if self.credentials is None:
            return self.url
        password = self.credentials.passwords[natsauth.ADMIN]
        return natsauth.url_as(self.url, natsauth.ADMIN, password)

    def service_env(self, service: str) -> dict[str, str]:
        """SB_NATS_URL (every node) and, with credentials, the user and password of
        ``service``; as :meth:`NatsServer.service_env`."""
        env = {"SB_NATS_URL": self.url}
        if self.credentials is not None:
            env.update(self.credentials.service_env(service))
        return env

    def server_name(self, i: int) -> str:
        """Node ``i``'s server name (JetStream names stream and meta leaders by it)."""
        return f"{self.name}-{i + 1}"

    def index_of(self, server_name: str) -> int:
        """The index of the node named ``server_name`` (a stream's ``cluster.leader``)."""
        for i in range(self.size):
            if self.server_name(i) == server_name:
                return i
        raise KeyError(f"no node named {server_name!r} in this cluster")

    @property
    def pids(self) -> list[int | None]:
        return [node.pid for node in self.nodes]

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Self:
        """Start every node (the others' routes find each one as it comes up); return once
        every node answers JetStream requests, i.e. the cluster has a meta leader."""
        deadline = time.monotonic() + timeout
        with self._lock:
            self._stopped = False
        try:
            with concurrent.futures.ThreadPoolExecutor(self.size) as pool:
                for future in [pool.submit(node.start) for node in self.nodes]:
                    future.result()
            self._wait_jetstream(range(self.size), deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every node at once (each flushes its store), wait, SIGKILL what is left."""
        with self._lock, concurrent.futures.ThreadPoolExecutor(self.size) as pool:
            self._stopped = True
            for future in [pool.submit(node.stop) for node in self.nodes]:
                future.result()

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i`` (no flush, no goodbye to its routes); its store stays."""
        node = self.nodes[i]
        if node.pid is not None and node.running:
            os.kill(node.pid, signal.SIGKILL)
        node.stop()  # reaps it and closes its log

    def restart_node(self, i: int, timeout: float = 60.0) -> None:
        """Start node ``i`` again on the same ports with the same store; return once it answers
        JetStream requests (its streams catch up from the others in the background)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._stopped:
                raise ServerError(f"NATS node {self.server_name(i)} not restarted: cluster stopped")
            self.nodes[i].start()
        self._wait_jetstream([i], deadline)

    def _wait_jetstream(self, indexes: Sequence[int] | range, deadline: float) -> None:
        for i in indexes:
            node = self.nodes[i]
            url = node.admin_url
            while not _run(_jetstream_answers(url)):
                if not node.running:
                    raise ServerError(
                        f"NATS node {self.server_name(i)} exited; see {node.log_file}"
                    )
                if time.monotonic() >= deadline:
                    raise ServerError(
                        f"NATS node {self.server_name(i)} ({node.url}) did not answer JetStream "
                        f"requests in time (no meta leader?); see {node.log_file}"
                    )
                time.sleep(0.2)

    def _cluster_config(self, i: int) -> str:
        """Node ``i``'s name and cluster block (none for a one-node "cluster")."""
        lines = [f"server_name: {self.server_name(i)}"]
        if self.size == 1:
            return "\n".join(lines) + "\n"
        routes = [
            f'    "nats-route://{ROUTE_USER}:{self._route_password}@{self.host}:{port}"'
            for j, port in enumerate(self.cluster_ports)
            if j != i
        ]
        lines += [
            "cluster {",
            f"  name: {self.name}",
            f"  listen: {json.dumps(f'{self.host}:{self.cluster_ports[i]}')}",
            f'  authorization {{ user: {ROUTE_USER}, password: "{self._route_password}" }}',
            "  routes: [",
            *routes,
            "  ]",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"NatsCluster(size={self.size}, url={self.url!r}, pids={self.pids})"


async def _jetstream_answers(url: str) -> bool:
    """Whether the server at ``url`` answers ``$JS.API.INFO`` without an error (a clustered
    node answers "temporarily unavailable", or not at all, until there is a meta leader)."""
    try:
        nc = await nats.connect(
            servers=[url], connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=0
        )
    except Exception:
        return False
    try:
        reply = await nc.request(JS_INFO, b"", timeout=2)
        return "error" not in json.loads(reply.data)
    except Exception:
        return False
    finally:
        await nc.close()


def _run(coro: Coroutine[Any, Any, bool]) -> bool:
    """Run a coroutine from sync code, even from a thread whose event loop is running."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
