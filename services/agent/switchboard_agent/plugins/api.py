"""What a plugin of the agent imports: the manifest, the API its ``setup`` gets, the types of
its tools (a tool's ``ToolSpec`` declares its policy groups, among ``GROUPS``), hooks and model
providers (see :mod:`switchboard.plugins`, :mod:`.host`,
:mod:`.hooks`, :mod:`..providers.plugin`)."""

from switchboard.plugins import Manifest
from switchboard.toolspec import GROUPS, ToolSpec

from ..providers.base import Model, ModelRequest, ModelResponse, TextDelta, Usage
from ..providers.errors import (
    ModelAuthError,
    ModelContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
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
from .host import AgentPluginApi

__all__ = [
    "GROUPS",
    "AgentPluginApi",
    "Block",
    "CallRequest",
    "CallResult",
    "HookName",
    "LocalContext",
    "Manifest",
    "MessageEvent",
    "Model",
    "ModelAuthError",
    "ModelCall",
    "ModelContextOverflowError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequest",
    "ModelResponse",
    "ModelUnavailableError",
    "Rewrite",
    "RunInfo",
    "SessionEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolOutcome",
    "ToolSpec",
    "Usage",
    "tool_error",
]
