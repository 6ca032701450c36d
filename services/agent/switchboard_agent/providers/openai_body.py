"""The body of a Chat Completions request (openai.py): the canonical (Anthropic-shaped)
transcript as chat messages, and the tool specs, each encoded once per content."""

from __future__ import annotations

import json
from typing import Any

from switchboard.toolspec import ToolSpec

from .base import ModelRequest


def _text_of(content: Any) -> str:
    """Text of a tool_result content: a string, or a list of blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return str(content)


def _image_part(block: dict[str, Any]) -> dict[str, Any] | None:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif source.get("type") == "url":
        url = str(source.get("url", ""))
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_arguments(tool_input: Any) -> str:
    if isinstance(tool_input, dict) and set(tool_input) == {"_raw"}:
        return str(tool_input["_raw"])  # invalid JSON the model produced: send it back as-is
    return json.dumps(tool_input if tool_input is not None else {}, ensure_ascii=False)


def to_openai_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical transcript -> Chat Completions messages.

    System prompt first; assistant tool_use blocks -> ``tool_calls`` (arguments as a JSON
    string); user tool_result blocks -> ``role: "tool"`` messages (placed before any user text
    of the same message, so they directly follow the assistant's tool calls); text blocks of a
    message are joined with blank lines; image blocks become ``image_url`` parts.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content")
        if isinstance(content, str) or content is None:
            out.append({"role": role, "content": content or ""})
            continue
        if role == "assistant":
            texts: list[str] = []
            calls: list[dict[str, Any]] = []
            for block in content:
                btype = block.get("type")
                if btype == "text" and block.get("text"):
                    texts.append(block["text"])
                elif btype == "tool_use":
                    calls.append(
                        {
                            "id": block["id"],
                            "type": "function",
                            "function": {
                                "name": block["name"],
                                "arguments": _tool_arguments(block.get("input")),
                            },
                        }
                    )
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": "\n\n".join(texts) if texts or not calls else None,
            }
            if calls:
                assistant["tool_calls"] = calls
            out.append(assistant)
            continue
        # user (or any other role): tool results first, then the text/images
        parts: list[dict[str, Any]] = []
        has_image = False
        for block in content:
            btype = block.get("type")
            if btype == "tool_result":
                result = _text_of(block.get("content"))
                if block.get("is_error"):
                    result = f"Error: {result}"
                out.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": result}
                )
            elif btype == "text" and block.get("text"):
                parts.append({"type": "text", "text": block["text"]})
            elif btype == "image":
                image = _image_part(block)
                if image is not None:
                    parts.append(image)
                    has_image = True
        if has_image:
            out.append({"role": role, "content": parts})
        elif parts:
            out.append({"role": role, "content": "\n\n".join(p["text"] for p in parts)})
    return out


_TOOL_JSON: dict[tuple[str, str, str], str] = {}
TOOL_JSON_KEPT = 1024  # encoded specs kept (a catalog is tens; a changed one adds entries)


def tool_json(t: ToolSpec) -> str:
    """A tool's entry of a request body, encoded once per spec content: every model call of
    every run sends the same specs (two json.dumps each per call: most of a turn's encoding
    calls), and the key is the content itself, so a changed spec is encoded again."""
    key = (t.name, t.description, t.parameters_json)
    found = _TOOL_JSON.get(key)
    if found is None:
        found = (
            f'{{"type":"function","function":{{"name":{dumps(t.name)},'
            f'"description":{dumps(t.description)},"parameters":{t.parameters_json}}}}}'
        )
        if len(_TOOL_JSON) >= TOOL_JSON_KEPT:
            _TOOL_JSON.clear()
        _TOOL_JSON[key] = found
    return found


def dumps(value: Any) -> str:
    """Compact JSON, as the SDK encodes a body (and httpx): UTF-8, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def to_openai_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]
