"""MCP servers as data: ``SB_MCP_SERVERS``, a JSON list of :class:`McpServerConfig`, mixed into
:class:`switchboard_tools.config.ToolsSettings` by :class:`McpSettings`.

One entry per server, e.g.::

    [{"name": "files", "command": "python3", "args": ["-m", "my_server"], "env": {"K": "v"},
      "read_paths": ["/opt/my_server"], "agents": ["main"], "deny": ["delete_*"]},
     {"name": "search", "url": "https://mcp.example.com/mcp",
      "headers": {"Authorization": "Bearer ..."}, "agents": "*", "timeout_s": 30}]

- ``name``: ``[a-z0-9_-]`` (no ``__``), the namespace of its tools: the model sees
  ``<name>__<tool>``.
- stdio: ``command`` + ``args`` + ``env`` (added to the sandbox's minimal environment),
  ``read_paths`` (paths it may read besides the system directories, read-only), ``network``
  (default ``false``: no network inside the sandbox).
- streamable HTTP: ``url`` + ``headers``. Exactly one of ``command`` and ``url``.
- ``agents``: the agents that are offered its tools, or ``"*"`` (default) for every agent.
- ``allow`` / ``deny``: shell-style patterns of the server's own tool names; a tool is offered
  when it matches an ``allow`` pattern (default ``["*"]``) and no ``deny`` pattern.
- ``timeout_s``: the longest one call may take (default 60; the call's own budget, when
  shorter, wins).
"""

from __future__ import annotations

import fnmatch
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_NAME = r"^[a-z0-9][a-z0-9_-]*$"


class McpServerConfig(BaseModel):
    """One MCP server (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=32, pattern=_NAME)]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold secrets
    read_paths: list[str] = Field(default_factory=list)
    network: bool = False
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    agents: Literal["*"] | list[Annotated[str, Field(pattern=r"^[a-z0-9_-]{1,64}$")]] = "*"
    allow: list[str] = Field(default_factory=lambda: ["*"])
    deny: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("name")
    @classmethod
    def _no_separator(cls, name: str) -> str:
        if "__" in name:
            raise ValueError(f"{name!r}: '__' separates a server's name from its tools' names")
        return name

    @field_validator("read_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/") or "\0" in path:
                raise ValueError(f"read_paths must be absolute paths, got {path!r}")
        return paths

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command and url")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {self.name!r}: url must be http:// or https://")
        if self.url is None and self.headers:
            raise ValueError(f"MCP server {self.name!r}: headers are for url servers")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def serves(self, agent: str | None) -> bool:
        """Whether ``agent`` is offered this server's tools (``None``: a caller that did not
        say, offered only the servers of every agent)."""
        if self.agents == "*":
            return True
        return agent is not None and agent in self.agents

    def offers(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` passes ``allow`` and ``deny``."""
        allowed = any(fnmatch.fnmatchcase(tool, p) for p in self.allow)
        return allowed and not any(fnmatch.fnmatchcase(tool, p) for p in self.deny)


class McpSettings(BaseSettings):
    """``SB_MCP_SERVERS``: see the module docstring."""

    model_config = SettingsConfigDict(env_prefix="SB_", extra="ignore", frozen=True)

    # JSON list of MCP servers whose tools are offered (stdio in the sandbox, or streamable HTTP);
    # see mcp/config.py.
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)

    @field_validator("mcp_servers")
    @classmethod
    def _unique(cls, servers: list[McpServerConfig]) -> list[McpServerConfig]:
        names = [s.name for s in servers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate MCP server names: {', '.join(duplicates)}")
        return servers
