"""Changes of the configuration file without restarts (issue 27, part 5): which changes apply
and which need a restart, the environment still winning, a refused file changing nothing, the
watcher noticing an edit or SIGHUP's trigger, and the services' hooks getting settings built
with the new values."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from switchboard import reloads
from switchboard.configfile import reload
from switchboard.configfile.reload import Watcher, diff, reloadable
from switchboard.settings import CommonSettings

ROUTER = '[router]\ndm_policy = "allowlist"\n\n[router.channel_security.telegram]\n'


def write(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def test_the_declared_settings_reload_and_the_others_name_their_readers() -> None:
    for env in ("SB_CHANNEL_SECURITY", "SB_TELEGRAM_ALLOW_FROM", "SB_OWNERS", "SB_MODEL"):
        assert reloadable(env), env
    assert not reloadable("SB_HTTP_PORT")
    found = diff(
        {"SB_MODEL": "openai:a", "SB_HTTP_PORT": "8080", "SB_BUDGET": "{}"},
        {"SB_MODEL": "openai:b", "SB_HTTP_PORT": "9090", "SB_OWNERS": '["telegram:1"]'},
    )
    assert found.apply == {"SB_BUDGET": None, "SB_MODEL": "openai:b", "SB_OWNERS": '["telegram:1"]'}
    assert list(found.restart) == ["SB_HTTP_PORT"]
    assert "gateway" in found.restart["SB_HTTP_PORT"]
    assert "router" not in found.restart["SB_HTTP_PORT"]


class Recorder:
    def __init__(self) -> None:
        self.applied: list[dict[str, str | None]] = []
        self.got = asyncio.Event()

    async def __call__(self, changes: dict[str, str | None]) -> None:
        self.applied.append(changes)
        self.got.set()


def watcher(path: Path, environ: dict[str, str], recorder: Recorder) -> Watcher:
    """A watcher of ``path`` as the process saw it at start: ``environ`` with the file's
    variables (SB_CONFIG_FROM_FILE: those not already in ``environ``)."""
    from switchboard.configfile.load import load

    loaded = load(path, environ)
    from_file = [k for k in loaded.environ if k not in environ]
    full = {**loaded.environ, **environ}
    return Watcher(path, full, from_file, recorder, ["router", "gateway"], poll_s=0.02)


async def test_a_changed_allowlist_applies_and_a_port_needs_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "switchboard.toml"
    write(path, f'[gateway]\nhttp_port = 8080\n\n{ROUTER}allow_from = ["42"]\n')
    recorder = Recorder()
    watching = watcher(path, {}, recorder)
    write(path, f'[gateway]\nhttp_port = 9090\n\n{ROUTER}allow_from = ["42", "43"]\n')
    with caplog.at_level(logging.INFO):
        found = await watching.check()
    assert found is not None
    assert recorder.applied == [
        {"SB_CHANNEL_SECURITY": '{"telegram": {"allow_from": ["42", "43"]}}'}
    ]
    assert "SB_HTTP_PORT changed in" in caplog.text
    assert "needs a restart of gateway" in caplog.text
    # Not applied: the running value stays, and is still reported at the next change.
    assert watching.current["SB_HTTP_PORT"] == "8080"


async def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.toml"
    write(path, '[router]\ndm_policy = "allowlist"\nowners = ["telegram:1"]\n')
    recorder = Recorder()
    watching = watcher(path, {"SB_DM_POLICY": "open"}, recorder)
    write(path, '[router]\ndm_policy = "pairing"\nowners = ["telegram:2"]\n')
    await watching.check()
    assert recorder.applied == [{"SB_OWNERS": '["telegram:2"]'}]


async def test_a_refused_file_changes_nothing_and_names_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "switchboard.toml"
    write(path, '[agent]\nmodel = "openai:a"\n\n[router]\ndm_policy = "allowlist"\n')
    recorder = Recorder()
    watching = watcher(path, {}, recorder)
    write(path, '[agent]\nmodel = "openai:b"\n\n[router]\ndm_policy = "opne"\n')
    with caplog.at_level(logging.ERROR):
        assert await watching.check() is None
    assert f"{path}:5: router.dm_policy:" in caplog.text
    assert recorder.applied == []  # not even the model, which was valid
    assert watching.current["SB_MODEL"] == "openai:a"
    write(path, '[agent]\nmodel = "openai:b"\n\n[router]\ndm_policy = "allowlist"\n')
    await watching.check()
    assert recorder.applied == [{"SB_MODEL": "openai:b"}]


async def test_the_watcher_notices_an_edit_and_a_trigger(tmp_path: Path) -> None:
    path = tmp_path / "switchboard.toml"
    write(path, '[agent]\nmodel = "openai:a"\n')
    recorder = Recorder()
    watching = watcher(path, {}, recorder)
    task = asyncio.create_task(watching.run())
    try:
        write(path, '[agent]\nmodel = "openai:b"\n')
        async with asyncio.timeout(10):
            await recorder.got.wait()
        assert recorder.applied == [{"SB_MODEL": "openai:b"}]
        # SIGHUP: checked even though the file looks the same (nothing changed: nothing applied).
        checked = asyncio.Event()
        original = watching.check

        async def check() -> reload.Diff | None:
            checked.set()
            return await original()

        watching.check = check  # type: ignore[method-assign]
        watching.trigger()
        async with asyncio.timeout(10):
            await checked.wait()
        assert len(recorder.applied) == 1
    finally:
        task.cancel()


class Owned(CommonSettings):
    dm_policy: str = "pairing"


async def test_hooks_get_settings_with_the_new_values() -> None:
    got: list[Owned] = []
    others: list[CommonSettings] = []

    async def hook(settings: Owned) -> None:
        got.append(settings)

    async def other(settings: CommonSettings) -> None:
        others.append(settings)

    environ = {"SB_DM_POLICY": "allowlist", "SB_SUBJECT_PREFIX": "x"}
    token = reloads.ENVIRON.set(environ)
    try:
        unregister = reloads.register("router", Owned, hook)
        unregister_other = reloads.register("tools", CommonSettings, other)
    finally:
        reloads.ENVIRON.reset(token)
    assert unregister is not None and unregister_other is not None
    try:
        await reloads.apply({"SB_DM_POLICY": "open"})
        assert [s.dm_policy for s in got] == ["open"]
        assert got[0].subject_prefix == "x"  # the rest of its environment, as at start
        assert others == []  # CommonSettings does not read SB_DM_POLICY
        assert environ["SB_DM_POLICY"] == "open"  # a restart starts with it
        await reloads.apply({"SB_DM_POLICY": None})
        assert got[-1].dm_policy == "pairing"
    finally:
        unregister()
        unregister_other()
    assert "router" not in reloads.registered()


def test_without_a_host_nothing_registers() -> None:
    async def hook(settings: CommonSettings) -> None:
        raise AssertionError("never called")

    assert reloads.register("router", CommonSettings, hook) is None
