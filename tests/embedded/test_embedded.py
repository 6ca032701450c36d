"""Embedded mode: the real servers (NATS, PostgreSQL) and the launcher's process supervision.

The launcher is exercised with stand-in services (tiny Python processes), so these tests do not
depend on the real services; tests/e2e runs `switchboard up` with the real ones.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import nats
import psutil
import pytest
from nats.js.api import StorageType

from switchboard.cli.home import Home, HomeError, claim, gateway_token, reap_stale, write_pid
from switchboard.cli.main import main
from switchboard.cli.up import Backoff, Launcher, ServiceSpec, parse_scale, port_is_free
from switchboard.embedded import (
    NatsServer,
    Postgres,
    ServerError,
    create_database,
    drop_database,
    free_port,
)

PY = sys.executable
# Stand-in services. Each records its environment in $SB_HOME/env-<instance>.json.
DUMP_ENV = (
    "import json, os\n"
    "path = os.path.join(os.environ['SB_HOME'], 'env-' + os.environ['SB_INSTANCE'] + '.json')\n"
    "json.dump(dict(os.environ), open(path + '.tmp', 'w')); os.replace(path + '.tmp', path)\n"
)
SLEEPER = DUMP_ENV + "import time; time.sleep(120)\n"
CRASHER = "import sys; sys.exit(3)\n"
READY_SERVER = DUMP_ENV + (
    "import http.server\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200 if self.path == '/readyz' else 404); self.end_headers()\n"
    "    def log_message(self, *args): pass\n"
    "http.server.HTTPServer(('127.0.0.1', int(os.environ['SB_HTTP_PORT'])), H).serve_forever()\n"
)
# Ignores SIGTERM (so it must be SIGKILLed) and leaves a grandchild in its process group.
STUBBORN = DUMP_ENV + (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "open(os.path.join(os.environ['SB_HOME'], 'grandchild.pid'), 'w').write(str(child.pid))\n"
    "time.sleep(120)\n"
)


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


def read_env(home: Path, instance: str) -> dict[str, str] | None:
    try:
        return dict(json.loads((home / f"env-{instance}.json").read_text()))
    except (OSError, ValueError):
        return None


def clean_environ(**extra: str) -> dict[str, str]:
    drop = ("SB_DATABASE_URL", "SB_GATEWAY_TOKEN", "SB_NATS_PORT", "SB_HOME", "SB_HTTP_PORT")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir outside pytest's tree (pgserver opens up parents; socket paths stay short)."""
    path = Path(tempfile.mkdtemp(prefix="sb-emb-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# NATS


async def test_nats_server_jetstream_restart_keeps_port_and_data(nats_server: NatsServer) -> None:
    url, port, first_pid = nats_server.url, nats_server.port, nats_server.pid
    assert url == f"nats://127.0.0.1:{port}" and first_pid is not None
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="EMBEDDED", subjects=["embedded.>"], storage=StorageType.FILE)
    assert (await js.publish("embedded.one", b"hello")).seq == 1
    await nc.close()

    nats_server.restart()
    assert (nats_server.port, nats_server.url) == (port, url)
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
    first = gateway_token(home, {})
    assert first.generated and first.source == str(home.token_file)
    assert home.token_file.stat().st_mode & 0o777 == 0o600
    again = gateway_token(home, {})
    assert not again.generated and again.value == first.value
    from_env = gateway_token(home, {"SB_GATEWAY_TOKEN": "secret"})
    assert (from_env.value, from_env.source, from_env.generated) == (
        "secret",
        "SB_GATEWAY_TOKEN",
        False,
    )


def test_scale_and_port_checks() -> None:
    assert parse_scale(["agent=2", "tools=0"], ["agent", "tools"]) == {"agent": 2, "tools": 0}
    for bad in ("agent", "agent=x", "nobody=1"):
        with pytest.raises(ValueError, match="--scale"):
            parse_scale([bad], ["agent"])
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


async def test_launcher_supervises_restarts_and_stops_everything(short_tmp: Path) -> None:
    home = Home(short_tmp / "home")
    out, err = io.StringIO(), io.StringIO()
    launcher = Launcher(
        home,
        services=[
            ServiceSpec("gateway", [PY, "-c", READY_SERVER]),
            ServiceSpec("agent", [PY, "-c", SLEEPER], scale=2, port_env=["SB_AGENT_GRPC_PORT"]),
            ServiceSpec("crasher", [PY, "-c", CRASHER]),
        ],
        http_port=free_port(),
        environ=clean_environ(),
        backoff=Backoff(initial=0.1, maximum=0.4, reset_after=30),
        stop_timeout=2.0,
        ready_timeout=30.0,
        out=out,
        err=err,
    )
    stop = asyncio.Event()
    serving = asyncio.create_task(launcher.serve(stop))
    ready = asyncio.create_task(launcher.ready.wait())
    await asyncio.wait({serving, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    assert ready.done(), f"not ready:\n{out.getvalue()}\n{err.getvalue()}"
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

    # Every process got its environment; ports are distinct; the gateway knows the agents.
    names = ["gateway-0", "agent-0", "agent-1"]
    envs = {n: await until(lambda n=n: read_env(home.root, n), what=n) for n in names}
    for name, env in envs.items():
        assert env["SB_INSTANCE"] == name
        assert env["OTEL_SERVICE_NAME"] == "switchboard-" + name.split("-")[0]
        assert env["SB_NATS_URL"] == nats_server.url
        assert env["SB_DATABASE_URL"] == launcher.database_url
        assert env["SB_HOME"] == str(home.root) and env["SB_GATEWAY_TOKEN"] == token
        assert env["SB_HTTP_PORT"] == str(launcher.http_port)
        assert env["SB_WORKSPACES_DIR"] == str(home.workspaces_dir)
    ports = [envs[n]["SB_OPS_PORT"] for n in envs] + [
        envs[n]["SB_AGENT_GRPC_PORT"] for n in ("agent-0", "agent-1")
    ]
    assert len(set(ports)) == 5
    assert envs["gateway-0"]["SB_AGENT_ADDR"] == ",".join(
        f"127.0.0.1:{envs[n]['SB_AGENT_GRPC_PORT']}" for n in ("agent-0", "agent-1")
    )

    # PostgreSQL came up in parallel at the URI the services were given.
    await until(lambda: home.pid_file("postgres").exists(), what="postgres")
    assert pg.uri == launcher.database_url and pg.pid is not None
    conn = await asyncpg.connect(launcher.database_url)
    await conn.close()
    for name in ("launcher", "nats", "gateway-0", "agent-0", "agent-1"):
        assert home.pid_file(name).exists(), name
    assert int(home.pid_file("agent-1").read_text()) == sup.pids()["agent-1"]

    # A crashing service is restarted with exponential backoff.
    crasher = next(i for i in sup.instances if i.name == "crasher-0")
    await until(lambda: crasher.restarts >= 4, what="crasher restarts")
    gaps = [b - a for a, b in zip(crasher.starts, crasher.starts[1:], strict=False)][:4]
    for gap, delay in zip(gaps, [0.1, 0.2, 0.4, 0.4], strict=True):
        assert delay <= gap < delay + 1.0, gaps
    assert "switchboard: crasher-0 exited with code 3 after" in err.getvalue()
    assert "restarting in 0.1s" in err.getvalue() and "restarting in 0.4s" in err.getvalue()

    # A killed service is restarted too.
    agent_pid = sup.pids()["agent-0"]
    os.kill(agent_pid, signal.SIGKILL)
    await until(lambda: sup.pids()["agent-0"] != agent_pid, what="agent-0 restart")
    assert "agent-0 was killed by SIGKILL" in err.getvalue()

    # Stop: nothing is left running, no pid file is left behind.
    postmaster = psutil.Process(pg.pid)
    pids = [*sup.pids().values(), agent_pid, postmaster.pid, nats_server.pid or 0]
    pids += [c.pid for c in postmaster.children(recursive=True)]
    stop.set()
    assert await asyncio.wait_for(serving, 20) == 0
    assert gone(pids) == []
    assert list(home.run_dir.glob("*.pid")) == []


async def test_launcher_cleans_up_when_it_crashes(
    tmp_path: Path, postgres_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    nats_port = free_port()
    environ = clean_environ(SB_DATABASE_URL=postgres_uri, SB_NATS_PORT=str(nats_port))
    launcher = Launcher(
        tmp_path,
        services=[ServiceSpec("sleeper", [PY, "-c", SLEEPER], scale=2)],
        http_port=free_port(),
        environ=environ,
        err=io.StringIO(),
    )

    async def crash(*args: object) -> int:
        assert launcher.nats is not None and launcher.supervisor is not None
        await until(lambda: read_env(tmp_path, "sleeper-1"), what="sleepers")
        pids.extend([launcher.nats.pid or 0, *launcher.supervisor.pids().values()])
        raise RuntimeError("launcher bug")

    pids: list[int] = []
    monkeypatch.setattr(launcher, "_until_stopped", crash)
    with pytest.raises(RuntimeError, match="launcher bug"):
        await launcher.serve(asyncio.Event())
    assert launcher.nats is not None and launcher.nats.port == nats_port
    assert len(pids) == 3 and gone(pids) == []
    assert list((tmp_path / "run").glob("*.pid")) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_launcher_process_stops_everything_on_signal(
    sig: signal.Signals, tmp_path: Path, postgres_uri: str
) -> None:
    """As a process, with SB_DATABASE_URL set (no PostgreSQL of its own) and a child that
    ignores SIGTERM and has a grandchild."""
    home, port = tmp_path / "home", free_port()
    script = (
        "import sys\n"
        "from switchboard.cli.up import Launcher, ServiceSpec\n"
        f"services = [ServiceSpec('gateway', [sys.executable, '-c', {READY_SERVER!r}]),\n"
        f"            ServiceSpec('stubborn', [sys.executable, '-c', {STUBBORN!r}])]\n"
        f"sys.exit(Launcher({str(home)!r}, services=services, http_port={port},\n"
        "                  stop_timeout=1.0).run())\n"
    )
    env = clean_environ(SB_DATABASE_URL=postgres_uri, SB_GATEWAY_TOKEN="test-token")
    proc = subprocess.Popen(
        [PY, "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Switchboard ready"):
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert ready.wait(20), "".join(lines)
        assert "token in SB_GATEWAY_TOKEN)" in lines[-1]
        assert not (home / "gateway-token").exists() and not (home / "pg").exists()
        deadline = time.monotonic() + 10
        while not (home / "grandchild.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid_files = {p.name: p.read_text() for p in (home / "run").glob("*.pid")}
        assert sorted(pid_files) == ["gateway-0.pid", "launcher.pid", "nats.pid", "stubborn-0.pid"]
        pids = [int(text) for text in pid_files.values()]
        pids.append(int((home / "grandchild.pid").read_text()))
        assert all(psutil.pid_exists(p) for p in pids)

        # A second launcher on the same SB_HOME is refused and leaves the first one alone.
        second = (
            "import sys\n"
            "from switchboard.cli.up import Launcher\n"
            f"sys.exit(Launcher({str(home)!r}, services=[], http_port={free_port()}).run())\n"
        )
        refused = subprocess.run([PY, "-c", second], env=env, capture_output=True, text=True)
        assert refused.returncode == 1 and "already running" in refused.stderr
        assert {p.name: p.read_text() for p in (home / "run").glob("*.pid")} == pid_files

        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(20) == 0
        assert time.monotonic() - started < 5
        assert proc.stderr is not None and "killed stubborn-0 after 1s" in proc.stderr.read()
        assert gone(pids) == []
        assert list((home / "run").glob("*.pid")) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
