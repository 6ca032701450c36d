"""Tool executor settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from switchboard.settings import CommonSettings
from switchboard_tools.a2a_settings import A2ASettings
from switchboard_tools.mcp.config import McpSettings
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.sandbox.settings import ExecSettings

# The durable consumer of the TOOLS stream every executor pulls from (Kubernetes' KEDA
# ScaledObject scales the executors on its backlog: k8s/components/autoscaling/tools.yaml).
CONSUMER = "executor"


class ToolsSettings(CommonSettings, WebSettings, ExecSettings, A2ASettings, McpSettings):
    """The executor's settings; MCP servers: ``SB_MCP_SERVERS`` (see
    :mod:`switchboard_tools.mcp.config`); remote A2A agents: ``SB_A2A_AGENTS``."""

    workspaces_dir: Path | None = None
    # Tool calls one executor replica runs at once.
    tools_max_concurrency: int = Field(default=8, ge=1, le=1000)
    # The longest any tool call may run, whatever the call asks for.
    tools_max_timeout_s: float = Field(default=300.0, gt=0)
    # JSON list of the programs exec may run (allowlist mode); unset: a small read-only set.
    exec_allowlist: list[str] | None = None
    # The process tool (long-running commands): per agent, lifetime, ring buffer per process.
    process_max_per_agent: int = Field(default=4, ge=1, le=100)
    # The longest a background process may live.
    process_max_lifetime_s: float = Field(default=3600.0, gt=0)
    # Bytes of output kept per background process (a ring buffer).
    process_output_cap: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024)
    # Whose workspace a call works in: "agent" = <root>/<agent>, shared by every session of
    # the agent; "session" = <root>/<agent>/sessions/<session dir>, one per session key.
    workspace_scope: Literal["agent", "session"] = "agent"
    # Largest JSON arguments of one tool call (UTF-8 bytes), refused before parsing.
    tool_args_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)

    def workspace_root(self) -> Path:
        return self.workspaces_dir or self.home / "workspaces"
