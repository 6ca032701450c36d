"""Memory retrieval on LoCoMo (issue 11): every turn of the 10 conversations indexed through the
memory service's real ``Upsert``, every question of categories 1-4 (and 5) asked through its real
``Search``, recall@k of the evidence turns per category.

The service runs as its own process (``python -m switchboard_memory``, the default local model,
Qdrant local mode) against a nats-server and a PostgreSQL this module starts; the bench talks to
it over gRPC like the agent does, so the latency is what a ``memory_search`` sees.

The data set is read from ``../shared/bench/locomo/locomo10.json`` (or ``SB_LOCOMO_PATH``),
never copied into the repository: its licence is CC BY-NC 4.0.
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

import grpc

from switchboard import rpc
from switchboard.embedded import NatsServer, Postgres, free_port
from switchboard.v1 import memory_pb2, memory_pb2_grpc
from tests.bench.locomo import Conversation, Question, load_locomo
from tests.bench.run import fresh_home
from tests.bench.stats import summarize

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo" / "locomo10.json"
KS = (1, 5, 10, 20)
UPSERT_BATCH = 64
TARGET_RECALL_AT_10 = 0.68
TARGET_SEARCH_P50_MS = 15.0
Say = Callable[[str], None]


def data_path() -> Path:
    return Path(os.environ.get("SB_LOCOMO_PATH") or DEFAULT_DATA)


class MemoryProcess:
    """``python -m switchboard_memory`` with its own NATS, PostgreSQL and home."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.nats = NatsServer(home / "nats").start()
        self.postgres = Postgres(home / "pg")
        database_url = self.postgres.start()
        self.port = free_port()
        self.token = "bench-" + os.urandom(16).hex()
        self.log = (home / "memory.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "switchboard_memory"],
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
                "SB_HOME": str(home),
                "SB_NATS_URL": self.nats.url,
                "SB_DATABASE_URL": database_url,
                "SB_SERVICE_TOKEN": self.token,
                "SB_MEMORY_GRPC_PORT": str(self.port),
                "SB_LOG_LEVEL": "WARNING",
                **(env or {}),
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


async def _ready(stub: memory_pb2_grpc.MemoryStub, proc: MemoryProcess, timeout: float) -> None:
    """Until the service embeds (the local model is loaded)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.proc.poll() is not None:
            raise RuntimeError(
                f"memory service exited ({proc.proc.returncode}); see {proc.log.name}"
            )
        try:
            await stub.Embed(memory_pb2.EmbedRequest(texts=["ready?"]), timeout=60)
            return
        except grpc.aio.AioRpcError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _index(stub: memory_pb2_grpc.MemoryStub, conversations: list[Conversation]) -> float:
    """Upsert every turn; the turns per second."""
    start = time.perf_counter()
    total = 0
    for conv in conversations:
        scope = memory_pb2.MemoryScope(agent=conv.agent)
        items = [
            memory_pb2.MemoryItem(
                text=turn.document,
                source="session",
                id=turn.dia_id,
                session_key=f"{conv.agent}:locomo:{turn.session}",
                metadata={"dia_id": turn.dia_id},
                created_at_ms=turn.at_ms,
            )
            for turn in conv.turns
        ]
        for i in range(0, len(items), UPSERT_BATCH):
            await stub.Upsert(
                memory_pb2.UpsertRequest(scope=scope, items=items[i : i + UPSERT_BATCH]),
                timeout=300,
            )
        total += len(items)
    return total / (time.perf_counter() - start)


async def _ask(
    stub: memory_pb2_grpc.MemoryStub, questions: list[Question], mode: str
) -> tuple[dict[str, dict[int, float]], list[float]]:
    """Recall@k per category (and overall 1-4, 1-5) and each search's latency in ms."""
    hits_at: dict[str, list[dict[int, float]]] = {}
    times: list[float] = []
    for q in questions:
        start = time.perf_counter()
        found = await stub.Search(
            memory_pb2.SearchRequest(
                scope=memory_pb2.MemoryScope(agent=q.agent), query=q.text, k=max(KS), mode=mode
            ),
            timeout=30,
        )
        times.append((time.perf_counter() - start) * 1000)
        ranked = [h.metadata.get("dia_id", "") for h in found.hits]
        recall = {k: len(q.evidence & set(ranked[:k])) / len(q.evidence) for k in KS}
        groups = [str(q.category), "overall_1_5"] + (["overall"] if q.category != 5 else [])
        for group in groups:
            hits_at.setdefault(group, []).append(recall)
    table = {
        group: {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in KS}
        for group, rows in hits_at.items()
    }
    return table, times


async def _bench(proc: MemoryProcess, data: Path, say: Say) -> dict[str, Any]:
    conversations, questions = load_locomo(data)
    channel = rpc.channel(proc.target, proc.token)
    stub = memory_pb2_grpc.MemoryStub(channel)
    try:
        load_start = time.monotonic()
        await _ready(stub, proc, timeout=180)
        say(f"[memory] service embedding after {time.monotonic() - load_start:.1f}s")
        turns = sum(len(c.turns) for c in conversations)
        rate = await _index(stub, conversations)
        say(f"[memory] indexed {turns} turns at {rate:.0f} turns/s")
        out: dict[str, Any] = {
            "data": {
                "conversations": len(conversations),
                "turns": turns,
                "questions": len(questions),
            },
            "ingest_turns_per_s": round(rate, 1),
        }
        for mode in ("hybrid", "vector", "keyword"):
            table, times = await _ask(stub, questions, mode)
            entry = {"recall": table, "search_ms": summarize(times)}
            say(
                f"[memory] {mode}: R@10 {table['overall'][10]:.3f} (cats 1-4),"
                f" search p50 {entry['search_ms']['p50']:.1f} ms"
            )
            out.setdefault("modes", {})[mode] = entry
        hybrid = out["modes"]["hybrid"]
        out["locomo"] = {f"recall_at_{k}": hybrid["recall"]["overall"][k] for k in KS} | {
            "by_category": hybrid["recall"]
        }
        out["search_ms"] = hybrid["search_ms"]
        # Embedded mode's default (SB_EMBEDDING_PROVIDER=none) searches the same keyword vectors
        # as the keyword mode here: its figures are that mode's.
        keyword = out["modes"]["keyword"]
        out["embedded_default"] = {
            "provider": "none",
            "recall_at_10": keyword["recall"]["overall"][10],
            "search_ms_p50": keyword["search_ms"]["p50"],
        }
        out["targets"] = {
            "recall_at_10": TARGET_RECALL_AT_10,
            "search_ms_p50": TARGET_SEARCH_P50_MS,
        }
        return out
    finally:
        await channel.close()


def bench_memory(say: Say, env: dict[str, str] | None = None) -> dict[str, Any]:
    data = data_path()
    if not data.is_file():
        return {"skipped": f"LoCoMo data not found at {data} (set SB_LOCOMO_PATH)"}
    with fresh_home() as home:
        proc = MemoryProcess(home, env)
        try:
            return asyncio.run(_bench(proc, data, say))
        finally:
            proc.stop()


def markdown(m: dict[str, Any]) -> list[str]:
    if "skipped" in m:
        return ["", "## Memory (LoCoMo)", "", f"Skipped: {m['skipped']}"]
    lines = [
        "",
        "## Memory (LoCoMo retrieval)",
        "",
        f"{m['data']['turns']} turns of {m['data']['conversations']} conversations indexed"
        f" through `Upsert` at {m['ingest_turns_per_s']:.0f} turns/s; each question asked"
        " through `Search` (k = 20). Recall of the evidence turns; overall = categories 1-4.",
        "",
        "| mode | group | R@1 | R@5 | R@10 | R@20 | search p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, entry in m["modes"].items():
        ms = entry["search_ms"]
        for group in ("overall", "1", "2", "3", "4", "overall_1_5"):
            r = entry["recall"].get(group)
            if r is None:
                continue
            timing = f"{ms['p50']:.1f} | {ms['p99']:.1f}" if group == "overall" else " | "
            lines.append(
                f"| {mode} | {group} | {r[1]:.3f} | {r[5]:.3f} | {r[10]:.3f} | {r[20]:.3f}"
                f" | {timing} |"
            )
    t = m["targets"]
    lines += [
        "",
        f"Targets: R@10 >= {t['recall_at_10']} overall (hybrid: {m['locomo']['recall_at_10']:.3f}),"
        f" search p50 <= {t['search_ms_p50']} ms (hybrid: {m['search_ms']['p50']:.1f} ms).",
    ]
    if "embedded_default" in m:
        e = m["embedded_default"]
        lines.append(
            f"Embedded mode's default, keyword-only memory (`SB_EMBEDDING_PROVIDER=none`, the"
            f" keyword rows): R@10 {e['recall_at_10']:.3f}, search p50 {e['search_ms_p50']:.1f} ms."
        )
    return lines
