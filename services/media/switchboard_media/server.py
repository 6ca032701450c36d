"""Media: serves gRPC ``Media`` (ingest, get, transform, transcribe) on a content-addressed
store (a directory and PostgreSQL), and deletes what expired."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from switchboard import registry, rpc
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import media_pb2_grpc

from . import images
from .config import MediaSettings
from .media import Media
from .metrics import EXPIRED
from .migrations import MIGRATIONS, SCHEMA
from .service import MediaService
from .store import MediaStore
from .transcribe import Transcriber

log = logging.getLogger(__name__)


async def _cleanup_loop(store: MediaStore, stop: asyncio.Event, every_s: float) -> None:
    """Delete expired files and rows (every replica runs it; they skip each other's rows)."""
    while not stop.is_set():
        try:
            while deleted := await store.expire():
                EXPIRED.inc(deleted)
                log.info("deleted %d expired files", deleted)
            if swept := await store.sweep():
                log.info("removed %d files without a record", swept)
        except (TimeoutError, OSError) as exc:
            log.warning("media cleanup failed: %s", type(exc).__name__)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)


async def serve(settings: MediaSettings, stop: asyncio.Event) -> None:
    async with ServiceRuntime(registry.get("media"), settings, stop) as rt:
        images.configure(settings.media_max_pixels)
        pool = await rt.database(SCHEMA, MIGRATIONS)
        store = MediaStore(pool, settings.store_dir(), settings.media_ttl_s)
        store.open()
        transcriber = Transcriber(settings)
        rt.stack.push_async_callback(transcriber.close)
        media = Media(settings, store, transcriber)
        await rt.serve_grpc(
            settings.media_grpc_host,
            settings.media_grpc_port,
            rpc.Servicer(media_pb2_grpc.add_MediaServicer_to_server, MediaService(media)),
        )
        cleanup = asyncio.create_task(
            _cleanup_loop(store, rt.stopping, settings.media_cleanup_interval_s)
        )
        rt.stack.push_async_callback(_cancel, cleanup)
        log.info("media ready", extra={"dir": str(store.root)})
        await rt.wait_stopped()


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
