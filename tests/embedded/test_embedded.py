"""Embedded mode: the real servers (NATS, PostgreSQL) and the launcher running the real
services, in one process or one process each: wiring, supervision, restarts and clean stops."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
import psutil
import pytest
from nats.js.api import StorageType
from pydantic import SecretStr

from switchboard import registry
from switchboard.cli.home import Home, HomeError, claim, gateway_token, reap_stale, write_pid
from switchboard.cli.launcher import Launcher, default_services
from switchboard.cli.main import main
from switchboard.cli.up import parse_scale
from switchboard.embedded import (
    NatsServer,
    Postgres,
    ServerError,
    create_database,
    drop_database,
    free_port,
    port_is_free,
)
from switchboard.host import Backoff

PY = sys.executable
DROPPED = ("SB_", "OPENAI_", "ANTHROPIC_", "OTEL_")


def gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` runs; those still running. A zombie has exited (it only waits
    for pid 1 to reap it, which on a loaded machine here can take longer than the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if _runs(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def _runs(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def until(predicate, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return result


def process_env(pid: int) -> dict[str, str]:
    """The environment a real process was started with, as the kernel records it."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def clean_environ(**extra: str) -> dict[str, str]:
    """This environment without Switchboard, model and OpenTelemetry settings, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}, **extra}


async def ready(url: str) -> bool:
    async with httpx.AsyncClient(timeout=2) as client:
        try:
            return (await client.get(f"{url}/readyz")).status_code == 200
        except httpx.HTTPError:
            return False


async def until_async(check, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir outside pytest's tree (pgserver opens up parents; socket paths stay short)."""
    path = Path(tempfile.mkdtemp(prefix="sb-emb-"))
    path.chmod(0o755)  # the sandbox's unprivileged uid reaches the workspaces below it
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# NATS


async def test_nats_server_jetstream_restart_keeps_port_and_data(nats_server: NatsServer) -> None:
    url, port, first_pid = nats_server.admin_url, nats_server.port, nats_server.pid
    assert nats_server.url == f"nats://127.0.0.1:{port}" and first_pid is not None
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="EMBEDDED", subjects=["embedded.>"], storage=StorageType.FILE)
    assert (await js.publish("embedded.one", b"hello")).seq == 1
    await nc.close()

    nats_server.restart()
    assert (nats_server.port, nats_server.admin_url) == (port, url)
    assert nats_server.pid != first_pid and not psutil.pid_exists(first_pid)
    nc = await nats.connect(url)
    js = nc.jetstream()
    assert (await js.stream_info("EMBEDDED")).state.messages == 1
    assert (await js.get_msg("EMBEDDED", 1)).data == b"hello"
    await nc.close()

    pid = nats_server.pid
    assert pid is not None
    nats_server.stop()
    assert not nats_server.running and not psutil.pid_exists(pid)
    assert "Server is ready" in nats_server.log_file.read_text()


def test_nats_server_on_a_busy_port_fails_with_its_log(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = NatsServer(tmp_path / "nats", port)
        with pytest.raises(ServerError, match="address already in use"):
            server.start()
    assert not server.running


# ---------------------------------------------------------------------------------------------
# PostgreSQL


async def test_postgres_starts_queries_and_stops_completely(short_tmp: Path) -> None:
    pg = Postgres(short_tmp / "pg")
    expected = pg.expected_uri()
    uri = pg.start()
    assert uri == expected == pg.uri
    assert pg.pid is not None
    postmaster = psutil.Process(pg.pid)
    pids = [postmaster.pid, *(c.pid for c in postmaster.children(recursive=True))]
    conn = await asyncpg.connect(uri)
    assert await conn.fetchval("SELECT 1") == 1
    await conn.close()
    extra = await create_database(uri, "extra")
    conn = await asyncpg.connect(extra)
    assert await conn.fetchval("SELECT current_database()") == "extra"
    await drop_database(uri, "extra")  # forces the open connection out
    await conn.close(timeout=1)

    pg.stop()
    assert pg.pid is None and gone(pids) == []


def test_postgres_stops_even_when_another_handle_is_registered(short_tmp: Path) -> None:
    with Postgres(short_tmp / "pg") as pg:
        assert pg.pid is not None
        pids = [pg.pid, *(c.pid for c in psutil.Process(pg.pid).children())]
        # pgserver would leave the server running for this (live) process's handle.
        handles = pg.pgdata / ".handle_pids.json"
        handles.write_text(json.dumps([*json.loads(handles.read_text()), os.getppid()]))
    assert gone(pids) == []


@pytest.mark.parametrize("log_there", [True, False], ids=["log", "no-log-yet"])
async def test_postgres_slower_than_pgservers_own_timeout_is_adopted(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, log_there: bool
) -> None:
    """pgserver waits 10 s for `pg_ctl start`, fixed; on a loaded machine the server is ready
    a moment later (a CI run failed: "pg_ctl ... timed out after 10 seconds" with "ready to
    accept connections" the next line of its log). Here pg_ctl launches the server and gives up
    at once: the server is waited for, adopted and answers, and stop() leaves nothing."""
    import pgserver.postgres_server as pgs

    real = pgs.pg_ctl

    def hurried(args: list[str], **kwargs: Any) -> Any:
        if "start" not in args:
            return real(args, **kwargs)
        real(["-W" if a == "-w" else a for a in args], **kwargs)  # launched, not waited for
        if log_there:
            raise subprocess.TimeoutExpired(["pg_ctl", *args], 10)
        try:  # pgserver's handler reads the log, which may not exist yet (a CI run)
            raise subprocess.TimeoutExpired(["pg_ctl", *args], 10)
        except subprocess.TimeoutExpired:
            raise FileNotFoundError(2, "No such file or directory", "pg/log") from None

    monkeypatch.setattr(pgs, "pg_ctl", hurried)
    pg = Postgres(short_tmp / "pg")
    uri = pg.start()
    assert pg.pid is not None
    pids = [pg.pid, *(c.pid for c in psutil.Process(pg.pid).children(recursive=True))]
    conn = await asyncpg.connect(uri)
    assert await conn.fetchval("SELECT 1") == 1
    await conn.close()
    pg.stop()
    assert pg.pid is None and gone(pids) == []


async def test_database_url_fixture_is_a_fresh_database(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        assert (await conn.fetchval("SELECT current_database()")).startswith("test_")
        tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        assert await conn.fetchval(tables) == 0
        await conn.execute("CREATE TABLE t (x int)")
    finally:
        await conn.close()


# ---------------------------------------------------------------------------------------------
# launcher building blocks


def test_backoff_doubles_up_to_the_cap_and_resets_after_a_long_run() -> None:
    backoff = Backoff()
    assert [backoff.delay_after(0.1) for _ in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay_after(31.0) == 0.5
    assert backoff.delay_after(2.0) == 1


def test_gateway_token_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    home = Home(tmp_path)
    first = gateway_token(home, None)
    assert first.generated and first.source == str(home.token_file)
    assert home.token_file.stat().st_mode & 0o777 == 0o600
    again = gateway_token(home, None)
    assert not again.generated and again.value == first.value
    assert first.value not in repr(first)  # a token never prints
    strong = "from-the-environment-5f0c2e9a7b"
    from_env = gateway_token(home, SecretStr(strong))
    assert (from_env.value, from_env.source, from_env.generated) == (
        strong,
        "SB_GATEWAY_TOKEN",
        False,
    )


def test_a_weak_gateway_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HomeError, match="SB_GATEWAY_TOKEN") as refused:
        gateway_token(Home(tmp_path), SecretStr("change-me"))
    assert "change-me" not in str(refused.value)


def test_scale_and_port_checks() -> None:
    services = registry.SERVICES
    assert parse_scale(["agent=2", "tools=0"], services) == {"agent": 2, "tools": 0}
    for bad in ("agent", "agent=x", "nobody=1", "gateway=2"):
        with pytest.raises(ValueError, match="--scale"):
            parse_scale([bad], services)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert not port_is_free(busy.getsockname()[1])
    assert port_is_free(free_port())


def test_leftovers_of_a_killed_launcher_are_reaped_but_reused_pids_are_not(tmp_path: Path) -> None:
    home = Home(tmp_path)
    home.create()
    sleep = [PY, "-c", "import time; time.sleep(120)"]
    stale = subprocess.Popen(sleep, start_new_session=True)
    innocent = subprocess.Popen(sleep, start_new_session=True)
    try:
        write_pid(home.pid_file("agent-0"), stale.pid)
        write_pid(home.pid_file("tools-0"), innocent.pid)
        hour_ago = time.time() - 3600  # file older than the process: the pid was reused
        os.utime(home.pid_file("tools-0"), (hour_ago, hour_ago))
        assert reap_stale(home) == [stale.pid]
        assert stale.wait(5) is not None and innocent.poll() is None
        assert list(home.run_dir.glob("*.pid")) == []
        write_pid(home.pid_file("launcher"), innocent.pid)
        with pytest.raises(HomeError, match="already running"):
            claim(home)
    finally:
        for proc in (stale, innocent):
            proc.kill()
            proc.wait()


def test_cli_version_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("switchboard ")
    assert main(["up", "--scale", "nobody=2"]) == 2
    assert "unknown service" in capsys.readouterr().err
    assert main(["up", "--http-port", "0"]) == 2
    assert "not a TCP port" in capsys.readouterr().err
    script = Path(PY).parent / "switchboard"
    result = subprocess.run([str(script), "version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stdout.startswith("switchboard ")


def test_doctor_reports_each_check_and_how_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SB_MODEL", "SB_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SB_HOME", str(tmp_path / "home"))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "OK    nats-server: nats-server: v" in out
    assert "OK    database: pgserver" in out
    assert f"OK    data dir: {tmp_path / 'home'} is writable" in out
    assert "FAIL  model: no model configured" in out and "fix: export ANTHROPIC_API_KEY" in out
    # The tools executor's own probe, run by doctor (what works here is the host's business).
    assert "  sandbox: working: " in out and "commands require landlock|namespaces" in out
    monkeypatch.setenv("SB_MODEL", "anthropic/claude")
    monkeypatch.setenv("SB_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    main(["doctor"])
    out = capsys.readouterr().out
    assert "OK    model: configured via SB_MODEL" in out
    assert "FAIL  database: SB_DATABASE_URL is not reachable" in out


# ---------------------------------------------------------------------------------------------
# the launcher


async def test_launcher_fails_fast_when_the_http_port_is_busy(tmp_path: Path) -> None:
    err = io.StringIO()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        launcher = Launcher(tmp_path, services=[], http_port=port, environ=clean_environ(), err=err)
        assert await launcher.serve(asyncio.Event()) == 1
    assert f"HTTP port {port} is busy" in err.getvalue() and "--http-port" in err.getvalue()
    assert launcher.nats is None and list((tmp_path / "run").glob("*.pid")) == []


@contextlib.asynccontextmanager
async def running(launcher: Launcher) -> AsyncIterator[tuple[asyncio.Event, asyncio.Task[int]]]:
    """The launcher serving in this loop; stopped (everything it started) even if the test
    fails."""
    stop = asyncio.Event()
    serving = asyncio.create_task(launcher.serve(stop))
    try:
        yield stop, serving
    finally:
        stop.set()
        await asyncio.wait({serving}, timeout=60)


async def wait_ready(launcher: Launcher, serving: asyncio.Task[int], out: io.StringIO) -> None:
    ready = asyncio.create_task(launcher.ready.wait())
    await asyncio.wait({serving, ready}, timeout=90, return_when=asyncio.FIRST_COMPLETED)
    assert ready.done(), f"not ready:\n{out.getvalue()}"


async def test_launcher_runs_real_service_processes_wired_and_restarts_a_killed_one(
    short_tmp: Path,
) -> None:
    """``--processes`` with two agents: every real process got its environment (read from the
    kernel), distinct ports and the agents' addresses; a SIGKILLed service comes back and the
    system is ready again; a stop leaves nothing behind."""
    home = Home(short_tmp / "home")
    out, err = io.StringIO(), io.StringIO()
    launcher = Launcher(
        home,
        services=default_services({"agent": 2}),
        http_port=free_port(),
        environ={**clean_environ(), "OPENAI_API_KEY": "sk-launcher-test"},
        backoff=Backoff(initial=0.1, maximum=0.4, reset_after=30),
        out=out,
        err=err,
    )
    assert launcher.processes  # a scaled service means one process per instance
    async with running(launcher) as (stop, serving):
        await wait_ready(launcher, serving, out)
        sup, nats_server, pg = launcher.supervisor, launcher.nats, launcher.postgres
        assert sup is not None and nats_server is not None and pg is not None
        token = home.token_file.read_text().strip()
        assert f"Gateway token (stored in {home.token_file}): {token}" in out.getvalue()
        base = f"http://127.0.0.1:{launcher.http_port}"
        await until(lambda: "Switchboard ready" in out.getvalue(), what="the ready line")
        assert (
            f"Switchboard ready: {base}/ (OpenAI API at {base}/v1, token in {home.token_file}) in "
            in out.getvalue()
        )
        async with httpx.AsyncClient() as client:  # the printed address answers
            page = await client.get(f"{base}/")
        assert page.status_code == 200 and "Switchboard is running" in page.text

        names = [
            "gateway-0",
            "router-0",
            "agent-0",
            "agent-1",
            "memory-0",
            "tools-0",
            "scheduler-0",
            "media-0",
        ]
        assert sorted(sup.pids()) == sorted(names)
        envs = {name: process_env(pid) for name, pid in sup.pids().items()}
        # Each service sees only the secrets it needs (issue 9): a model key reaches the agent,
        # the gateway token the gateway, the database the agent, memory, the scheduler and
        # media, the gRPC credential those that use gRPC; each connects to NATS as its own user.
        secrets = {
            "OPENAI_API_KEY": {"agent"},
            "SB_DATABASE_URL": {"agent", "memory", "scheduler", "media"},
            "SB_GATEWAY_TOKEN": {"gateway"},
            "SB_SERVICE_TOKEN": {"gateway", "agent", "router", "memory", "scheduler", "media"},
        }
        for name, env in envs.items():
            service = registry.get(name.rsplit("-", 1)[0])
            assert env["SB_INSTANCE"] == name
            assert env["OTEL_SERVICE_NAME"] == service.otel_name == "switchboard-" + service.name
            assert env["SB_NATS_URL"] == nats_server.url
            assert env["SB_NATS_USER"] == service.name and env["SB_NATS_PASSWORD"]
            assert env["SB_HOME"] == str(home.root)
            for variable, readers in secrets.items():
                assert (variable in env) == (service.name in readers), (name, variable)
            for port in service.ports:
                # A laptop listens on loopback only: asked here, checked on the bound sockets
                # in test_loopback_sockets.py.
                assert env[port.host_setting] == "127.0.0.1"
        assert envs["agent-0"]["SB_DATABASE_URL"] == launcher.database_url
        assert envs["agent-0"]["OPENAI_API_KEY"] == "sk-launcher-test"
        assert envs["gateway-0"]["SB_GATEWAY_TOKEN"] == token
        assert envs["gateway-0"]["SB_HTTP_PORT"] == str(launcher.http_port)
        assert envs["tools-0"]["SB_WORKSPACES_DIR"] == str(home.workspaces_dir)
        # SB_HOME and its folders are this user's only (as root, postgres and the sandbox's
        # users may pass through SB_HOME and workspaces/, not list them).
        await until(lambda: home.pid_file("postgres").exists(), what="postgres")
        passable = {home.root, home.workspaces_dir} if os.geteuid() == 0 else set()
        for folder in (home.root, *[p for p in home.root.iterdir() if p.is_dir()]):
            mode = 0o711 if folder in passable else 0o700
            assert folder.stat().st_mode & 0o777 == mode, (folder, oct(folder.stat().st_mode))
        ports = [envs[n]["SB_OPS_PORT"] for n in names]
        ports += [envs[n]["SB_AGENT_GRPC_PORT"] for n in ("agent-0", "agent-1")]
        assert len(set(ports)) == len(ports) == 10
        agents = ",".join(
            f"127.0.0.1:{envs[n]['SB_AGENT_GRPC_PORT']}" for n in ("agent-0", "agent-1")
        )
        # The agents' addresses reach the gateway, their caller (no one else reads them).
        assert {n for n in names if "SB_AGENT_ADDR" in envs[n]} == {"gateway-0"}
        assert envs["gateway-0"]["SB_AGENT_ADDR"] == agents

        # PostgreSQL came up in parallel at the URI the services were given.
        await until(lambda: home.pid_file("postgres").exists(), what="postgres")
        assert pg.uri == launcher.database_url and pg.pid is not None
        for name in ("launcher", "nats", *names):
            assert home.pid_file(name).exists(), name
        assert int(home.pid_file("agent-1").read_text()) == sup.pids()["agent-1"]

        # A killed service is restarted, and the system is ready again.
        router_pid = sup.pids()["router-0"]
        os.kill(router_pid, signal.SIGKILL)
        await until(lambda: sup.pids()["router-0"] != router_pid, what="router-0 restart")
        assert "router-0 was killed by SIGKILL" in err.getvalue()
        assert "restarting in 0.1s" in err.getvalue()
        await until_async(lambda: ready(base), what="ready after the restart")

        postmaster = psutil.Process(pg.pid)
        pids = [*sup.pids().values(), router_pid, postmaster.pid, nats_server.pid or 0]
        pids += [c.pid for c in postmaster.children(recursive=True)]
        stop.set()
        assert await asyncio.wait_for(serving, 60) == 0
        assert gone(pids) == []
    assert list(home.run_dir.glob("*.pid")) == []


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "one-process"])
async def test_a_failing_service_is_restarted_with_backoff(
    tmp_path: Path, postgres_uri: str, processes: bool
) -> None:
    """A real service that cannot start (the agent refuses an unknown queue mode) is started
    again and again, with the delays doubling up to the cap, in both modes."""
    err = io.StringIO()
    launcher = Launcher(
        tmp_path,
        http_port=free_port(),
        environ=clean_environ(SB_DATABASE_URL=postgres_uri, SB_QUEUE_MODE="bogus"),
        processes=processes,
        backoff=Backoff(initial=0.1, maximum=0.4, reset_after=30),
        out=io.StringIO(),
        err=err,
    )
    async with running(launcher) as (stop, serving):
        agent: list[str] = []

        def restarted_three_times() -> bool:
            agent[:] = [line for line in err.getvalue().splitlines() if "agent" in line]
            return len(agent) >= 4

        await until(restarted_three_times, timeout=90, what="four agent failures")
        for line, delay in zip(agent, ["0.1s", "0.2s", "0.4s", "0.4s"], strict=False):
            assert f"; restarting in {delay}" in line, agent
        if processes:
            assert all("agent-0 exited with code 1 after" in line for line in agent[:4])
            assert "unknown queue mode" not in err.getvalue()  # the details are in its log
            log = (tmp_path / "logs" / "agent-0.log").read_text()
            assert "queue_mode" in log and "bogus" in log
        else:
            assert all("agent failed: agent: invalid settings" in line for line in agent[:4])
            assert "queue_mode" in agent[0] and "bogus" in agent[0]
        assert not launcher.ready.is_set()  # the system is not ready without its agent
        stop.set()
        assert await asyncio.wait_for(serving, 60) == 0


async def test_launcher_cleans_up_when_it_crashes(
    short_tmp: Path, postgres_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    nats_port = free_port()
    environ = clean_environ(SB_DATABASE_URL=postgres_uri, SB_NATS_PORT=str(nats_port))
    launcher = Launcher(
        short_tmp, http_port=free_port(), environ=environ, processes=True, err=io.StringIO()
    )

    async def crash(*args: object) -> int:
        assert launcher.nats is not None and launcher.supervisor is not None
        supervisor = launcher.supervisor
        await until(lambda: len(supervisor.pids()) == len(registry.SERVICES), what="the services")
        pids.extend([launcher.nats.pid or 0, *supervisor.pids().values()])
        raise RuntimeError("launcher bug")

    pids: list[int] = []
    monkeypatch.setattr(launcher, "_until_stopped", crash)
    with pytest.raises(RuntimeError, match="launcher bug"):
        await launcher.serve(asyncio.Event())
    assert launcher.nats is not None and launcher.nats.port == nats_port
    assert len(pids) == 1 + len(registry.SERVICES) and gone(pids) == []
    assert list((short_tmp / "run").glob("*.pid")) == []


LAUNCH = (
    "import sys\n"
    "from switchboard.cli.launcher import Launcher\n"
    "sys.exit(Launcher({home!r}, http_port={port}, processes=True, stop_timeout=1.0).run())\n"
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_launcher_process_stops_everything_on_signal(
    sig: signal.Signals, short_tmp: Path, postgres_uri: str
) -> None:
    """As a process, with SB_DATABASE_URL set (no PostgreSQL of its own): a service that does
    not stop on SIGTERM (here: frozen with SIGSTOP) is killed, and so are the processes its
    tools started; a second launcher on the same home is refused."""
    home, port = short_tmp / "home", free_port()
    token = "test-token-" + os.urandom(8).hex()
    env = clean_environ(
        SB_DATABASE_URL=postgres_uri, SB_GATEWAY_TOKEN=token, SB_EXEC_ALLOWLIST='["sleep"]'
    )
    proc = subprocess.Popen(
        [PY, "-c", LAUNCH.format(home=str(home), port=port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    is_ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Switchboard ready"):
                is_ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert is_ready.wait(90), "".join(lines)
        assert "token in SB_GATEWAY_TOKEN)" in lines[-1]
        assert "Gateway token: the value of SB_GATEWAY_TOKEN\n" in lines
        assert not (home / "gateway-token").exists() and not (home / "pg").exists()
        pid_files = {p.name: p.read_text() for p in (home / "run").glob("*.pid")}
        expected = ["launcher.pid", "nats.pid"] + [f"{n}-0.pid" for n in registry.names()]
        assert sorted(pid_files) == sorted(expected)
        pids = [int(text) for text in pid_files.values()]

        # The executor starts a long-running process (its grandchild), then freezes.
        started = httpx.post(
            f"http://127.0.0.1:{port}/tools/invoke",
            headers={"Authorization": f"Bearer {token}"},
            json={"tool": "process", "args": {"action": "start", "command": "sleep 120"}},
            timeout=30,
        )
        assert started.status_code == 200 and started.json()["ok"], started.text
        tools = psutil.Process(int(pid_files["tools-0.pid"]))
        children = [c.pid for c in tools.children(recursive=True)]
        assert children
        os.kill(tools.pid, signal.SIGSTOP)

        # A second launcher on the same SB_HOME is refused and leaves the first one alone.
        second = LAUNCH.format(home=str(home), port=free_port())
        refused = subprocess.run([PY, "-c", second], env=env, capture_output=True, text=True)
        assert refused.returncode == 1 and "already running" in refused.stderr
        assert {p.name: p.read_text() for p in (home / "run").glob("*.pid")} == pid_files

        proc.send_signal(sig)
        assert proc.wait(60) == 0
        assert proc.stderr is not None
        # tools-0 is among the services killed after the stop timeout (on a loaded machine
        # others may be too)
        killed = re.search(r"killed (.+) after 1s", proc.stderr.read())
        assert killed is not None and "tools-0" in killed.group(1).split(", ")
        assert gone(pids + children) == []
        assert list((home / "run").glob("*.pid")) == []
    finally:
        if proc.poll() is None:  # the test failed: leave nothing behind anyway
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            reap_stale(Home(home))
