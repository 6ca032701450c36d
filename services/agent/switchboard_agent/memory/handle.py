"""The runner's one handle on memory: before a run, the agent's memory files are refreshed (in
the background) and, when ``SB_MEMORY_RECALL_K`` > 0, memories relevant to the message are
offered in the system prompt; after the run commits, the turn is queued for indexing."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from switchboard.sessions import is_subagent
from switchboard.trust import Standing

from ..tools.local import LocalTool
from .client import MemoryClient, MemoryRefused, MemoryUnavailable, NoMemoryYet
from .scope import ScopeMode, memory_user
from .sync import FinishedTurn, MemoryFiles, TurnSync
from .tools import memory_tools

log = logging.getLogger(__name__)
RECALL_TIMEOUT_S = 2.0


class AgentMemory:
    def __init__(
        self,
        client: MemoryClient,
        mode: ScopeMode,
        workspace_root: Path,
        recall_k: int = 0,
        sync_turns: bool = True,
        sync_quiet_s: float = 1.0,
    ) -> None:
        self.client = client
        self.mode = mode
        self.recall_k = recall_k
        self.files = MemoryFiles(client, workspace_root)
        self.turns = TurnSync(client, mode, quiet_s=sync_quiet_s) if sync_turns else None
        self._background: set[asyncio.Task[None]] = set()

    def tools(self) -> list[LocalTool]:
        return list(memory_tools(self.client, self.mode))

    def start(self) -> None:
        if self.turns is not None:
            self.turns.start()

    async def close(self) -> None:
        if self.turns is not None:
            await self.turns.close()
        for task in list(self._background):
            task.cancel()

    def before_run(self, agent: str) -> None:
        task = asyncio.create_task(self.files.refresh(agent))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def recall(self, agent: str, session_key: str, text: str, standing: Standing) -> str:
        """A system-prompt section of the memories most relevant to ``text``, from the scope
        of the run's ``standing`` ("" when off, empty or unavailable: the run goes on
        without)."""
        if self.recall_k <= 0 or not text.strip():
            return ""
        try:
            found = await asyncio.wait_for(
                self.client.search(
                    agent,
                    memory_user(session_key, self.mode, standing),
                    text[:2000],
                    self.recall_k,
                ),
                RECALL_TIMEOUT_S,
            )
        except (NoMemoryYet, MemoryUnavailable, MemoryRefused, TimeoutError) as exc:
            log.info("no memories recalled: %s", type(exc).__name__)
            return ""
        if not found.hits:
            return ""
        lines = [f"- {h.text}" for h in found.hits]
        return "## Recalled memories (from earlier conversations; may be outdated)\n" + "\n".join(
            lines
        )

    def after_commit(
        self,
        agent: str,
        session_key: str,
        run_id: str,
        user_text: str,
        reply: str,
        standing: Standing,
    ) -> None:
        """Queue the committed turn for indexing, in the scope of the run's ``standing``."""
        if self.turns is None or is_subagent(session_key):
            return  # a sub-agent's work reaches memory through its parent's answer
        now = int(time.time() * 1000)
        self.turns.submit(FinishedTurn(agent, session_key, run_id, user_text, reply, now, standing))
