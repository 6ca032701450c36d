"""Embedded mode listens on loopback only, checked on the sockets the kernel holds, not on the
settings the launcher hands out: a service that ignored its ``SB_*_HOST`` (or a library that
opened a port of its own) would pass a check of the configuration and fail this one.

``switchboard up`` runs as a process, in one process and with ``--processes``; every process in
its pid files (the launcher, nats-server, PostgreSQL, the services) and all their children are
asked for their listening TCP sockets and bound UDP sockets (psutil, i.e. /proc/<pid>/net).
The negative control gives the stack ``SB_OPS_HOST=0.0.0.0``: the check must name every ops
port. It also sets ``SB_HTTP_HOST=0.0.0.0``, the one exposure a user may ask for, which the
check must accept (the gateway's public port binds where ``SB_HTTP_HOST`` says)."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from switchboard import registry
from tests.support.stack import Stack, start_stack, stop_stack

LOOPBACK = {"127.0.0.1", "::1"}
# Every port the registry declares (each service's ops port, the gRPC ports, the gateway's
# HTTP port) plus nats-server's client port: what a running stack must be seen listening on,
# so that an empty scan (no permission to read another user's sockets...) cannot pass.
EXPECTED_PORTS = sum(len(s.ports) for s in registry.SERVICES) + 1


@dataclass(frozen=True)
class Bound:
    """A socket accepting connections (TCP LISTEN) or datagrams (UDP, bound)."""

    process: str  # "<pid file name>/<pid> <command>"
    kind: str  # "tcp" | "udp"
    address: str  # as bound, an IPv4-mapped IPv6 address unwrapped
    port: int


def _address(ip: str) -> str:
    """``::ffff:127.0.0.1`` (a dual-stack socket bound to an IPv4 address) is that address."""
    parsed = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)


def bound_sockets(stack: Stack) -> list[Bound]:
    """Every listening TCP and bound UDP socket of the processes in the stack's pid files
    (run/*.pid: launcher, nats, postgres and, with --processes, each service instance) and of
    all their descendants."""
    roots = stack.pids()
    names = {pid: name for name, pid in roots.items()}
    for name, pid in roots.items():
        for child in psutil.Process(pid).children(recursive=True):
            names.setdefault(child.pid, f"{name}'s child")
    found: list[Bound] = []
    for pid, name in sorted(names.items()):
        try:
            proc = psutil.Process(pid)
            label = f"{name}/{pid} {proc.name()}"
            connections = proc.net_connections(kind="inet")
        except psutil.NoSuchProcess:  # a short-lived child: it holds no socket now
            continue
        for conn in connections:
            tcp = conn.type == socket.SOCK_STREAM
            if tcp and conn.status != psutil.CONN_LISTEN:
                continue  # a connection, not a listener
            if not tcp and conn.raddr:
                continue  # a connected UDP socket receives from its peer only
            kind = "tcp" if tcp else "udp"
            found.append(Bound(label, kind, _address(conn.laddr.ip), conn.laddr.port))
    return found


def exposed(sockets: list[Bound], http_port: int, http_host: str | None) -> list[Bound]:
    """The sockets reachable from beyond this machine: bound elsewhere than 127.0.0.1 or ::1,
    except the gateway's HTTP port when ``SB_HTTP_HOST`` puts it on ``http_host``."""
    allowed_http = LOOPBACK if http_host is None else {_address(http_host)}
    return [
        s
        for s in sockets
        if not (s.kind == "tcp" and s.port == http_port and s.address in allowed_http)
        and s.address not in LOOPBACK
    ]


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir outside pytest's tree (a pytest session started meanwhile may delete older
    session folders, PostgreSQL's data dir with them)."""
    path = Path(tempfile.mkdtemp(prefix="sb-loopback-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


CASES = {
    # name: (up's arguments, settings given to the stack, whether every ops port is exposed)
    "one-process": ((), {}, False),
    "processes": (("--processes",), {}, False),
    "processes-ops-on-0.0.0.0": (
        ("--processes",),
        {"SB_OPS_HOST": "0.0.0.0", "SB_HTTP_HOST": "0.0.0.0"},
        True,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_socket_of_a_running_stack_is_on_loopback(case: str, short_tmp: Path) -> None:
    args, settings, ops_exposed = CASES[case]
    stack = start_stack(short_tmp / "home", settings, timeout=120, args=list(args))
    try:
        sockets = bound_sockets(stack)
        listed = "\n".join(f"  {s}" for s in sockets)
        ports = {s.port for s in sockets}
        # The scan saw the system: the gateway's port, nats-server's, and one per declared port.
        assert stack.http_port in ports, listed
        assert any("nats-server" in s.process for s in sockets), listed
        assert len(ports) >= EXPECTED_PORTS, f"{len(ports)} < {EXPECTED_PORTS}:\n{listed}"
        if "--processes" in args:  # each service instance listens in its own process
            services = {n for n in stack.pids() if n not in ("launcher", "nats", "postgres")}
            listening = {s.process.split("/", 1)[0] for s in sockets}
            assert services and services <= listening, listed

        outside = exposed(sockets, stack.http_port, settings.get("SB_HTTP_HOST"))
        if not ops_exposed:
            assert outside == [], "listening beyond loopback:\n" + "\n".join(map(str, outside))
            return
        # The negative control: the check names each ops port bound on 0.0.0.0, and nothing
        # else (the gateway's HTTP port is on 0.0.0.0 too, as SB_HTTP_HOST asked).
        processes = {
            f"{s.name}-0" for s in registry.SERVICES if any(p.name == "ops" for p in s.ports)
        }
        assert {s.address for s in outside} == {"0.0.0.0"}, outside
        assert {s.process.split("/", 1)[0] for s in outside} == processes, outside
        assert len(outside) == len(processes), outside
        gateway = [s for s in sockets if s.port == stack.http_port]
        assert [s.address for s in gateway] == ["0.0.0.0"], gateway
    finally:
        assert stop_stack(stack) == []
