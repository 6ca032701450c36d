"""How ``switchboard chat`` shows a session's WebChat events in a terminal: the assistant's text
as its deltas arrive, tool phases on lines of their own (``· get_time started``, ``· get_time
done``), the agent's chat messages, run errors and the end of a run that did not complete."""

from __future__ import annotations

from typing import Any, TextIO

SUMMARY_CHARS = 80
MARK = "\u00b7"  # ·


def short(text: str, limit: int = SUMMARY_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


class ChatView:
    """Writes to ``out``; remembers whether the cursor is inside a streamed line and which
    runs streamed text (a run whose text never streamed shows its final text at its end)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.mid_line = False
        self.streamed: set[str] = set()

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def line(self, text: str) -> None:
        """``text`` on a line of its own (ending a streamed line first)."""
        self._write(("\n" if self.mid_line else "") + text + "\n")
        self.mid_line = False

    def prompt(self, text: str) -> None:
        """``text`` where the user types next (after ending a streamed line)."""
        self._write(("\n" if self.mid_line else "") + text)
        self.mid_line = False

    def note(self, text: str) -> None:
        self.line(f"{MARK} {text}")

    def show(self, frame: dict[str, Any]) -> None:
        """One event frame of the protocol."""
        payload: dict[str, Any] = frame.get("payload") or {}
        name = frame.get("event")
        if name == "assistant":
            self._delta(payload)
        elif name == "tool":
            self._tool(payload)
        elif name == "message":
            media = " ".join(m.get("url", "") for m in payload.get("media") or [])
            self.line(payload.get("text", "") + (f" [{media}]" if media else ""))
        elif name == "run_error":
            self.note(f"error: {payload.get('message', 'the run failed')}")
        elif name == "lifecycle" and payload.get("phase") == "end":
            self._end(payload)
        elif name == "gap":
            self.note(f"some events were missed ({payload.get('reason', 'gap')})")

    def _delta(self, payload: dict[str, Any]) -> None:
        text = str(payload.get("text", ""))
        if text:
            self.streamed.add(str(payload.get("run_id", "")))
            self._write(text)
            self.mid_line = not text.endswith("\n")

    def _tool(self, payload: dict[str, Any]) -> None:
        tool = payload.get("tool", "tool")
        phase = payload.get("phase")
        summary = short(str(payload.get("summary") or ""))
        if phase == "start":
            self.note(f"{tool} started" + (f" {summary}" if summary else ""))
        elif phase == "approval":
            status = payload.get("status") or "pending"
            approval = payload.get("approval_id", "")
            hint = f": /approve {approval} or /deny {approval}" if status == "pending" else ""
            self.note(f"{tool} waits for approval ({status}){hint}")
        elif payload.get("is_error"):
            self.note(f"{tool} failed" + (f": {summary}" if summary else ""))
        else:
            self.note(f"{tool} done")

    def _end(self, payload: dict[str, Any]) -> None:
        run = str(payload.get("run_id", ""))
        text = str(payload.get("text") or "")
        if run not in self.streamed and text:
            self.line(text)
        elif self.mid_line:
            self._write("\n")
            self.mid_line = False
        self.streamed.discard(run)
        status = payload.get("status") or "completed"
        if status != "completed":
            reason = payload.get("stop_reason")
            self.note(f"run {status}" + (f" ({reason})" if reason else ""))
