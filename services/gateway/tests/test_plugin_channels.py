"""Channel plugins in the gateway without services: a channel name that is built-in,
authenticated, configured or another plugin's fails its plugin; plugins of the agent only are
neither set up nor reported; a channel whose ``start`` raises is reported failed; a ``verify``
or ``parse`` that raises refuses the call without its text; a plugin importing a package this
service's image lacks is reported naming it."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from switchboard.plugins import Manifest, PluginSettings
from switchboard_gateway.channels.base import BadPayload, InboundRequest, Unauthorized
from switchboard_gateway.plugin_host import (
    GatewayPluginApi,
    PluginChannel,
    load_channel_plugins,
    start_channel,
)

CALL = InboundRequest("chat", "main", {}, b"{}", 0)


class Adapter:
    def __init__(self, name: str, fails: bool = False) -> None:
        self.name = name
        self.fails = fails

    async def start(self, rt: Any) -> None:
        if self.fails:
            raise OSError("no")

    async def close(self) -> None: ...
    async def typing(self, account: str, chat: Any, thread_id: str) -> None: ...
    def verify(self, request: InboundRequest) -> None:
        raise KeyError("secret-detail")

    def parse(self, request: InboundRequest) -> Any:
        raise ValueError("secret-detail")

    def format(self, part: Any) -> list[Any]:
        return []

    async def send(self, account: str, message: Any) -> None: ...


class Fake:
    def __init__(self, name: str, provides: set[str], channel: str = "", fails: bool = False):
        self.manifest = Manifest(name, "1", frozenset(provides))
        self.channel = channel
        self.fails = fails

    def setup(self, api: GatewayPluginApi) -> None:
        api.register_tool(object())  # the agent's: ignored here
        if self.channel:
            api.register_channel(self.channel, Adapter(self.channel, self.fails))


async def test_channel_plugins_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = {
        "good": Fake("good", {"channels", "tools"}, "chat"),
        "again": Fake("again", {"channels"}, "chat"),
        "builtin": Fake("builtin", {"channels"}, "telegram"),
        "authed": Fake("authed", {"channels"}, "webchat"),
        "odd": Fake("odd", {"channels"}, "Bad-Name"),
        "starts_badly": Fake("starts_badly", {"channels"}, "flaky", fails=True),
        "agents": Fake("agents", {"tools"}),
    }

    def load(point: EntryPoint) -> Any:
        if point.name == "elsewhere":
            raise ModuleNotFoundError(
                "No module named 'switchboard_agent'", name="switchboard_agent"
            )
        return plugins[point.name]

    monkeypatch.setattr(EntryPoint, "load", load)
    points = [EntryPoint(n, f"x:{n}", "switchboard.plugins") for n in [*plugins, "elsewhere"]]
    loaded, owner = await load_channel_plugins(
        PluginSettings(plugins=[*plugins, "absent", "elsewhere"]), {"slack"}, lambda: points
    )
    assert sorted(loaded.channels) == ["chat", "flaky"]
    assert owner == {"chat": "good", "flaky": "starts_badly"}
    assert await start_channel(loaded, owner, loaded.channels["chat"], object())  # type: ignore[arg-type]
    assert not await start_channel(loaded, owner, loaded.channels["flaky"], object())  # type: ignore[arg-type]
    details = loaded.details()
    assert "agents" not in details  # the agent's plugin
    assert details["absent"]["state"] == "not_installed"
    assert details["elsewhere"] == {
        "state": "failed",
        "detail": "failed to import (ModuleNotFoundError: switchboard_agent)",
    }
    assert details["good"] == {"state": "loaded", "version": "1", "provides": ["channels", "tools"]}
    assert details["again"]["detail"] == "its channel 'chat' is another channel's"
    for name in ("builtin", "authed", "odd"):
        assert details[name]["state"] == "failed"
        assert "is not allowed" in details[name]["detail"]
    assert details["starts_badly"]["detail"] == "its channel flaky failed to start"

    chat = loaded.channels["chat"]
    assert isinstance(chat, PluginChannel)
    with pytest.raises(Unauthorized) as refused:
        chat.verify(CALL)
    with pytest.raises(BadPayload) as unreadable:
        chat.parse(CALL)
    assert "secret-detail" not in refused.value.message + unreadable.value.message
