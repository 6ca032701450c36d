"""What a started memory service has imported: with the defaults (Qdrant Edge, the local model)
neither qdrant-client nor the openai SDK, and nothing of the model (NumPy, tokenizers) until
the first embedding. Checked in a fresh interpreter (a subprocess), so that what other tests
imported does not count; the service runs against the real NATS and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import asyncio, json, os, sys, time
import grpc, nats
from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.runtime import service_ready
from switchboard.v1 import memory_pb2, memory_pb2_grpc
from switchboard_memory.config import MemorySettings
from switchboard_memory.server import serve

WATCHED = ["qdrant_client", "openai", "numpy", "tokenizers", "switchboard_memory.local_model"]


def imported():
    return {name: name in sys.modules for name in WATCHED}


async def main():
    port = free_port()
    token = "memory-probe-" + os.urandom(12).hex()
    settings = MemorySettings.from_environ({
        "SB_NATS_URL": os.environ["PROBE_NATS"], "SB_DATABASE_URL": os.environ["PROBE_DB"],
        "SB_HOME": os.environ["PROBE_HOME"], "SB_OPS_HOST": "127.0.0.1",
        "SB_SERVICE_TOKEN": token, "SB_MEMORY_GRPC_PORT": str(port),
    })
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(os.environ["PROBE_NATS"])
    deadline = time.monotonic() + 60
    while True:
        assert not task.done() and time.monotonic() < deadline, "memory not ready"
        try:
            if await service_ready(nc, bus.Subjects(), "memory", timeout=1):
                break
        except Exception:  # no responder yet
            pass
        await asyncio.sleep(0.05)
    out = {"ready": imported()}
    channel = rpc.channel(f"127.0.0.1:{port}", token)
    stub = memory_pb2_grpc.MemoryStub(channel)
    scope = memory_pb2.MemoryScope(agent="main")
    try:
        await stub.Search(memory_pb2.SearchRequest(scope=scope, query="x", mode="keyword"))
    except grpc.aio.AioRpcError as exc:
        out["keyword_search"] = exc.code().name  # nothing stored yet: NOT_FOUND
    out["after_keyword_search"] = imported()
    answer = await stub.Embed(memory_pb2.EmbedRequest(texts=["A man is eating food."]))
    out["dimension"] = answer.dimension
    out["after_embed"] = imported()
    await channel.close()
    await nc.close()
    stop.set()
    await asyncio.wait_for(task, 30)
    print(json.dumps(out))


asyncio.run(main())
"""


def test_the_default_service_imports_only_what_it_uses(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    env = {
        "PROBE_NATS": nats_url,
        "PROBE_DB": database_url,
        "PROBE_HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    nothing = dict.fromkeys(
        ["qdrant_client", "openai", "numpy", "tokenizers", "switchboard_memory.local_model"],
        False,
    )
    assert out["ready"] == nothing
    assert out["keyword_search"] == "NOT_FOUND"
    assert out["after_keyword_search"] == nothing
    assert out["dimension"] == 384
    assert out["after_embed"] == {
        **nothing,
        "numpy": True,
        "tokenizers": True,
        "switchboard_memory.local_model": True,
    }
