"""Media ingest and resize (issue 12): a 12-megapixel JPEG (4000 x 3000, noise over smooth
gradients so it compresses like a photo, made here with Pillow) ingested through the media
service's real ``Ingest`` (streamed in 1 MiB messages, sniffed, its structure checked, fully
decoded, stored) and resized through ``Transform`` to what the agent sends a model (long edge
1568 px, JPEG).

The service runs as its own process (``python -m switchboard_media``) against a nats-server and
a PostgreSQL this module starts; the bench talks to it over gRPC like the gateway and the agent
do. Every round ingests a distinct file (one comment segment differs), so nothing is served by
deduplication.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from switchboard import rpc
from switchboard.embedded import NatsServer, Postgres, free_port
from switchboard.media import MediaClient, MediaServiceError
from tests.bench.run import fresh_home
from tests.bench.stats import summarize
from tests.support.media_files import noise_jpeg

ROUNDS = 20
WARMUP = 2
MAX_EDGE = 1568
TARGET_RESIZE_P50_MS = 150.0
Say = Callable[[str], None]


class MediaProcess:
    """``python -m switchboard_media`` with its own NATS, PostgreSQL and home."""

    def __init__(self, home: Path) -> None:
        self.nats = NatsServer(home / "nats").start()
        self.postgres = Postgres(home / "pg")
        database_url = self.postgres.start()
        self.port = free_port()
        self.token = "bench-" + os.urandom(16).hex()
        self.log = (home / "media.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "switchboard_media"],
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
                "SB_HOME": str(home),
                "SB_NATS_URL": self.nats.url,
                "SB_DATABASE_URL": database_url,
                "SB_SERVICE_TOKEN": self.token,
                "SB_MEDIA_GRPC_PORT": str(self.port),
                "SB_LOG_LEVEL": "WARNING",
            },
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        self.postgres.stop()
        self.nats.stop()


def variant(photo: bytes, n: int) -> bytes:
    """``photo`` with a comment segment naming ``n``: the same picture, another file."""
    text = f"switchboard bench {n}".encode()
    return photo[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + photo[2:]


async def _ready(client: MediaClient, proc: MediaProcess, probe: bytes) -> None:
    deadline = time.monotonic() + 120
    while True:
        if proc.proc.poll() is not None:
            raise RuntimeError(
                f"media service exited ({proc.proc.returncode}); see {proc.log.name}"
            )
        try:
            await client.ingest_bytes(probe)
            return
        except MediaServiceError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _bench(proc: MediaProcess, photo: bytes, say: Say) -> dict[str, Any]:
    channel = rpc.channel(proc.target, proc.token)
    client = MediaClient(channel)
    try:
        await _ready(client, proc, variant(photo, -1))
        ingest: list[float] = []
        resize: list[float] = []
        size = (0, 0)
        for n in range(WARMUP + ROUNDS):
            data = variant(photo, n)
            start = time.perf_counter()
            ref = await client.ingest_bytes(data)
            took_ingest = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            made = await client.transform(ref.sha256, "resize", MAX_EDGE, MAX_EDGE, "jpeg", 85)
            took_resize = (time.perf_counter() - start) * 1000
            size = (made.width, made.height)
            if n >= WARMUP:
                ingest.append(took_ingest)
                resize.append(took_resize)
        out: dict[str, Any] = {
            "image": {"width": 4000, "height": 3000, "bytes": len(photo), "resized_to": size},
            "rounds": ROUNDS,
            "ingest_ms": summarize(ingest),
            "resize_ms": summarize(resize),
            "targets": {"resize_ms_p50": TARGET_RESIZE_P50_MS},
        }
        say(
            f"[media] 12 MP JPEG ({len(photo) / 1e6:.1f} MB): ingest p50"
            f" {out['ingest_ms']['p50']:.0f} ms, resize to {size[0]}x{size[1]} p50"
            f" {out['resize_ms']['p50']:.0f} ms"
        )
        return out
    finally:
        await channel.close()


def bench_media(say: Say) -> dict[str, Any]:
    say("[media] making a 12-megapixel JPEG")
    photo = noise_jpeg(4000, 3000)
    with fresh_home() as home:
        proc = MediaProcess(home)
        try:
            return asyncio.run(_bench(proc, photo, say))
        finally:
            proc.stop()


def markdown(m: dict[str, Any]) -> list[str]:
    i, r = m["ingest_ms"], m["resize_ms"]
    w, h = m["image"]["resized_to"]
    return [
        "",
        "## Media (ingest and resize)",
        "",
        f"A 4000 x 3000 JPEG ({m['image']['bytes'] / 1e6:.1f} MB) through the media service's"
        f" gRPC API, {m['rounds']} distinct files: `Ingest` (streamed, sniffed, checked, fully"
        f" decoded, stored) and `Transform` resize to {w} x {h} (JPEG).",
        "",
        "| step | p50 ms | p99 ms |",
        "|---|---|---|",
        f"| ingest | {i['p50']:.1f} | {i['p99']:.1f} |",
        f"| resize | {r['p50']:.1f} | {r['p99']:.1f} |",
        "",
        f"Target: resize <= {m['targets']['resize_ms_p50']:.0f} ms (p50 {r['p50']:.1f} ms).",
    ]
