"""Queue modes (docs/architecture.md, the lane protocol): how a session's pending lane items
become runs. One enum, with each mode's behaviour as properties, so that no code branches on the
mode's spelling."""

from __future__ import annotations

from enum import StrEnum


class QueueMode(StrEnum):
    QUEUE = "queue"  # FIFO, one run and one reply per message (the default)
    FOLLOWUP = "followup"  # as queue, each reply threaded to its message
    COLLECT = "collect"  # wait for a quiet debounce window, then one run for all pending
    STEER = "steer"  # one run for all pending; newer messages join it at its next model call
    INTERRUPT = "interrupt"  # a newer message aborts the active run and starts on the newest

    @property
    def one_run_for_all_pending(self) -> bool:
        """Everything pending becomes one run (newest item leading, older ones as context)."""
        return self in (QueueMode.COLLECT, QueueMode.STEER, QueueMode.INTERRUPT)

    @property
    def debounces(self) -> bool:
        """Waits until no message arrived for the debounce window before running."""
        return self is QueueMode.COLLECT

    @property
    def steers(self) -> bool:
        """Messages arriving during a run join it before its next model call."""
        return self is QueueMode.STEER

    @property
    def interrupts(self) -> bool:
        """A message arriving during a run aborts it."""
        return self is QueueMode.INTERRUPT

    @property
    def threads_replies(self) -> bool:
        """Replies on chat channels are threaded to the message they answer."""
        return self is QueueMode.FOLLOWUP

    @classmethod
    def is_mode(cls, value: str) -> bool:
        return value in cls._value2member_map_

    @classmethod
    def names(cls) -> str:
        """The modes, for error messages: ``queue, followup, ...``."""
        return ", ".join(m.value for m in cls)

    @classmethod
    def effective(cls, *candidates: str, default: QueueMode | None = None) -> QueueMode:
        """The first candidate that names a mode (session override, then the channel's, then
        the agent's), else ``default`` (``queue``). Empty strings mean "not set"."""
        for value in candidates:
            if cls.is_mode(value):
                return cls(value)
        return default or cls.QUEUE
