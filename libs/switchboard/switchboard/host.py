"""Running services in this process. One process may host one service (``python -m
switchboard_agent``, a container, ``switchboard up --processes``) or all of them (``switchboard
up`` on a laptop, ``switchboard serve gateway router agent tools``), in the manner of Loki's
single binary: each hosted service has its own runtime, settings, connections and tracer, and
the services still talk to each other over NATS and gRPC exactly as when apart.

What is process-wide is set up here, once: logging, the tracer provider, signal handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import IO, Any

from pydantic import ValidationError

from . import gcdefer, loops, registry, reloads
from .errors import SwitchboardError
from .logs import setup_logging
from .settings import CommonSettings, Settings, describe
from .telemetry import install_tracing

log = logging.getLogger(__name__)
Serve = Callable[[Any, asyncio.Event], Awaitable[None]]


@dataclass
class Backoff:
    """Restart delays: ``initial`` doubling up to ``maximum``; back to ``initial`` once a
    service stayed up ``reset_after`` seconds."""

    initial: float = 0.5
    maximum: float = 30.0
    reset_after: float = 30.0
    _next: float = field(default=0.0, init=False, repr=False)

    def delay_after(self, uptime: float) -> float:
        """The delay before restarting a service that stopped after ``uptime`` seconds."""
        if uptime >= self.reset_after or not self._next:
            self._next = self.initial
        delay = self._next
        self._next = min(delay * 2, self.maximum)
        return delay


def _resolve(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def settings_class(service: registry.Service) -> type[Settings]:
    """The service's settings class (its module only: not the service's code)."""
    cls: type[Settings] = _resolve(service.settings_class)
    return cls


def preload(services: Sequence[registry.Service]) -> list[str]:
    """Import the services' code ahead of starting them (in a thread, while NATS and
    PostgreSQL start: most of a one-process start-up is these imports). The names of those
    whose import failed: :func:`load` imports them again when the host starts the service,
    which reports the error and restarts it as for any service that fails."""
    return Preload(services).run()


class Preload:
    """:func:`preload` in stages a launcher can start services between: every settings
    class first (the launcher plans the instances with them), then each service's code in
    order, each one's end a future. A service hosted meanwhile waits for its own import
    (:func:`run_service`) and starts while the next ones import: its start-up is mostly
    waiting on NATS, PostgreSQL and the sandbox probe, which then overlaps the imports
    instead of following them (one interpreter: the imports cannot overlap each other)."""

    def __init__(self, services: Sequence[registry.Service]) -> None:
        self.services = list(services)
        self.settings_loaded: Future[None] = Future()
        self.loaded: dict[str, Future[None]] = {s.name: Future() for s in self.services}

    def run(self) -> list[str]:
        """Import everything (call it in a thread); the names of the services that failed.
        The collector runs less often meanwhile (:mod:`switchboard.gcdefer`)."""
        with gcdefer.deferred():
            return self._run()

    def _run(self) -> list[str]:
        failed: list[str] = []
        for service in self.services:
            _LOADING[service.name] = self.loaded[service.name]
        try:
            for service in self.services:
                try:
                    settings_class(service)
                except Exception:  # reported by the host when it loads the service again
                    failed.append(service.name)
            self.settings_loaded.set_result(None)
            for service in self.services:
                try:
                    if service.name not in failed:
                        load(service)
                except Exception:  # as above
                    failed.append(service.name)
                finally:
                    self.loaded[service.name].set_result(None)
        finally:  # whatever happened, nobody waits for an import that will not come
            for future in (self.settings_loaded, *self.loaded.values()):
                if not future.done():
                    future.set_result(None)
            for service in self.services:
                if _LOADING.get(service.name) is self.loaded[service.name]:
                    del _LOADING[service.name]
        return failed


# A service whose code a Preload is importing (in another thread) -> the end of that import.
_LOADING: dict[str, Future[None]] = {}


async def wait_preloaded(service: registry.Service) -> None:
    """Return once no :class:`Preload` is importing ``service``'s code: importing it in the
    event loop meanwhile would block every service of this process until done."""
    pending = _LOADING.get(service.name)
    if pending is not None:
        await asyncio.wrap_future(pending)


# How many service runtimes of this process serve: a launcher hosting them asks the gateway's
# /readyz only once all do, since it cannot be ready before and each of its answers costs the
# start-up a check of every service (docs/startup.md).
_serving_here = 0


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """Count a runtime as serving while in this block (ServiceRuntime.wait_stopped)."""
    global _serving_here
    _serving_here += 1
    try:
        yield
    finally:
        _serving_here -= 1


def serving_here() -> int:
    """How many service runtimes of this process have started and are not stopping."""
    return _serving_here


def load(service: registry.Service) -> tuple[type[Settings], Serve]:
    """The service's settings class and its ``serve(settings, stop)`` coroutine function."""
    return settings_class(service), _resolve(service.server)


@dataclass
class Hosted:
    """One service hosted in this process and the environment its settings are read from."""

    service: registry.Service
    environ: Mapping[str, str]
    starts: int = 0


class HostError(SwitchboardError):
    """A hosted service cannot run; the message says why."""


async def run_service(hosted: Hosted, stop: asyncio.Event) -> None:
    """Read the service's settings and serve until ``stop`` is set."""
    await wait_preloaded(hosted.service)
    with gcdefer.deferred():  # the import, unless preloaded (a service process's)
        settings_class, serve = load(hosted.service)
    try:
        settings = settings_class.from_environ(hosted.environ)
    except ValidationError as exc:
        raise HostError(f"{hosted.service.name}: invalid settings: {describe(exc)}") from exc
    hosted.starts += 1
    reloads.ENVIRON.set(hosted.environ)  # this task's: where a reload starts from
    await serve(settings, stop)


class Host:
    """Runs services in this event loop until :meth:`stop`. With ``restart``, a service that
    fails is started again after a backoff (as the process supervisor does with processes);
    without, the first failure ends :meth:`run` with that error."""

    def __init__(
        self,
        hosted: Sequence[Hosted],
        *,
        restart: bool = True,
        backoff: Backoff | None = None,
        err: IO[str] | None = None,
    ) -> None:
        self.hosted = list(hosted)
        self.restart_failed = restart
        self.backoff = backoff or Backoff()
        self.err = err or sys.stderr
        self.stopping = asyncio.Event()
        self._stops: dict[int, asyncio.Event] = {}  # id(hosted) -> the stop of its current run

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for hosted in self.hosted:
                group.create_task(self._keep(hosted), name=f"host-{hosted.service.name}")

    def stop(self) -> None:
        """Stop every service (:meth:`run` returns once all have)."""
        self.stopping.set()
        for stop in self._stops.values():
            stop.set()

    def restart(self, hosted: Hosted) -> None:
        """Stop one service and start it again at once (e.g. with a new environment)."""
        if (stop := self._stops.get(id(hosted))) is not None:
            stop.set()

    async def _keep(self, hosted: Hosted) -> None:
        backoff = replace(self.backoff)
        loop = asyncio.get_running_loop()
        name = hosted.service.name
        while not self.stopping.is_set():
            stop = self._stops[id(hosted)] = asyncio.Event()
            started = loop.time()
            try:
                await run_service(hosted, stop)
                if self.stopping.is_set():
                    return
                if stop.is_set():
                    continue  # restart() asked for it
                problem = "returned before it was told to stop"
            except Exception as exc:
                if self.stopping.is_set():  # e.g. stopped while it waited for a dependency
                    log.info("%s stopped before it had started (%s)", name, exc)
                    return
                if not self.restart_failed:
                    raise
                problem = f"failed: {exc}"
                log.exception("%s failed", name)
            delay = backoff.delay_after(loop.time() - started)
            print(f"switchboard: {name} {problem}; restarting in {delay:g}s", file=self.err)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)


def setup_process(name: str, settings: CommonSettings, stream: IO[str] | None = None) -> None:
    """What is process-wide: logging (JSON lines to ``stream``) and the tracer provider. Also,
    before gRPC loads: no gRPC fork handlers. The tool executor forks sandboxed commands that
    exec at once and never use gRPC, and with the handlers gRPC prints a warning to stderr at
    every fork while other threads use it."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    setup_logging(name, settings.log_level, settings.log_json, stream)
    install_tracing()


def install_signal_handlers(stop: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)


def dump_tasks() -> None:
    """SIGUSR1: log where every asyncio task of this process is waiting (for stuck-run triage)."""
    for task in asyncio.all_tasks():
        frames = task.get_stack(limit=12)
        where = " <- ".join(f"{f.f_code.co_name}:{f.f_lineno}" for f in reversed(frames))
        log.warning("task %s at %s", task.get_name(), where)


async def serve_services(names: Sequence[str], environ: Mapping[str, str]) -> None:
    """Host the named services until SIGINT/SIGTERM; a failure ends the process. With
    ``SB_CONFIG_FILE``, the file is watched (SIGHUP: checked at once) and what may change
    without a restart is applied to them (:mod:`switchboard.configfile.reload`)."""
    host = Host([Hosted(registry.get(name), environ) for name in names], restart=False)
    install_signal_handlers(host.stop)
    settings = CommonSettings.from_environ(environ)
    if settings.config_file is None:
        await host.run()
        return
    from .configfile.reload import Watcher

    watcher = Watcher(
        settings.config_file, environ, settings.config_from_file, reloads.apply, names
    )
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, watcher.trigger)
    watching = asyncio.create_task(watcher.run(), name="config-file")
    try:
        await host.run()
    finally:
        watching.cancel()


def main(names: Sequence[str], environ: Mapping[str, str]) -> int:
    """Entry point of a service process (``python -m switchboard_<name>``); the exit code."""
    try:
        services = [registry.get(name) for name in names]
        settings = CommonSettings.from_environ(environ)
    except KeyError as exc:
        print(f"switchboard: {exc.args[0]}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        print(f"switchboard: invalid settings: {describe(exc)}", file=sys.stderr)
        return 2
    setup_process("+".join(s.name for s in services), settings)
    failures: list[BaseException] = []
    try:
        loops.run(serve_services(names, environ), settings.event_loop)
    except* SwitchboardError as group:  # a configuration problem: said in one line
        failures.extend(group.exceptions)
    for failure in failures:
        print(f"switchboard: {failure}", file=sys.stderr)
    return 1 if failures else 0


def module_main(service: str) -> None:
    """``python -m switchboard_<service>``."""
    sys.exit(main([service], os.environ))
