"""What makes a one-process ``switchboard up`` ready sooner (docs/startup.md): a service starts
as soon as its own code is imported, while the next ones import (host.Preload), in the order the
launcher chooses, with fewer garbage collections; and the launcher's readiness poll is a plain
HTTP request."""

from __future__ import annotations

import asyncio
import gc
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from switchboard import gcdefer, host, natsauth, registry, runtime
from switchboard.cli.startup import IMPORT_FIRST, import_order, readyz_ok
from switchboard.cli.supervisor import ServiceSpec
from switchboard.embedded import free_port
from switchboard.settings import CommonSettings

from .conftest import eventually

CONFIG = """
class {Name}Settings:
    @classmethod
    def from_environ(cls, environ):
        return cls()
"""
# serve() notes that it runs; the slow service's import waits for the test's gate first.
SERVER = """
import asyncio
import threading

STARTED = threading.Event()
{wait}

async def serve(settings, stop: asyncio.Event) -> None:
    STARTED.set()
    await stop.wait()
"""


@pytest.fixture
def fake_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Two importable services, ``quick`` and ``slowpoke``; the latter's code imports only
    once the returned module's ``OPEN`` event is set."""
    for name, wait in (("quick", ""), ("slowpoke", "gate.OPEN.wait(60)")):
        package = tmp_path / f"switchboard_{name}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "config.py").write_text(CONFIG.format(Name=name.capitalize()))
        imports = "from switchboard_gate import gate\n" if wait else ""
        (package / "server.py").write_text(imports + textwrap.dedent(SERVER.format(wait=wait)))
    (tmp_path / "switchboard_gate").mkdir()
    (tmp_path / "switchboard_gate" / "__init__.py").write_text("")
    (tmp_path / "switchboard_gate" / "gate.py").write_text(
        "import threading\nOPEN = threading.Event()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from switchboard_gate import gate  # type: ignore[import-not-found]

    yield gate
    gate.OPEN.set()  # a failed test must not leave the import thread waiting
    for module in [m for m in sys.modules if m.split(".")[0] in _FAKE_PACKAGES]:
        del sys.modules[module]


_FAKE_PACKAGES = {"switchboard_quick", "switchboard_slowpoke", "switchboard_gate"}


def _started(name: str) -> bool:
    """Whether the fake service ``name``'s serve() has run (its module may still import)."""
    started = getattr(sys.modules.get(f"switchboard_{name}.server"), "STARTED", None)
    return started is not None and started.is_set()


def _service(name: str) -> registry.Service:
    return registry.Service(name, f"a test service ({name})", ())


async def test_a_service_starts_while_the_next_one_still_imports(fake_services: ModuleType) -> None:
    quick, slow = _service("quick"), _service("slowpoke")
    loading = host.Preload([quick, slow])
    importing = asyncio.ensure_future(asyncio.to_thread(loading.run))
    stop = asyncio.Event()
    running = [
        asyncio.create_task(host.run_service(host.Hosted(s, {}), stop)) for s in (quick, slow)
    ]
    try:
        await asyncio.wait_for(asyncio.wrap_future(loading.settings_loaded), 30)
        # quick serves while slowpoke's import is held: it did not wait for every import, and
        # the event loop this test runs on was never blocked by slowpoke's import.
        assert await eventually(lambda: _started("quick"))
        assert not fake_services.OPEN.is_set() and not running[1].done()
        assert "switchboard_slowpoke.server" not in sys.modules or not hasattr(
            sys.modules["switchboard_slowpoke.server"], "serve"
        )
        fake_services.OPEN.set()
        assert await eventually(lambda: _started("slowpoke"))
        assert await asyncio.wait_for(importing, 30) == []
    finally:
        fake_services.OPEN.set()
        stop.set()
        await asyncio.gather(*running, return_exceptions=True)
        await asyncio.gather(importing, return_exceptions=True)


async def test_a_service_whose_import_fails_is_reported_by_the_host_as_before(
    fake_services: ModuleType,
) -> None:
    fake_services.OPEN.set()
    missing = _service("nope")  # no package: its settings class does not import
    loading = host.Preload([missing, _service("quick")])
    assert await asyncio.to_thread(loading.run) == ["nope"]
    assert loading.settings_loaded.done() and all(f.done() for f in loading.loaded.values())
    with pytest.raises(ModuleNotFoundError, match="switchboard_nope"):
        await host.run_service(host.Hosted(missing, {}), asyncio.Event())


def test_the_imports_run_with_fewer_collections_then_the_thresholds_come_back(
    fake_services: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_services.OPEN.set()
    seen: list[int] = []
    real_load = host.load

    def load(service: registry.Service) -> tuple[type, host.Serve]:
        seen.append(gc.get_threshold()[0])  # while the service's code imports
        return real_load(service)

    monkeypatch.setattr(host, "load", load)
    before = gc.get_threshold()
    assert before[0] < gcdefer.YOUNG_THRESHOLD
    assert host.Preload([_service("quick"), _service("slowpoke")]).run() == []
    assert seen == [gcdefer.YOUNG_THRESHOLD] * 2
    assert gc.get_threshold() == before


def test_deferred_blocks_may_overlap_and_the_last_out_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    first, second = gcdefer.deferred(), gcdefer.deferred()
    first.__enter__()
    second.__enter__()  # e.g. the launcher's import thread while its main thread imports
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == gcdefer.YOUNG_THRESHOLD  # the other block still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), gcdefer.deferred():
        raise RuntimeError("an import failed")
    assert gc.get_threshold() == before


def test_the_streams_owner_imports_first_then_the_slow_starters_then_registry_order() -> None:
    order = [s.name for s in import_order([ServiceSpec(s) for s in registry.SERVICES])]
    assert order[0] == natsauth.STREAM_OWNER
    assert order[: len(IMPORT_FIRST)] == list(IMPORT_FIRST)
    rest = [s.name for s in registry.SERVICES if s.name not in IMPORT_FIRST]
    assert order[len(IMPORT_FIRST) :] == rest
    only = [ServiceSpec(registry.get("gateway")), ServiceSpec(registry.get("agent"))]
    assert [s.name for s in import_order(only)] == ["agent", "gateway"]


async def _http_server(status: bytes, answer: bool = True) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        assert request.startswith(b"GET /readyz HTTP/1.1\r\n")
        if answer:
            writer.write(b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
        else:
            await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_readyz_ok_only_on_a_200() -> None:
    for status, expected in ((b"200 OK", True), (b"503 Service Unavailable", False)):
        server, port = await _http_server(status)
        async with server:
            assert await readyz_ok(port) is expected
    assert await readyz_ok(free_port()) is False  # nothing listens yet
    server, port = await _http_server(b"", answer=False)
    async with server:
        assert await readyz_ok(port, timeout=0.2) is False  # no answer: not ready, no hang


async def test_serving_here_counts_the_runtimes_in_wait_stopped() -> None:
    before = host.serving_here()
    stops = [asyncio.Event(), asyncio.Event()]
    settings = CommonSettings.from_environ({})
    runtimes = [runtime.ServiceRuntime(registry.get("router"), settings, s) for s in stops]
    waiting = [asyncio.create_task(rt.wait_stopped()) for rt in runtimes]
    assert await eventually(lambda: host.serving_here() == before + 2)
    stops[0].set()
    await waiting[0]
    assert host.serving_here() == before + 1
    waiting[1].cancel()  # cancelled (a service torn down) counts down as well
    await asyncio.gather(waiting[1], return_exceptions=True)
    assert host.serving_here() == before


def test_unix_socket_of_a_postgresql_uri() -> None:
    uri = "postgresql://postgres:@/postgres?host=/tmp/pg"
    assert runtime.unix_socket(uri) == Path("/tmp/pg/.s.PGSQL.5432")
    assert runtime.unix_socket(uri + "&port=5433") == Path("/tmp/pg/.s.PGSQL.5433")
    assert runtime.unix_socket("postgresql://u:p@127.0.0.1:5432/db") is None  # TCP
    assert runtime.unix_socket(uri + "&port=nope") is None  # left to asyncpg to refuse


async def test_socket_appears_waits_for_the_servers_socket_file(tmp_path: Path) -> None:
    socket = tmp_path / ".s.PGSQL.5432"

    async def listen_later() -> None:
        await asyncio.sleep(0.2)
        socket.touch()

    later = asyncio.create_task(listen_later())
    await asyncio.wait_for(runtime.socket_appears(socket), 30)
    assert socket.exists()  # it returned because the file is there, not before
    await later
    # No such directory: nothing will appear there, the connection attempt says why.
    await asyncio.wait_for(runtime.socket_appears(tmp_path / "nope" / ".s.PGSQL.5432"), 30)
