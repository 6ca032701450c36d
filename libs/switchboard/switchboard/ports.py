"""Free TCP ports for servers this machine starts (services, nats-server nodes, tests).

Kept apart from :mod:`switchboard.embedded` (which re-exports them) so the server classes of
embedded mode and of the NATS cluster (:mod:`switchboard.natscluster`) share one port walk.
"""

from __future__ import annotations

import os
import random
import socket
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["LOWEST_PICKED_PORT", "ephemeral_ports", "free_port", "port_is_free"]

LOWEST_PICKED_PORT = 10000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes outgoing connections' source ports from."""
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default
    return low, high


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago, below the ephemeral range: a port the OS picks
    (bind to 0) comes from the range every outgoing connection takes its source port from, so
    another process's connection could hold it by the time a service binds it (a service then
    failed to start, now and then, under load). Each process walks the range one port after the
    other from a random start (:class:`_PortWalk`): it never hands out a port twice while the
    first taker may not have bound it yet, and processes picking at once start far apart."""
    low, _ = ephemeral_ports()
    if low > LOWEST_PICKED_PORT + 1000:
        port = _PORT_WALK.take(LOWEST_PICKED_PORT, low, lambda p: port_is_free(p, host))
        if port is not None:
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _PortWalk:
    """Where this process's next port pick starts; a forked child starts afresh."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._next = 0

    def take(
        self, low: int, high: int, free: Callable[[int], bool], tries: int = 200
    ) -> int | None:
        """The next port of ``[low, high)`` that is ``free``, walking on from the last one
        taken (none is handed out again before the walk has gone round the whole range)."""
        span = high - low
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._next = os.getpid(), random.SystemRandom().randrange(span)
            for _ in range(tries):
                port = low + self._next % span
                self._next = (self._next + 1) % span
                if free(port):
                    return port
        return None


_PORT_WALK = _PortWalk()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True unless some program listens on ``host:port`` (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
