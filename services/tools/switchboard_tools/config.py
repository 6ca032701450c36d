"""Tool executor settings."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from switchboard.settings import CommonSettings


class ToolsSettings(CommonSettings):
    workspaces_dir: Path | None = None
    tools_max_concurrency: int = Field(default=8, ge=1, le=1000)
    tools_max_timeout_s: float = Field(default=300.0, gt=0)
    exec_allowlist: list[str] | None = None

    def workspace_root(self) -> Path:
        return self.workspaces_dir or self.home / "workspaces"
