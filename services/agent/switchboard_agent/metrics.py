"""Agent runtime metrics."""

from prometheus_client import Counter, Gauge, Histogram

RUNS = Counter("sb_agent_runs_total", "Agent runs", ["status"])
RUN_SECONDS = Histogram("sb_agent_run_seconds", "Agent run duration")
LANE_WAIT_SECONDS = Histogram("sb_lane_wait_seconds", "Time from lane enqueue to run start")
ACTIVE_RUNS = Gauge("sb_agent_active_runs", "Runs in progress on this replica")
LLM_SECONDS = Histogram("sb_llm_call_seconds", "Model call latency", ["provider", "model"])
LLM_TOKENS = Counter("sb_llm_tokens_total", "Model tokens", ["provider", "model", "kind"])
TOOL_CALLS = Counter("sb_agent_tool_calls_total", "Tool calls dispatched", ["tool", "outcome"])
REDELIVERIES = Counter("sb_lane_redeliveries_total", "Lane items delivered more than once")
LEASES = Counter("sb_lane_leases_total", "Lane lease operations", ["outcome"])
ACTIVE_LANES = Gauge("sb_agent_active_lanes", "Lanes this replica owns right now")
INTERRUPTS = Counter("sb_agent_interrupted_runs_total", "Runs aborted by a newer message")
STEERED = Counter("sb_agent_steered_messages_total", "Messages injected into an active run")
APPROVALS = Counter("sb_agent_approvals_total", "Tool-call approvals by outcome", ["outcome"])
POLICY_DENIALS = Counter("sb_agent_policy_denials_total", "Tool calls refused by policy", ["tool"])
CHAT_DECISIONS = Counter(
    "sb_agent_chat_decisions_total", "Approval decisions asked for from a chat", ["outcome"]
)
APPROVAL_NOTICES = Counter(
    "sb_agent_approval_notices_total", "Notices of calls waiting for approval", ["outcome"]
)
ABORTS = Counter("sb_agent_aborted_runs_total", "Runs aborted on request (WebChat's abort)")
SESSION_COMMANDS = Counter(
    "sb_agent_session_commands_total",
    "Session commands from a chat (/new, /reset, /stop, /status, /model), by outcome",
    ["outcome"],
)
# Model failover (providers/failover.py) and budgets (runs/budget.py).
FAILOVERS = Counter(
    "sb_agent_failovers_total",
    "Model calls moved to another model or profile",
    ["from", "to", "reason"],
)
LLM_COST = Counter(
    "sb_llm_cost_usd_total", "Model cost in US dollars (SB_PRICES)", ["model", "agent"]
)
LLM_UNPRICED = Counter(
    "sb_llm_unpriced_calls_total", "Model calls without an SB_PRICES entry", ["model"]
)
BUDGET_STOPS = Counter(
    "sb_agent_budget_stops_total", "Runs stopped by an SB_BUDGET limit", ["limit", "agent"]
)
USAGE_WRITE_ERRORS = Counter(
    "sb_agent_usage_write_errors_total", "Usage rows that could not be written (runs/budget.py)"
)
HOOK_ERRORS = Counter(
    "sb_agent_hook_errors_total",
    "Plugin hooks that raised, timed out or returned what they may not",
    ["plugin", "hook"],
)
# Sub-agents (subagents/children.py): children started, and how the waited-for and background ones
# ended.
SUBAGENTS = Counter(
    "sb_agent_subagents_total", "Sub-agent children by mode and outcome", ["mode", "outcome"]
)
# Compaction (compaction/compactor.py).
COMPACTIONS = Counter(
    "sb_agent_compactions_total",
    "Transcripts compacted (threshold, overflow, manual)",
    ["reason"],
)
FLUSHED_FACTS = Counter(
    "sb_agent_memory_flush_facts_total",
    "Facts stored by the memory flush before a compaction (memory, file)",
    ["to"],
)
