"""A media service in-process against real nats-server and PostgreSQL:
``async with media_service(nats_url, database_url, home, **env) as m`` runs ``serve`` with
those settings (gRPC ``Media`` on a free port: ``m.stub``, ``m.client``), ready.

(Not a conftest.py: see services/gateway/tests/gateway_harness.py.)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import nats

from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.media import MediaClient
from switchboard.runtime import service_ready
from switchboard.v1 import media_pb2_grpc
from switchboard_media.config import MediaSettings
from switchboard_media.server import serve

SUBJECTS = bus.Subjects()


@dataclass
class RunningMedia:
    stub: media_pb2_grpc.MediaStub
    client: MediaClient
    settings: MediaSettings
    task: asyncio.Task[None]

    @property
    def root(self) -> Path:
        return self.settings.store_dir()

    def files(self) -> list[Path]:
        """The stored files (temporary ones included)."""
        return sorted(p for p in self.root.glob("*/*") if p.is_file())


@asynccontextmanager
async def media_service(
    nats_url: str, database_url: str, home: Path, **environ: str
) -> AsyncIterator[RunningMedia]:
    port = free_port()
    token = "media-test-" + os.urandom(12).hex()
    env = {
        "SB_NATS_URL": nats_url,
        "SB_DATABASE_URL": database_url,
        "SB_HOME": str(home),
        "SB_OPS_HOST": "127.0.0.1",
        "SB_SERVICE_TOKEN": token,
        "SB_MEDIA_GRPC_PORT": str(port),
        **environ,
    }
    settings = MediaSettings.from_environ(env)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(nats_url)
    channel: grpc.aio.Channel = rpc.channel(f"127.0.0.1:{port}", token)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert not task.done(), task
            try:
                if await service_ready(nc, SUBJECTS, "media", timeout=1):
                    break
            except Exception:
                pass
            assert time.monotonic() < deadline, "media service not ready"
            await asyncio.sleep(0.05)
        yield RunningMedia(media_pb2_grpc.MediaStub(channel), MediaClient(channel), settings, task)
    finally:
        await channel.close()
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 30)
