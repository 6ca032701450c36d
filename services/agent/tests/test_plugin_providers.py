"""Model providers from plugins without services or network: ``echo:x`` is a model reference
once a plugin registers ``echo`` (``SB_MODEL``, fallbacks, ``/model``) and an unknown provider
otherwise; a plugin model that raises, or whose factory raises, fails over to the next model of
the chain (reason ``unavailable``) and the factory's failure is noted for ``/readyz``; provider
names that shadow a built-in, or that another plugin took, fail the plugin."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from pydantic import SecretStr

from switchboard.plugins import Manifest, PluginSettings
from switchboard.settings import ModelSettings
from switchboard_agent.plugins.hooks import Hooks
from switchboard_agent.plugins.host import AgentPluginApi, load_plugins
from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.providers.errors import ModelUnavailableError
from switchboard_agent.providers.failover import ModelRouter
from switchboard_agent.providers.failover_config import FailoverSettings, choose_router
from switchboard_agent.providers.plugin import PluginModel, PluginProvider
from switchboard_agent.sessions.models import ModelChoiceError, SessionModels

REQUEST = ModelRequest("sys", [{"role": "user", "content": "hi"}])


class Said:
    """Answers ``<model> says hi``; ``broken`` raises a KeyError, ``junk`` yields a string,
    ``silent`` never answers."""

    provider = "echo"

    def __init__(self, model: str) -> None:
        self.model = model

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        if self.model == "broken":
            raise KeyError("boom")
        if self.model == "silent":
            await asyncio.Event().wait()
        if self.model == "junk":
            yield "junk"  # type: ignore[misc]
        text = f"{self.model} says hi"
        yield TextDelta(text)
        yield ModelResponse([{"type": "text", "text": text}], "end_turn", Usage(1, 1), self.model)


def factory(model: str, config: Mapping[str, Any]) -> Said:
    if model == "unbuildable":
        raise OSError("no")
    return Said(model)


PLUGINS = {
    "echo": PluginProvider("sbecho", "echo", factory, {}),
    "backup": PluginProvider("sbbackup", "backup", factory, {}),
}


def router(model: str, fallbacks: list[str]) -> ModelRouter:
    found, reply = choose_router(
        ModelSettings(model=model),
        FailoverSettings(model_fallbacks=fallbacks, failover_max_wait_s=0, model_timeout_s=0.2),
        PLUGINS,
    )
    assert found is not None, reply
    return found


async def answer(model: Any) -> str:
    items = [item async for item in model.stream(REQUEST)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    return final.text


async def test_a_plugin_provider_is_a_model_reference() -> None:
    chain = router("echo:parrot", [])
    assert await answer(chain) == "parrot says hi"
    none, reply = choose_router(ModelSettings(model="echo:parrot"), FailoverSettings())
    assert none is None
    assert "unknown model provider 'echo'" in reply and "SB_PLUGINS" in reply


@pytest.mark.parametrize("failing", ["broken", "junk", "unbuildable", "silent"])
async def test_a_failing_plugin_model_fails_over(failing: str) -> None:
    chain = router(f"echo:{failing}", ["backup:b"])
    bound = chain.bind("main")
    assert await answer(bound) == "b says hi"
    [move] = bound.failovers
    assert (move.from_ref, move.to_ref, move.reason) == (
        f"echo:{failing}",
        "backup:b",
        "unavailable",
    )
    if failing == "unbuildable":
        assert chain.unbuilt == {
            "sbecho": "The model echo:unbuildable (plugin sbecho) could not be set up (OSError)."
        }
    alone = router(f"echo:{failing}", []).bind("main")
    with pytest.raises(ModelUnavailableError, match=f"echo:{failing}"):
        await answer(alone)


async def test_a_session_may_pick_a_plugin_model() -> None:
    models = SessionModels(
        ModelSettings(openai_api_key=SecretStr("sk")),
        router("echo:a", []),
        None,
        PLUGINS,
        timeout_s=7.0,
    )
    assert models.check("echo:parrot") == "echo:parrot"
    parrot = await models.get("echo:parrot")
    assert await answer(parrot) == "parrot says hi"
    assert isinstance(parrot, PluginModel) and parrot.timeout_s == 7.0  # SB_MODEL_TIMEOUT_S
    assert await models.get("echo:unbuildable") is models.default  # logged, the default answers
    with pytest.raises(ModelChoiceError, match="Unknown model provider 'nope'"):
        models.check("nope:x")


class Fake:
    def __init__(self, name: str, provider: str) -> None:
        self.manifest = Manifest(name, "1", frozenset({"providers"}))
        self.provider = provider

    def setup(self, api: AgentPluginApi) -> None:
        api.register_provider(self.provider, factory)


async def test_provider_names_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = {
        "first": Fake("first", "echo"),
        "second": Fake("second", "echo"),
        "shadow": Fake("shadow", "openai"),
        "odd": Fake("odd", "Bad Name"),
    }
    monkeypatch.setattr(EntryPoint, "load", lambda self: plugins[self.name])
    points = [EntryPoint(n, f"x:{n}", "switchboard.plugins") for n in plugins]
    loaded = await load_plugins(
        PluginSettings(plugins=list(plugins)), Hooks(), [], 5.0, lambda: points
    )
    assert list(loaded.providers) == ["echo"]
    assert loaded.providers["echo"].plugin == "first"
    details = loaded.details()
    assert details["first"]["state"] == "loaded" and "detail" not in details["first"]
    assert details["second"]["detail"] == "its provider 'echo' is another plugin's"
    assert details["shadow"]["state"] == "failed"
    assert "'openai' is not allowed" in details["shadow"]["detail"]
    assert "'Bad Name' is not allowed" in details["odd"]["detail"]
