"""What ``switchboard up`` does to be ready soon (docs/startup.md): the order the services of
one process are imported and started in, and the launcher's own readiness poll of the gateway.
Apart from :mod:`switchboard.cli.launcher` to keep that module readable."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from switchboard import natsauth, registry
from switchboard.cli.supervisor import ServiceSpec

# How often the launcher asks the gateway's /readyz while starting. Each answer costs the
# stack about 11 ms of CPU (a check of every service: NATS requests, gRPC health, a query each;
# measured on a loaded machine), taken from the start-up it waits for. With the services in
# its own process the launcher asks only once all of them serve (host.serving_here, looked at
# every COUNTER_POLL_S), then more often; with service processes, as before.
READY_POLL_S = 0.05
READY_POLL_SERVING_S = 0.02
COUNTER_POLL_S = 0.01
# Imported, hence started, first in one process (host.Preload), the others in registry order:
# the streams' owner (the others wait for its streams), then the services whose start-up waits
# longest (the tool executor probes its sandbox, the agent sets up its database and consumers),
# so that those waits overlap the imports that follow; the last one imported starts quickly.
IMPORT_FIRST = (natsauth.STREAM_OWNER, "tools", "agent")


def import_order(specs: Sequence[ServiceSpec]) -> list[registry.Service]:
    """The services of ``specs`` in the order :data:`IMPORT_FIRST` says."""
    services = [spec.service for spec in specs]
    first = [s for name in IMPORT_FIRST for s in services if s.name == name]
    return first + [s for s in services if s not in first]


async def readyz_ok(port: int, timeout: float = 1.0) -> bool:
    """Whether ``GET http://127.0.0.1:<port>/readyz`` answers 200. A plain HTTP/1.1 request:
    an HTTP client library would cost the start-up its imports and a TLS context (about 0.1 s
    of the launcher's CPU, measured) for a request to loopback."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(
                    b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                )
                status = await reader.readline()  # HTTP/1.1 200 OK
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    parts = status.split()
    return len(parts) >= 2 and parts[1] == b"200"
