"""``sbstrict``: its configuration needs an integer ``level``; the test gives it a string, so
the agent must skip it (and say so) and start anyway."""

from __future__ import annotations

from switchboard_agent.plugins.api import AgentPluginApi, Manifest

SCHEMA = {
    "type": "object",
    "properties": {"level": {"type": "integer"}},
    "required": ["level"],
}


class StrictPlugin:
    manifest = Manifest("sbstrict", "1.0.0", frozenset({"tools"}), config_schema=SCHEMA)

    def setup(self, api: AgentPluginApi) -> None:
        raise AssertionError("setup must not run with an invalid configuration")


plugin = StrictPlugin()
