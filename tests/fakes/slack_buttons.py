"""Block Kit buttons for the fake Slack (:mod:`tests.fakes.slack`): what a click sends to the
app's Interactivity Request URL, and the two Web API methods that answer it, as
api.slack.com describes them::

    [post] = slack.wait_for_posts(1)                       # chat.postMessage with blocks
    payload = slack.buttons.click_payload(post, "U0OWNER", "sb_approve", team="T0FAKE")
    body, headers = slack.buttons.request(events, payload)    # POSTed to the app's URL
    slack.buttons.updates, slack.buttons.ephemerals        # what the app answered

- A click is ``POST`` ``application/x-www-form-urlencoded`` with one field ``payload``: the
  ``block_actions`` JSON (``user``, ``channel``, ``container``, ``message`` as it shows now,
  ``actions`` with the button's ``action_id``, ``value`` and ``action_ts``, ``response_url``,
  ``trigger_id``), signed with the app's signing secret like an event.
- ``chat.update(channel, ts, text, blocks)``: the message must be one the app posted
  (``message_not_found``); ``chat.postEphemeral(channel, user, text)`` needs a user
  (``user_not_in_channel`` for none).
- ``blocks`` on ``chat.postMessage`` and ``chat.update`` are checked as Slack checks them: at
  most 50, a section's text at most 3000 characters, a button's ``value`` at most 2000 and its
  ``action_id`` at most 255 (``invalid_blocks``).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.slack import Post
    from tests.fakes.slack_events import SlackEvents


@dataclass(frozen=True)
class Update:
    channel: str
    ts: str
    text: str
    blocks: list[Any] | None


@dataclass(frozen=True)
class Ephemeral:
    channel: str
    user: str
    text: str
    thread_ts: str | None


def blocks_of(args: dict[str, Any]) -> list[Any] | None:
    """The call's ``blocks`` (a JSON string in a form), checked; None when it has none."""
    blocks = args.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    if blocks is None:
        return None
    if not isinstance(blocks, list) or len(blocks) > 50:
        raise ValueError("invalid_blocks")
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise ValueError("invalid_blocks")
        text = block.get("text")
        if block["type"] == "section" and (
            not isinstance(text, dict) or not 1 <= len(str(text.get("text", ""))) <= 3000
        ):
            raise ValueError("invalid_blocks")
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            if len(str(element.get("value", ""))) > 2000 or len(element.get("action_id", "")) > 255:
                raise ValueError("invalid_blocks")
    return blocks


class SlackButtons:
    """The fake's interactivity: the clicks, and what chat.update and chat.postEphemeral got."""

    def __init__(self) -> None:
        self.updates: list[Update] = []
        self.ephemerals: list[Ephemeral] = []
        self._shown: dict[tuple[str, str], tuple[str, list[Any] | None]] = {}
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.updates.clear()
            self.ephemerals.clear()

    def shown(self, post: Post) -> tuple[str, list[Any] | None]:
        """The text and blocks ``post`` shows now (after any update)."""
        with self._lock:
            return self._shown.get((post.channel, post.ts), (post.text, post.blocks))

    def update(self, args: dict[str, Any], posts: list[Post]) -> dict[str, Any]:
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        if not any((p.channel, p.ts) == (channel, ts) for p in posts):
            return {"ok": False, "error": "message_not_found"}
        try:
            blocks = blocks_of(args)
        except ValueError:
            return {"ok": False, "error": "invalid_blocks"}
        text = str(args.get("text", ""))
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        with self._lock:
            self._shown[(channel, ts)] = (text, blocks)
            self.updates.append(Update(channel, ts, text, blocks))
        return {"ok": True, "channel": channel, "ts": ts, "text": text}

    def ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, user = str(args.get("channel", "")), str(args.get("user", ""))
        text = str(args.get("text", ""))
        if not user:
            return {"ok": False, "error": "user_not_in_channel"}
        if not text:
            return {"ok": False, "error": "no_text"}
        with self._lock:
            thread = args.get("thread_ts") or None
            self.ephemerals.append(Ephemeral(channel, user, text, thread))
        return {"ok": True, "message_ts": f"{int(time.time())}.000900"}

    def click_payload(
        self, post: Post, user: str, action_id: str, team: str, as_posted: bool = False
    ) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` pressing the button ``action_id`` of
        ``post`` (a message the app posted) as it shows now, or ``as_posted`` (a client that
        had not caught up with an update yet)."""
        text, blocks = (post.text, post.blocks) if as_posted else self.shown(post)
        buttons = [
            e for b in blocks or [] if b.get("type") == "actions" for e in b.get("elements", [])
        ]
        button = next((b for b in buttons if b.get("action_id") == action_id), None)
        if button is None:
            raise AssertionError(f"{post.ts} shows no button {action_id}")
        message: dict[str, Any] = {"type": "message", "ts": post.ts, "text": text}
        if blocks is not None:
            message["blocks"] = blocks
        if post.thread_ts:
            message["thread_ts"] = post.thread_ts
        return {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
            "api_app_id": "A0FAKE",
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": post.ts,
                "channel_id": post.channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
            "team": {"id": team, "domain": "fake-team"},
            "channel": {"id": post.channel, "name": "team"},
            "message": message,
            "response_url": f"https://hooks.slack.com/actions/{team}/1/{uuid.uuid4().hex}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "sb_approval",
                    "text": button["text"],
                    "value": button.get("value", ""),
                    "style": button.get("style", ""),
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    @staticmethod
    def request(events: SlackEvents, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        """Slack's signed interactivity call carrying ``payload``."""
        body = urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()
        body, headers = events.request(body)
        headers["content-type"] = "application/x-www-form-urlencoded"
        return body, headers
