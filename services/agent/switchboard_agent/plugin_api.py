"""What a plugin of the agent imports: the manifest, the API its ``setup`` gets, the types of
its tools and hooks (see :mod:`switchboard.plugins`, :mod:`.plugin_host`, :mod:`.hooks`)."""

from switchboard.plugins import Manifest

from .hooks import (
    Block,
    HookName,
    MessageEvent,
    ModelCall,
    Rewrite,
    RunInfo,
    SessionEvent,
    ToolCallEvent,
    ToolOutcome,
)
from .local_tools import LocalContext, tool_error
from .plugin_host import AgentPluginApi
from .providers.base import ModelRequest, ToolSpec
from .tools_client import CallRequest, CallResult

__all__ = [
    "AgentPluginApi",
    "Block",
    "CallRequest",
    "CallResult",
    "HookName",
    "LocalContext",
    "Manifest",
    "MessageEvent",
    "ModelCall",
    "ModelRequest",
    "Rewrite",
    "RunInfo",
    "SessionEvent",
    "ToolCallEvent",
    "ToolOutcome",
    "ToolSpec",
    "tool_error",
]
