"""The memory tools, run by the agent itself (the memory service is its gRPC callee):
``memory_search`` (``{"query", "k"}``), ``memory_get`` (``{"path", "from_line", "lines"}``) and
``memory_store`` (``{"text"}``). Each works in the run's scope (:mod:`.scope`: its session
and standing), so a group chat never reads a private conversation's memory, one person never
another's, and only the owner's standing the agent's own (with ``MEMORY.md``). They are
``group:memory`` for the tool policy; sub-agents are denied ``memory_store`` by default.

A failure of the memory service is a tool error the model can read, never a failed run."""

from __future__ import annotations

from datetime import UTC, datetime

from switchboard.toolspec import ToolSpec
from switchboard.v1 import memory_pb2

from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
from .client import MemoryClient, MemoryRefused, MemoryUnavailable, NoMemoryYet
from .scope import ScopeMode, memory_user

MAX_QUERY = 2000
MAX_NOTE = 4000
UNAVAILABLE = "Memory is unavailable right now; go on without it and try again later."


def _where(hit: memory_pb2.SearchHit) -> str:
    if hit.path:
        return f"{hit.path}:{hit.start_line}-{hit.end_line}"
    if hit.created_at_ms:
        day = datetime.fromtimestamp(hit.created_at_ms / 1000, UTC).strftime("%Y-%m-%d")
        return f"{hit.source}, {day}"
    return hit.source


def render_hits(found: memory_pb2.SearchResponse) -> str:
    lines = [
        f"[{n}] ({_where(h)}, score {h.score:.3f}) {h.text}" for n, h in enumerate(found.hits, 1)
    ]
    text = "\n".join(lines) if lines else "No matching memories."
    if found.degraded:
        text += f"\n(Note: {found.degraded}.)"
    return text


class _MemoryTool:
    def __init__(self, client: MemoryClient, mode: ScopeMode) -> None:
        self.client = client
        self.mode = mode

    def user(self, ctx: LocalContext) -> str:
        return memory_user(ctx.session_key, self.mode, ctx.standing)

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        try:
            return await self.act(ctx, call)
        except MemoryUnavailable:
            return tool_error(call, UNAVAILABLE, "memory_unavailable")
        except MemoryRefused as exc:
            return tool_error(call, f"{self.spec.name}: {exc}", "invalid_arguments")

    @property
    def spec(self) -> ToolSpec:
        raise NotImplementedError

    async def act(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        raise NotImplementedError


class MemorySearch(_MemoryTool):
    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            "memory_search",
            "Search long-term memory: notes stored with memory_store, the memory files"
            " (MEMORY.md, memory/*.md), earlier conversations and ingested documents. Use it"
            " before answering about the user's preferences, people, plans or past talks.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            groups=("memory",),
        )

    async def act(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        k = int(call.args.get("k", 5))
        try:
            found = await self.client.search(ctx.agent, self.user(ctx), call.args["query"], k)
        except NoMemoryYet:
            return CallResult(call.call_id, "No memories yet.", False, {"hits": 0})
        details = {"hits": len(found.hits), "mode": found.mode}
        if found.degraded:
            details["degraded"] = found.degraded
        return CallResult(call.call_id, render_hits(found), False, details)


class MemoryGet(_MemoryTool):
    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            "memory_get",
            "Read lines of a memory file or an ingested document, e.g. a path a memory_search"
            " result named (path:from-to).",
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 512},
                    "from_line": {"type": "integer", "minimum": 1, "default": 1},
                    "lines": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 200},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            groups=("memory",),
        )

    async def act(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        args = call.args
        try:
            got = await self.client.get(
                ctx.agent,
                self.user(ctx),
                args["path"],
                int(args.get("from_line", 1)),
                int(args.get("lines", 200)),
            )
        except NoMemoryYet:
            return tool_error(call, f"No memory file or document {args['path']!r}.", "not_found")
        head = f"{got.path} lines {got.from_line}-{got.to_line} of {got.total_lines}:"
        return CallResult(call.call_id, f"{head}\n{got.text}", False, {"path": got.path})


class MemoryStore(_MemoryTool):
    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            "memory_store",
            "Remember a durable fact for later conversations (a preference, a name, a date, a"
            " decision). One self-contained statement per call.",
            {
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE}},
                "required": ["text"],
                "additionalProperties": False,
            },
            groups=("memory",),
        )

    async def act(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        done = await self.client.store(
            ctx.agent, self.user(ctx), call.args["text"], ctx.session_key
        )
        details: dict[str, object] = {"id": done.ids[0] if done.ids else ""}
        text = "Stored."
        if done.degraded:
            details["degraded"] = done.degraded
            text = "Stored (searchable by keywords until embeddings are available)."
        return CallResult(call.call_id, text, False, details)


def memory_tools(client: MemoryClient, mode: ScopeMode) -> list[_MemoryTool]:
    return [MemorySearch(client, mode), MemoryGet(client, mode), MemoryStore(client, mode)]
