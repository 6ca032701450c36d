"""NATS users (switchboard.natsauth) on a real nats-server: who may start a tool call, who
creates the streams, and NATS over TLS."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path

import nats
import pytest

from switchboard import bus, natsauth, registry
from switchboard.embedded import NatsServer
from switchboard.runtime import ServiceRuntime
from switchboard.settings import CommonSettings
from tests.support.servers import service_nats_env

from .conftest import eventually

SUBJECTS = bus.Subjects()


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` the rest."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def test_only_the_agent_may_start_a_tool_call_and_only_the_router_make_streams() -> None:
    call = SUBJECTS.tools_call("default")
    for name in registry.names():
        publish = natsauth.permissions(name).publish
        assert any(matches(p, call) for p in publish) == (name == "agent"), name
        creates = any(matches(p, "$JS.API.STREAM.CREATE.TOOLS") for p in publish)
        assert creates == (name == natsauth.STREAM_OWNER), name
        # Each listens only to its own inbox.
        inboxes = [s for s in natsauth.permissions(name).subscribe if s.startswith("_INBOX")]
        assert inboxes == [f"{bus.inbox_prefix(name)}.>"]
    assert not any(matches(p, "sb.inbound.api") for p in natsauth.permissions("tools").publish)


def test_only_the_gateway_and_the_scheduler_publish_inbound_and_the_scheduler_only_cron() -> None:
    for name in registry.names():
        publish = natsauth.permissions(name).publish
        cron = any(matches(p, SUBJECTS.inbound("cron")) for p in publish)
        assert cron == (name in ("gateway", "scheduler")), name
        telegram = any(matches(p, SUBJECTS.inbound("telegram")) for p in publish)
        assert telegram == (name == "gateway"), name


def test_passwords_are_strings_to_nats_server() -> None:
    """nats-server reads an environment value like a config value: a leading digit would make
    it a number (and the server refuse to start)."""
    generated = natsauth.Credentials.generate().passwords.values()
    derived = natsauth.Credentials.derive("p123").passwords.values()
    assert all(p[:1].isalpha() and p[1:].isalnum() for p in (*generated, *derived))


def settings(nats_url: str, user: str, **extra: str) -> CommonSettings:
    env = {**service_nats_env(nats_url, user), "SB_OPS_HOST": "127.0.0.1", **extra}
    return CommonSettings.from_environ(env)


async def test_a_service_waits_for_the_router_to_create_the_streams(nats_url: str) -> None:
    """The executor's user may not create streams: on an empty server it waits (not ready)
    until the router's runtime has made them, then starts."""
    stop = asyncio.Event()
    tools = asyncio.create_task(
        ServiceRuntime(registry.get("tools"), settings(nats_url, "tools"), stop).__aenter__()
    )
    admin = await nats.connect(nats_url)
    try:
        await asyncio.sleep(0.5)
        assert not tools.done()
        assert "TOOLS" in await bus.missing_streams(admin.jetstream(), SUBJECTS)
        async with ServiceRuntime(registry.get("router"), settings(nats_url, "router"), stop):
            assert await eventually(tools.done, timeout=30)
            rt = tools.result()
            await rt.__aexit__(None, None, None)
        assert await bus.missing_streams(admin.jetstream(), SUBJECTS) == []
    finally:
        tools.cancel()
        await admin.close()


def make_certificates(where: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1, made by openssl."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=sb-ca",
            "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (where / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.cnf",
            "-out", "server.pem")  # fmt: skip
    return where / "ca.pem", where / "server.pem", where / "server.key"


async def test_services_reach_nats_over_tls(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    credentials = natsauth.Credentials.generate()
    tls = ["--tls", "--tlscert", str(cert), "--tlskey", str(key)]
    server = NatsServer(tmp_path / "nats", credentials=credentials, extra_args=tls).start()
    try:
        env = {
            "SB_NATS_URL": f"tls://127.0.0.1:{server.port}",
            **credentials.service_env("router"),
            "SB_OPS_HOST": "127.0.0.1",
        }
        stop = asyncio.Event()
        with_ca = CommonSettings.from_environ({**env, "SB_NATS_TLS_CA": str(ca)})
        async with ServiceRuntime(registry.get("router"), with_ca, stop) as rt:
            assert rt.nc.is_connected and rt.nc.connected_url is not None
            assert rt.nc.connected_url.scheme == "tls"
        # Without the CA the server's certificate is not trusted: no connection.
        with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
            await nats.connect(
                env["SB_NATS_URL"],
                user="router",
                password=env["SB_NATS_PASSWORD"],
                tls=ssl.create_default_context(),
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )
    finally:
        server.stop()
