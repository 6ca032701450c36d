"""The embedded-mode launcher behind ``switchboard up``: the whole system on this machine.

Starts nats-server (JetStream) and PostgreSQL concurrently, and every service of the registry
once NATS accepts clients (those that need the database retry: its URI is known before
PostgreSQL is up); keeps them running, waits for the gateway's /readyz, and on Ctrl-C/SIGTERM
stops the services, then NATS and PostgreSQL. The services run in this process (one runtime
each), or with ``processes`` one process per service instance, as in Compose and Kubernetes.

NATS is one nats-server (``run/nats.pid``), or with ``nats_cluster`` N (``--nats-cluster``,
``SB_NATS_CLUSTER``) a cluster of N nodes on loopback (:mod:`switchboard.natscluster`,
``run/nats-1.pid`` ..): the services get every node's URL and their streams at
``SB_NATS_REPLICAS`` = min(N, 3) replicas unless it is set, and a node that dies is started
again on its ports with its store (the others carry the streams meanwhile).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TextIO

from switchboard import loops, registry
from switchboard.cli.home import (
    Home,
    HomeError,
    Token,
    claim,
    gateway_token,
    nats_credentials,
    reap_stale,
    remove_pid,
    service_token,
    write_pid,
)
from switchboard.cli.inprocess import InProcess
from switchboard.cli.reloading import Reloading
from switchboard.cli.settings import DEFAULT_HTTP_PORT, EMBEDDED_DEFAULTS, LauncherSettings
from switchboard.cli.startup import (
    COUNTER_POLL_S,
    READY_POLL_S,
    READY_POLL_SERVING_S,
    import_order,
    readyz_ok,
)
from switchboard.cli.supervisor import Instance, ServiceSpec, Supervisor, plan_instances
from switchboard.embedded import NatsServer, Postgres, ServerError, port_is_free
from switchboard.host import Backoff, Preload, dump_tasks, serving_here, settings_class
from switchboard.natscluster import NatsCluster
from switchboard.settings import scoped_environ

SERVICES_LOG = "services.log"  # the log of the services hosted in the launcher's process


class LaunchError(RuntimeError):
    """The system cannot be started as asked; the message says what to do."""


def default_services(scale: Mapping[str, int] | None = None) -> list[ServiceSpec]:
    scale = scale or {}
    return [ServiceSpec(s, scale.get(s.name, 1)) for s in registry.SERVICES]


class Launcher:
    """Runs NATS, PostgreSQL and the services until told to stop.

    Configuration comes from the arguments and from ``environ`` (default ``os.environ``, read
    through :class:`LauncherSettings`), which is also the base environment of every service.
    ``processes``: one process per service instance (implied when a service is scaled).
    """

    def __init__(
        self,
        home: Home | Path,
        *,
        services: Sequence[ServiceSpec] | None = None,
        http_port: int = DEFAULT_HTTP_PORT,
        environ: Mapping[str, str] | None = None,
        processes: bool = False,
        nats_cluster: int | None = None,
        backoff: Backoff | None = None,
        stop_timeout: float = 5.0,
        ready_timeout: float = 60.0,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ) -> None:
        self.home = home if isinstance(home, Home) else Home(Path(home).resolve())
        self.services = list(default_services() if services is None else services)
        self.http_port = http_port
        self.environ = dict(os.environ if environ is None else environ)
        self.settings = LauncherSettings.from_environ(self.environ)
        self.processes = processes or any(s.scale != 1 for s in self.services)
        self.nats_nodes = nats_cluster or self.settings.nats_cluster
        self.backoff = backoff or Backoff()
        self.stop_timeout = stop_timeout
        self.ready_timeout = ready_timeout
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.nats: NatsServer | None = None  # one server (the default)
        self.nats_cluster: NatsCluster | None = None  # or a cluster's nodes
        self.postgres: Postgres | None = None
        self.supervisor: Supervisor | InProcess | None = None
        self.database_url = ""
        self.ready = asyncio.Event()  # set once /readyz answered 200
        self._claimed = False  # run/launcher.pid is ours
        self._nats_start: asyncio.Future[object] | None = None
        self._pg_start: asyncio.Future[str] | None = None
        self._preloading: asyncio.Future[list[str]] | None = None
        self._services_log: IO[str] | None = None
        self.reloading = Reloading(self.environ)  # SIGHUP and SB_CONFIG_FILE's changes

    def say(self, message: str) -> None:
        print(f"switchboard: {message}", file=self.err, flush=True)

    def run(self) -> int:
        """Serve until SIGINT/SIGTERM (SIGHUP: check the configuration file); the exit code."""
        return loops.run(self._serve_with_signals(), self.settings.event_loop)

    async def _serve_with_signals(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: see Reloading.start
        for sig in signals:
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
        try:
            return await self.serve(stop)
        finally:
            for sig in (*signals, signal.SIGUSR1):
                loop.remove_signal_handler(sig)

    async def serve(self, stop: asyncio.Event) -> int:
        """Start everything, run until ``stop`` is set, stop everything; the exit code."""
        started = time.monotonic()
        try:
            return await self._serve(stop, started)
        except (LaunchError, HomeError, ServerError) as exc:
            self.say(str(exc))
            return 1
        finally:
            await self._shutdown()

    async def _serve(self, stop: asyncio.Event, started: float) -> int:
        home = self.home
        home.create()
        claim(home)
        self._claimed = True
        leftovers = reap_stale(home)
        if leftovers:
            self.say(f"stopped {len(leftovers)} process(es) left over by an earlier run")
        if not port_is_free(self.http_port):
            raise LaunchError(
                f"HTTP port {self.http_port} is busy (another program listens on "
                f"127.0.0.1:{self.http_port}); choose another one with --http-port N "
                "or SB_HTTP_PORT"
            )
        token = gateway_token(home, self.settings.gateway_token)
        self._announce(token)

        nats = self._nats_server()
        self._nats_start = asyncio.ensure_future(asyncio.to_thread(nats.start))
        if self.settings.database_url is not None:
            self.database_url = self.settings.database_url.get_secret_value()
        else:
            self.postgres = Postgres(home.pg_dir)
            self.database_url = await asyncio.to_thread(self.postgres.expected_uri)
            self._pg_start = asyncio.ensure_future(asyncio.to_thread(self.postgres.start))
        # One process: the services' code is imported meanwhile (a thread), and each service
        # starts once its own code is (host.Preload); one that failed is imported again, and
        # reported, by the host.
        loading = None if self.processes else Preload(import_order(self.services))
        if loading is not None:
            self._preloading = asyncio.ensure_future(asyncio.to_thread(loading.run))
        await self._nats_start
        self._write_nats_pids()
        if loading is not None:
            await asyncio.wrap_future(loading.settings_loaded)  # _plan reads them

        instances = self._plan(token.value, service_token(home, self.settings.service_token))
        if self.processes:
            self.supervisor = Supervisor(instances, stop_timeout=self.stop_timeout, err=self.err)
        else:
            self._services_log = (home.logs_dir / SERVICES_LOG).open("a", buffering=1)
            self.supervisor = InProcess(
                instances,
                self._services_log,
                backoff=self.backoff,
                stop_timeout=self.stop_timeout,
                err=self.err,
            )
        await self.supervisor.start()
        self.reloading.start(self.supervisor)
        return await self._until_stopped(stop, started, token.source)

    def _nats_server(self) -> NatsServer | NatsCluster:
        """One nats-server (the default), or a cluster of ``nats_nodes`` nodes: node i's
        client port is SB_NATS_PORT + i when that is set."""
        port, credentials = self.settings.nats_port, nats_credentials(self.home)
        if self.nats_nodes == 1:
            log = self.home.logs_dir / "nats.log"
            self.nats = NatsServer(self.home.nats_dir, port, log_file=log, credentials=credentials)
            return self.nats
        ports = [port + i for i in range(self.nats_nodes)] if port else None
        if ports and ports[-1] > 65535:
            raise LaunchError(f"SB_NATS_PORT={port}: no room for {self.nats_nodes} NATS ports")
        self.nats_cluster = NatsCluster(
            self.home.nats_dir,
            self.nats_nodes,
            credentials=credentials,
            log_dir=self.home.logs_dir,
            ports=ports,
        )
        return self.nats_cluster

    def _nats_pid_names(self) -> list[str]:
        """run/nats.pid for one server; run/nats-1.pid .. for a cluster's nodes."""
        if self.nats_nodes == 1:
            return ["nats"]
        return [f"nats-{i + 1}" for i in range(self.nats_nodes)]

    def _write_nats_pids(self) -> None:
        nodes = self.nats_cluster.nodes if self.nats_cluster is not None else [self.nats]
        for name, node in zip(self._nats_pid_names(), nodes, strict=True):
            if node is not None and node.pid is not None:
                write_pid(self.home.pid_file(name), node.pid)

    async def _watch_nats(self) -> None:
        """Start a cluster's node again when it died (SIGKILL, crash); the others carry the
        streams meanwhile and it catches up once back. One server is not watched: without it
        nothing works, and the services' health says so."""
        cluster = self.nats_cluster
        if cluster is None:
            return
        while True:
            await asyncio.sleep(0.5)
            for i, node in enumerate(cluster.nodes):
                if node.running:
                    continue
                name = cluster.server_name(i)
                self.say(f"NATS node {name} exited; starting it again")
                try:
                    await asyncio.to_thread(cluster.restart_node, i)
                except ServerError as exc:
                    self.say(f"NATS node {name} did not come back ({exc}); retrying")
                    await asyncio.sleep(self.backoff.initial)
                    continue
                self._write_nats_pids()

    def _announce(self, token: Token) -> None:
        """Where the gateway token is, on every start (its value only when it is new)."""
        if token.generated:
            message = f"Gateway token (stored in {token.source}): {token.value}"
        elif token.source == "SB_GATEWAY_TOKEN":
            message = "Gateway token: the value of SB_GATEWAY_TOKEN"
        else:
            message = f"Gateway token: stored in {token.source}"
        print(message, file=self.out, flush=True)

    def _plan(self, token: str, internal_token: str) -> list[Instance]:
        nats = self.nats_cluster or self.nats
        assert nats is not None
        common = {
            **self.environ,
            "SB_DATABASE_URL": self.database_url,
            "SB_SERVICE_TOKEN": internal_token,
            "SB_HOME": str(self.home.root),
            "SB_GATEWAY_TOKEN": token,
            "SB_HTTP_PORT": str(self.http_port),
            "SB_WORKSPACES_DIR": str(self.home.workspaces_dir),
        }
        common.setdefault("PYTHONUNBUFFERED", "1")  # service logs appear as they are written
        for name, value in EMBEDDED_DEFAULTS.items():
            common.setdefault(name, value)
        if self.nats_nodes > 1:  # as a production cluster would, unless told otherwise
            common.setdefault("SB_NATS_REPLICAS", str(min(self.nats_nodes, 3)))
        # On a laptop nothing listens beyond loopback unless the user asks for it.
        for service in registry.SERVICES:
            for port in service.ports:
                common.setdefault(port.host_setting, "127.0.0.1")
        instances = plan_instances(
            self.services,
            common,
            self.home,
            self.backoff,
            reserved_ports={self.http_port, *self._nats_ports()},
        )
        for inst in instances:  # each sees only its own secrets, and is its own NATS user
            inst.env = scoped_environ(settings_class(inst.service), inst.env)
            inst.env.update(nats.service_env(inst.service.name))
        return instances

    def _nats_ports(self) -> list[int]:
        """Every port NATS listens on (clients', and a cluster's routes)."""
        if self.nats_cluster is not None:
            return [*self.nats_cluster.ports, *self.nats_cluster.cluster_ports]
        return [self.nats.port] if self.nats is not None else []

    async def _until_stopped(self, stop: asyncio.Event, started: float, token_source: str) -> int:
        stopped = asyncio.create_task(stop.wait())
        ready = asyncio.create_task(self._wait_ready())
        watch = asyncio.create_task(self._watch_nats())
        waiting: set[asyncio.Future[Any]] = {stopped, ready, watch}
        if self._pg_start is not None:
            waiting.add(self._pg_start)
        try:
            while True:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if stopped in done:
                    self.say("stopping")
                    return 0
                if self._pg_start in done:
                    waiting.discard(self._pg_start)
                    self._postgres_started()
                if ready in done:
                    waiting.discard(ready)
                    if not ready.result():
                        raise LaunchError(
                            f"not ready after {self.ready_timeout:g}s: "
                            f"http://127.0.0.1:{self.http_port}/readyz never answered 200; "
                            f"see the service logs in {self.home.logs_dir}"
                        )
                    base = f"http://127.0.0.1:{self.http_port}"
                    print(
                        f"Switchboard ready: {base}/ (OpenAI API at {base}/v1, token in "
                        f"{token_source}) in {time.monotonic() - started:.1f}s",
                        file=self.out,
                        flush=True,
                    )
                if watch in done:
                    waiting.discard(watch)
                    watch.result()  # nothing to watch; an error propagates
        finally:
            for task in (stopped, ready, watch):
                task.cancel()

    def _postgres_started(self) -> None:
        """PostgreSQL is up (or failed: ServerError propagates and stops the launch)."""
        assert self._pg_start is not None and self.postgres is not None
        uri = self._pg_start.result()
        self.home.create()  # pgserver opened up SB_HOME for its own user: close it again
        if self.postgres.pid is not None:
            write_pid(self.home.pid_file("postgres"), self.postgres.pid)
        if uri != self.database_url and self.supervisor is not None:
            self.say(f"PostgreSQL listens at {uri}, not {self.database_url}; restarting services")
            self.database_url = uri
            for inst in self.supervisor.instances:
                if "SB_DATABASE_URL" in inst.env:
                    inst.env["SB_DATABASE_URL"] = uri
                    self.supervisor.restart(inst)

    async def _wait_ready(self) -> bool:
        """Poll the gateway's /readyz until it answers 200; with the services in this process,
        only once all of them serve (:func:`serving_here`): it cannot answer 200 before,
        and each answer costs them a check of every service (:mod:`.startup`)."""
        deadline = time.monotonic() + self.ready_timeout
        hosted = self.supervisor if isinstance(self.supervisor, InProcess) else None
        while time.monotonic() < deadline:
            if hosted is not None and serving_here() < len(hosted.instances):
                await asyncio.sleep(COUNTER_POLL_S)  # a look at a counter: no I/O
                continue
            if await readyz_ok(self.http_port):
                self.ready.set()
                return True
            await asyncio.sleep(READY_POLL_S if hosted is None else READY_POLL_SERVING_S)
        return False

    async def _shutdown(self) -> None:
        """Services first (they may still talk to NATS while draining), then NATS and
        PostgreSQL; every step runs even if an earlier one failed: nothing is left running."""
        self.reloading.stop()
        if self.supervisor is not None:
            try:
                await self.supervisor.stop()
            except Exception as exc:
                self.say(f"error while stopping services: {exc!r}")
        for starting in (self._nats_start, self._pg_start):
            if starting is not None:  # a start in progress must finish before it can be undone
                with contextlib.suppress(Exception):
                    await starting
        servers = (self.nats, self.nats_cluster, self.postgres)
        steps = [s.stop for s in servers if s is not None]
        results = await asyncio.gather(
            *(asyncio.to_thread(s) for s in steps), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                self.say(f"error while stopping servers: {result!r}")
        nats = self.nats_cluster or self.nats
        owned = {"postgres": self.postgres is not None, "launcher": self._claimed}
        owned.update((name, nats is not None) for name in self._nats_pid_names())
        for name, ours in owned.items():
            if ours:  # never remove the files of another launcher that refused us
                remove_pid(self.home.pid_file(name))
        if self._services_log is not None:
            self._services_log.close()
