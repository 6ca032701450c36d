"""Queue modes: each mode's behaviour, the precedence of overrides, and validation."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from switchboard.queue_modes import QueueMode
from switchboard.settings import describe
from switchboard_agent.config import AgentSettings
from switchboard_router.config import RouterSettings

# mode: (one_run_for_all_pending, debounces, steers, interrupts, threads_replies)
BEHAVIOUR = {
    "queue": (False, False, False, False, False),
    "followup": (False, False, False, False, True),
    "collect": (True, True, False, False, False),
    "steer": (True, False, True, False, False),
    "interrupt": (True, False, False, True, False),
}


def test_the_table_covers_every_mode() -> None:
    assert set(BEHAVIOUR) == {m.value for m in QueueMode}


@pytest.mark.parametrize(("value", "expected"), BEHAVIOUR.items())
def test_behaviour_of_each_mode(value: str, expected: tuple[bool, ...]) -> None:
    mode = QueueMode(value)
    actual = (
        mode.one_run_for_all_pending,
        mode.debounces,
        mode.steers,
        mode.interrupts,
        mode.threads_replies,
    )
    assert actual == expected


@pytest.mark.parametrize(
    ("candidates", "default", "expected"),
    [
        (("steer", "collect", "interrupt"), None, QueueMode.STEER),  # session beats all
        (("", "collect", "interrupt"), None, QueueMode.COLLECT),  # then the channel's
        (("", "", "interrupt"), None, QueueMode.INTERRUPT),  # then the agent's
        (("", "", ""), None, QueueMode.QUEUE),
        ((), None, QueueMode.QUEUE),
        (("", ""), QueueMode.FOLLOWUP, QueueMode.FOLLOWUP),
        (("bogus", "STEER", "followup"), None, QueueMode.FOLLOWUP),  # not modes: skipped
        (("collect",), QueueMode.STEER, QueueMode.COLLECT),  # a candidate beats the default
    ],
)
def test_effective_precedence(
    candidates: tuple[str, ...], default: QueueMode | None, expected: QueueMode
) -> None:
    assert QueueMode.effective(*candidates, default=default) is expected


def test_is_mode_and_names() -> None:
    assert all(QueueMode.is_mode(m.value) for m in QueueMode)
    assert not QueueMode.is_mode("")
    assert not QueueMode.is_mode("QUEUE")
    assert not QueueMode.is_mode("bogus")
    assert QueueMode.names() == "queue, followup, collect, steer, interrupt"


class _Patch(BaseModel):
    queue_mode: QueueMode


def _assert_lists_every_mode(message: str) -> None:
    assert "bogus" in message
    for mode in QueueMode:
        assert f"'{mode.value}'" in message, message


def test_pydantic_field_rejects_unknown_mode_listing_them() -> None:
    assert _Patch(queue_mode="collect").queue_mode is QueueMode.COLLECT  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as raised:
        _Patch(queue_mode="bogus")  # type: ignore[arg-type]
    _assert_lists_every_mode(describe(raised.value))


def test_settings_reject_unknown_modes_listing_them() -> None:
    assert AgentSettings.from_environ({"SB_QUEUE_MODE": "steer"}).queue_mode is QueueMode.STEER
    with pytest.raises(ValidationError) as raised:
        AgentSettings.from_environ({"SB_QUEUE_MODE": "bogus"})
    assert describe(raised.value).startswith("queue_mode: ")
    _assert_lists_every_mode(describe(raised.value))

    router = RouterSettings.from_environ({"SB_CHANNEL_QUEUE_MODES": '{"telegram": "collect"}'})
    assert router.channel_queue_modes == {"telegram": QueueMode.COLLECT}
    with pytest.raises(ValidationError) as raised:
        RouterSettings.from_environ({"SB_CHANNEL_QUEUE_MODES": '{"telegram": "bogus"}'})
    assert describe(raised.value).startswith("channel_queue_modes.telegram: ")
    _assert_lists_every_mode(describe(raised.value))
