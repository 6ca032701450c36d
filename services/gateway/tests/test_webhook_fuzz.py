"""Fuzzing the gateway's untrusted doors (issue 23): hypothesis sends generated bodies (random
JSON of any shape and depth, deep nesting, a platform's own payload with a field swapped for
anything, huge numbers, bytes that are not UTF-8, empty and truncated bodies) to the gateway
process, as Compose runs it, on a real nats-server:

- Telegram's webhook with its secret header, Slack's Events API signed with the signing secret,
  Discord's interactions signed with the application's Ed25519 key (the fake platforms' keys):
  what is fuzzed is the parsing behind a valid signature;
- ``/hooks/wake``, ``/hooks/agent`` and a mapping, with the hooks token;
- WebChat's first frame.

Every answer is below 500 (a WebChat socket is refused with 4401, never failed with 1011), and
the gateway's log holds no traceback. A few hundred examples in all, no deadline."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from switchboard.tokens import generate
from tests.fakes.discord import FakeDiscord
from tests.fakes.discord_interactions import DiscordInteractions
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_events import SlackEvents
from tests.fakes.telegram import FakeTelegram
from tests.fakes.telegram_objects import SECRET_HEADER

from .gateway_process import GatewayProcess, gateway_process

FUZZ = settings(
    max_examples=70,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
CRASHES = ("Traceback", "Exception in ASGI application")
MAPPING = "fuzz"

# --- what a platform would send: the templates the mutations start from ---------------------

TELEGRAM_UPDATE: dict[str, Any] = {
    "update_id": 900_000_001,
    "message": {
        "message_id": 5,
        "from": {"id": 4242, "is_bot": False, "first_name": "Ada", "username": "ada"},
        "chat": {"id": -100123, "title": "g", "type": "supergroup"},
        "date": 1_700_000_000,
        "text": "hi @switchboard_test_bot",
        "entities": [{"type": "mention", "offset": 3, "length": 21}],
        "reply_to_message": {"message_id": 4, "from": {"id": 1, "is_bot": True}},
        "message_thread_id": 3,
        "is_topic_message": True,
    },
}
WEBCHAT_CONNECT = {"type": "req", "id": "c1", "method": "connect", "params": {"token": "wrong"}}
HOOK_BODIES: dict[str, dict[str, Any]] = {
    "/hooks/agent": {"message": "hi", "name": "fuzz", "session_key": "hook:x", "deliver": "ci"},
    "/hooks/wake": {"text": "x", "mode": "now"},
    f"/hooks/{MAPPING}": {"repository": {"full_name": "a/b"}, "commits": [{"id": "c"}]},
}

# --- strategies ----------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a field sits (object keys, list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replaced(template: Any, path: tuple[Any, ...], new: Any, drop: bool) -> Any:
    doc = copy.deepcopy(template)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if drop and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


def mutated(template: Any) -> st.SearchStrategy[Any]:
    """``template`` with one field replaced by any JSON value (or removed)."""
    return st.builds(
        _replaced, st.just(template), st.sampled_from(_paths(template)), json_values, st.booleans()
    )


def _deep(levels: int, opener: str) -> bytes:
    if opener == "[":
        return ("[" * levels + "]" * levels).encode()
    return ('{"a":' * levels + "1" + "}" * levels).encode()


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def _cut(raw: bytes, at: int) -> bytes:
    return raw[: at % max(len(raw), 1)]


def bodies(template: Any) -> st.SearchStrategy[bytes]:
    """Any body a caller could send to an endpoint whose well-formed input is ``template``."""
    raw = _dumps(template)
    return st.one_of(
        mutated(template).map(_dumps),
        mutated(template).map(_dumps),  # twice the weight: the shape a parser trusts most
        json_values.map(_dumps),
        st.builds(_deep, st.integers(1, 20_000), st.sampled_from("[{")),
        st.builds(_cut, st.just(raw), st.integers(0, len(raw))),
        st.binary(max_size=64),
        st.sampled_from(
            [
                b"",
                b"1" * 5000,  # past CPython's digit limit for int()
                raw.replace(b"900000001", b"9" * 400),
                b'{"update_id": 1e999}',
                raw + b"\xff",
                raw.replace(b'"hi', b'"\xed\xa0\x80hi'),  # a UTF-8 encoded surrogate
            ]
        ),
    )


# --- the gateway under fuzzing ---------------------------------------------------------------


@dataclass
class Fuzzed:
    gw: GatewayProcess
    client: httpx.Client
    telegram_secret: str
    slack: SlackEvents
    discord: DiscordInteractions
    hooks_token: str

    def check_log(self) -> None:
        log = self.gw.output()
        assert not [c for c in CRASHES if c in log], log[-4000:]


@pytest.fixture(scope="module")
def fuzzed(module_nats_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    secret, hooks_token = generate(), generate()
    slack_events = SlackEvents(bot_user_id="U0BOT")
    with ExitStack() as stack:
        tg = stack.enter_context(FakeTelegram())
        slack = stack.enter_context(FakeSlack(bot_user_id="U0BOT"))
        discord = stack.enter_context(FakeDiscord())
        mapping = {"action": "agent", "message": "{{payload.repository.full_name}} {{payload}}"}
        env = {
            "SB_TELEGRAM_BOT_TOKEN": tg.token,
            "SB_TELEGRAM_WEBHOOK_SECRET": secret,
            "SB_TELEGRAM_API_BASE": tg.base_url,
            "SB_SLACK_BOT_TOKEN": slack.token,
            "SB_SLACK_SIGNING_SECRET": slack_events.secret,
            "SB_SLACK_API_BASE": slack.base_url,
            "SB_SLACK_FILE_ORIGINS": '["http://127.0.0.1:9"]',  # never the internet
            "SB_DISCORD_BOT_TOKEN": discord.token,
            "SB_DISCORD_PUBLIC_KEY": discord.interactions.public_key,
            "SB_DISCORD_API_BASE": discord.base_url,
            "SB_HOOKS_TOKEN": hooks_token,
            "SB_HOOKS_MAPPINGS": json.dumps({MAPPING: mapping}),
            "SB_HOOKS_TARGETS": json.dumps({"ci": {"channel": "slack", "to": "C0FUZZ"}}),
        }
        home = tmp_path_factory.mktemp("fuzz") / "gateway"
        gw = stack.enter_context(gateway_process(module_nats_url, home, **env))
        client = stack.enter_context(httpx.Client(base_url=gw.url, timeout=30))
        yield Fuzzed(gw, client, secret, slack_events, discord.interactions, hooks_token)


def assert_no_server_error(response: httpx.Response, body: bytes) -> None:
    assert response.status_code < 500, (body[:200], response.status_code, response.text[:300])


def test_telegram_webhook(fuzzed: Fuzzed) -> None:
    headers = {"content-type": "application/json", SECRET_HEADER: fuzzed.telegram_secret}

    @FUZZ
    @given(body=bodies(TELEGRAM_UPDATE))
    def call(body: bytes) -> None:
        response = fuzzed.client.post("/channels/telegram/default", content=body, headers=headers)
        assert_no_server_error(response, body)

    call()
    fuzzed.check_log()


def test_slack_events(fuzzed: Fuzzed) -> None:
    event = fuzzed.slack.message("U1", "hello <@U0BOT>", "C1", channel_type="channel")
    template = fuzzed.slack.envelope(event)

    @FUZZ
    @given(body=bodies(template))
    def call(body: bytes) -> None:
        _, headers = fuzzed.slack.request(body)  # signed now: within the replay window
        response = fuzzed.client.post("/channels/slack/default", content=body, headers=headers)
        assert_no_server_error(response, body)

    call()
    fuzzed.check_log()


def test_discord_interactions(fuzzed: Fuzzed) -> None:
    template = fuzzed.discord.slash_command("hello", guild_id="4400000000000000001")

    @FUZZ
    @given(body=bodies(template))
    def call(body: bytes) -> None:
        _, headers = fuzzed.discord.request(body)
        response = fuzzed.client.post("/channels/discord/default", content=body, headers=headers)
        assert_no_server_error(response, body)

    call()
    fuzzed.check_log()


def test_hooks(fuzzed: Fuzzed) -> None:
    headers = {"Authorization": f"Bearer {fuzzed.hooks_token}", "content-type": "application/json"}
    cases = st.sampled_from(sorted(HOOK_BODIES)).flatmap(
        lambda path: st.tuples(st.just(path), bodies(HOOK_BODIES[path]))
    )

    @settings(FUZZ, max_examples=90)
    @given(case=cases)
    def call(case: tuple[str, bytes]) -> None:
        path, body = case
        response = fuzzed.client.post(path, content=body, headers=headers)
        assert_no_server_error(response, body)

    call()
    fuzzed.check_log()


def test_webchat_first_frame(fuzzed: Fuzzed) -> None:
    url = fuzzed.gw.url.replace("http://", "ws://") + "/webchat/ws"

    @settings(FUZZ, max_examples=50)
    @given(body=bodies(WEBCHAT_CONNECT))
    def call(body: bytes) -> None:
        try:
            frame: str | bytes = body.decode()
        except UnicodeDecodeError:
            frame = body
        replies: list[Any] = []
        with connect(url, max_size=None, open_timeout=30) as ws:
            ws.send(frame)
            try:
                while True:  # the refusal, then the close
                    replies.append(json.loads(ws.recv(timeout=30)))
            except ConnectionClosed:
                pass
        [reply] = replies
        assert reply["ok"] is False, reply
        assert ws.close_code == 4401, (body[:200], ws.close_code, reply)

    call()
    fuzzed.check_log()
