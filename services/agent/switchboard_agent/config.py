"""Agent runtime settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, model_validator

from switchboard.plugins import PluginSettings
from switchboard.queue_modes import QueueMode
from switchboard.settings import CommonSettings, DatabaseSettings, ModelSettings, RpcSettings
from switchboard.skills import SkillSettings
from switchboard.trust import GROUP_PROFILE, Visibility

from .approvals.rules import ApprovalRules
from .approvals.toolgate import ToolRules
from .compaction.config import CompactionSettings
from .providers.failover_config import FailoverSettings
from .runs.budget import BudgetSettings
from .subagents.config import SubagentSettings
from .tools.message import MessageTarget, check_targets
from .tools.policy import FULL_POLICY, ToolPolicy, group_layer


def check_timezone(zone: str) -> None:
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone: {zone!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')"
        ) from None


class AgentSettings(
    CommonSettings,
    DatabaseSettings,
    ModelSettings,
    RpcSettings,
    FailoverSettings,
    BudgetSettings,
    SkillSettings,  # SB_SKILLS_DIRS (workspace/skills.py)
    PluginSettings,  # SB_PLUGINS, SB_PLUGINS_CONFIG (plugins/host.py)
    SubagentSettings,
    CompactionSettings,
):
    # Where the agent's gRPC listens (embedded mode: 127.0.0.1).
    agent_grpc_host: str = "127.0.0.1"  # Compose and Kubernetes open it
    # Port of the agent's gRPC (Sessions, Approvals, ToolAccess).
    agent_grpc_port: int = Field(default=50051, ge=0, le=65535)
    # Rounds of the LLM tool loop one run may make.
    max_iterations: int = Field(default=8, ge=1, le=100)
    # The most tokens one model answer may have.
    max_tokens: int = Field(default=4096, ge=1)
    # Runs one agent replica works on at once.
    agent_max_concurrent_runs: int = Field(default=16, ge=1, le=1000)
    # How long a run waits for one tool call of the executor.
    tool_timeout_s: float = Field(default=60.0, gt=0)
    workspaces_dir: Path | None = None
    # What a message arriving during a run does (queue, collect, ...); a channel's or a session's
    # mode wins.
    queue_mode: QueueMode = QueueMode.QUEUE
    # The collect mode's window: messages this close together become one turn.
    collect_debounce_ms: int = Field(default=2000, ge=0, le=600_000)
    # How long a lane dispatch may stay unacknowledged (a live run keeps it alive every third of
    # it): a dead replica's lanes reach another replica this long after its last keepalive.
    lane_ack_wait_s: float = Field(default=15.0, ge=1.0, le=600.0)
    # Tool policy (see tools/policy.py): {"profile", "allow", "deny"} for every agent, per agent id,
    # and for sub-agent sessions; approval rules like "exec:command=rm *" (approvals/rules.py).
    tool_policy: dict[str, Any] | None = None
    # Per agent id, a JSON tool policy ({"main": {"profile", "allow", "deny"}}).
    agent_tool_policies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The tool policy of sub-agent sessions (JSON {"profile", "allow", "deny"}).
    subagent_tool_policy: dict[str, Any] | None = None
    # JSON list of approval rules ("exec", "exec:command=rm *", "group:fs_write"): matching calls
    # wait for a person's decision.
    tool_approvals: list[str] = Field(default_factory=list)
    # How long a call waits for a person's approval decision.
    approval_timeout_s: float = Field(default=3600.0, gt=0)
    # Trust between people (docs/trust.md): the layer over the agent's policy for runs of a
    # group's standing (a profile name or {"profile", "allow", "deny"}; "full": none), and how
    # far the session tools see (agent and all: only from the owner's standing).
    group_tool_profile: str | dict[str, Any] = GROUP_PROFILE
    # Which sessions the session tools see: self, tree, agent or all (the last two only from the
    # owner's standing).
    session_visibility: Visibility = Visibility.TREE
    # The chats the `message` tool may address by name (tools/message.py; from the owner's
    # standing only). Who may decide approvals from a chat is the router's stamp (its
    # SB_OWNERS, with SB_APPROVERS folded in): approvals/chat.py.
    message_targets: dict[str, MessageTarget] = Field(default_factory=dict)
    # Memory (memory/handle.py): the memory service ("" : no memory tools, nothing synced);
    # whose memory a direct session uses ("agent": the agent's own, "user": each person's);
    # memories offered in the system prompt per run (0: none, the model searches itself);
    # whether finished turns are indexed.
    memory_addr: str = "127.0.0.1:50053"
    # Whose memory the owner's direct sessions use: agent (the agent's own) or user (each person's).
    memory_scope: Literal["agent", "user"] = "agent"
    # Memories put in every run's prompt (0: none, the model searches itself).
    memory_recall_k: int = Field(default=0, ge=0, le=20)
    # Index finished turns in the memory service.
    memory_sync: bool = True
    # Finished turns are indexed once none has finished for this long (at most 10 s after the
    # first waiting one): background indexing yields to live turns (memory/sync.py).
    memory_sync_quiet_ms: int = Field(default=1000, ge=0, le=60_000)
    # The scheduler, for the `cron` tool ("" : no cron tool).
    scheduler_addr: str = "127.0.0.1:50054"
    # Media (media/attachments.py): the media service ("" : attachments become a note, no image
    # tool); the long edge images are resized to for the model (Anthropic's advice: 1568).
    media_addr: str = "127.0.0.1:50055"
    # The long edge images are resized to for the model (Anthropic's advice: 1568).
    image_max_edge: int = Field(default=1568, ge=64, le=8192)
    # The prompt (runs/prompt.py, workspace/files.py): the time zone its clock is in (IANA name;
    # per agent id in agent_timezones), the characters each bootstrap file keeps at most.
    timezone: str = "UTC"
    # Per agent id, the prompt clock's time zone as JSON ({"main": "Europe/Berlin"}).
    agent_timezones: dict[str, str] = Field(default_factory=dict)
    # Characters each workspace bootstrap file keeps at most in the prompt.
    bootstrap_max_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    # The models `/model` (and Patch's model) may pick besides the configured one, as
    # "provider:model" (empty: any model of a configured provider).
    model_choices: list[str] = Field(default_factory=list)
    # Skills and plugins: the characters skill_read returns at most; the deadline of each
    # plugin hook call (plugins/hooks.py).
    skill_max_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    # The deadline of each plugin hook call.
    hook_timeout_s: float = Field(default=5.0, gt=0, le=600)

    @model_validator(mode="after")
    def _check_tool_rules(self) -> AgentSettings:
        self.tool_rules()  # raises PolicyError (a ValueError) with the offending entry
        check_targets(self.message_targets)
        for zone in [self.timezone, *self.agent_timezones.values()]:
            check_timezone(zone)
        return self

    def tool_rules(self) -> ToolRules:
        return ToolRules(
            default=ToolPolicy.from_config(self.tool_policy, "tool_policy")
            if self.tool_policy is not None
            else None,
            per_agent={
                agent: ToolPolicy.from_config(p, f"agent_tool_policies.{agent}")
                for agent, p in self.agent_tool_policies.items()
            },
            subagent=ToolPolicy.from_config(self.subagent_tool_policy, "subagent_tool_policy")
            if self.subagent_tool_policy is not None
            else None,
            approvals=ApprovalRules.parse(self.tool_approvals, "tool_approvals"),
            group=None if (group := group_layer(self)) == FULL_POLICY else group,
        )

    def workspace_root(self) -> Path:
        return self.workspaces_dir or self.home / "workspaces"
