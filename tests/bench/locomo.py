"""LoCoMo (``locomo10.json``) as the memory bench uses it: each conversation's turns with the
text indexed for them, and the questions with their evidence turns, the data set's known
annotation defects repaired (malformed evidence ids, see :func:`evidence_ids`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from switchboard_memory.recall import compose_utterance


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    document: str  # the text indexed
    at_ms: int


@dataclass(frozen=True)
class Conversation:
    agent: str  # one agent (collection) per conversation: a question ranks its own turns only
    turns: list[Turn]


@dataclass(frozen=True)
class Question:
    agent: str
    text: str
    category: int
    evidence: frozenset[str]


def evidence_ids(raw: list[str], known: set[str]) -> frozenset[str]:
    """``"D8:6; D9:17"`` and space-separated lists split, ``"D:11:26"`` and ``"D30:05"``
    repaired, unparseable ids and ids of turns that do not exist dropped."""
    found = set()
    for entry in raw:
        for part in re.split(r"[;\s]+", entry.strip()):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part)
            if match and f"D{match[1]}:{match[2]}" in known:
                found.add(f"D{match[1]}:{match[2]}")
    return frozenset(found)


def _when(text: str) -> tuple[str, int]:
    """``"1:56 pm on 8 May, 2023"`` -> ("8 May 2023", epoch ms)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%-d %B %Y"), int(moment.timestamp() * 1000)


def load_locomo(path: Path) -> tuple[list[Conversation], list[Question]]:
    samples = json.loads(path.read_text())
    conversations: list[Conversation] = []
    questions: list[Question] = []
    for sample in samples:
        agent = f"locomo-{sample['sample_id'].lower()}"
        conv = sample["conversation"]
        turns: list[Turn] = []
        n = 1
        while f"session_{n}_date_time" in conv:
            if f"session_{n}" in conv:
                date, at_ms = _when(conv[f"session_{n}_date_time"])
                previous = ""
                for t in conv[f"session_{n}"]:
                    text = t["text"]
                    if t.get("blip_caption"):
                        text = f"{text} [shared a photo: {t['blip_caption']}]"
                    document = compose_utterance(t["speaker"], text, date, previous)
                    turns.append(Turn(t["dia_id"], n, document, at_ms))
                    previous = f"{t['speaker']}: {text}"
            n += 1
        conversations.append(Conversation(agent, turns))
        known = {t.dia_id for t in turns}
        for qa in sample["qa"]:
            evidence = evidence_ids(qa.get("evidence", []), known)
            if evidence:
                questions.append(Question(agent, qa["question"], int(qa["category"]), evidence))
    return conversations, questions
