"""``sbflaky``: hooks that fail: ``after_tool_call`` raises, ``message_sent`` never returns
(the agent's hook deadline ends it). The runs must go on as if they were not there."""

from __future__ import annotations

import asyncio

from switchboard_agent.plugins.api import AgentPluginApi, Manifest, MessageEvent, ToolOutcome


class FlakyPlugin:
    manifest = Manifest("sbflaky", "0.0.1", frozenset({"hooks"}))

    def setup(self, api: AgentPluginApi) -> None:
        async def after_tool_call(outcome: ToolOutcome) -> None:
            raise RuntimeError(f"sbflaky cannot cope with {outcome.name}")

        async def message_sent(event: MessageEvent) -> None:
            await asyncio.sleep(3600)

        api.register_hook("after_tool_call", after_tool_call)
        api.register_hook("message_sent", message_sent)


plugin = FlakyPlugin()
