"""What the fakes and the database saw, against what the traffic sent (the ledger).

A message is *answered* when the agent's transcript (``agent.messages``) holds its user row
and a final assistant row naming its marker (``ANSWER <marker>``). Exactly once: one user row
and one answer row. In order: the markers of a conversation, in the order of their user rows'
ids (a bigserial: commit order), are the order they were sent in (restricted to the ones that
arrived). Delivered exactly once: the marker is in one message the platform's fake accepted.
A scheduled job's slot: the user rows and answers naming ``due <time>``, one each."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import httpx

from tests.soak.ledger import Ledger
from tests.soak.model import ANSWERED, CRON_ANSWERED, CRON_ASKED, MARKER, fact
from tests.soak.system import Fakes

CHANNELS = ("openai", "api", "telegram", "slack", "discord", "webchat")


@dataclass
class Transcripts:
    """Per marker: its user rows (session, id) and answer rows; per cron slot: the same."""

    asked: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    answered: Counter[str] = field(default_factory=Counter)
    answered_in: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    cron_asked: Counter[tuple[str, str]] = field(default_factory=Counter)
    cron_answered: Counter[tuple[str, str]] = field(default_factory=Counter)
    # memory_store calls by the marker of their fact: True when the tool said it stored it
    stored: dict[str, bool] = field(default_factory=dict)
    replies: dict[str, str] = field(default_factory=dict)  # run id -> its last text
    run_of: dict[str, str] = field(default_factory=dict)  # marker -> run id of its user row


def _blocks(content: str) -> list[dict[str, Any]]:
    value = json.loads(content)
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict):
        value = [value]
    return [b for b in value if isinstance(b, dict)]


def _note_memory(seen: Transcripts, blocks: list[dict[str, Any]], calls: dict[str, str]) -> None:
    """A memory_store call (its fact's marker by call id), then its result: stored or not."""
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == "memory_store":
            for mark in MARKER.findall(json.dumps(block.get("input"))):
                calls[str(block.get("id"))] = mark
        elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in calls:
            mark = calls[str(block.get("tool_use_id"))]
            seen.stored[mark] = seen.stored.get(mark, False) or not block.get("is_error")


async def read_transcripts(database_url: str) -> Transcripts:
    seen = Transcripts()
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT id, session_key, role, run_id, content::text AS content "
            "FROM agent.messages ORDER BY id"
        )
    finally:
        await conn.close()
    calls: dict[str, str] = {}
    for row in rows:
        blocks = _blocks(row["content"])
        _note_memory(seen, blocks, calls)
        text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if row["role"] == "user":
            for mark in dict.fromkeys(MARKER.findall(text)):
                seen.asked[mark].append((row["session_key"], row["id"]))
                seen.run_of[mark] = row["run_id"]
            for job, due in CRON_ASKED.findall(text):
                seen.cron_asked[(job, due)] += 1
        elif row["role"] == "assistant":
            if text:
                seen.replies[row["run_id"]] = text
            found = ANSWERED.search(text)
            if found:
                for mark in found.group(1).split():
                    seen.answered[mark] += 1
                    seen.answered_in[mark].add(row["session_key"])
            for job, due in CRON_ANSWERED.findall(text):
                seen.cron_answered[(job, due)] += 1
    return seen


def delivered(fakes: Fakes, discord_channels: list[str]) -> dict[str, Counter[str]]:
    """Per platform: how many accepted messages name each marker."""
    counts: dict[str, Counter[str]] = {p: Counter() for p in ("telegram", "slack", "discord")}
    for sent in list(fakes.telegram.sent):
        counts["telegram"].update(_answered(sent.text))
    for post in fakes.slack.posts:
        counts["slack"].update(_answered(post.text))
    for channel in discord_channels:
        for message in fakes.discord.messages_in(channel):
            counts["discord"].update(_answered(message.content))
    return counts


def _answered(text: str) -> list[str]:
    found = ANSWERED.search(text)
    return found.group(1).split() if found else []


def check_messages(
    ledger: Ledger, seen: Transcripts, platforms: dict[str, Counter[str]], webchat_seen: set[str]
) -> tuple[dict[str, Any], list[str]]:
    """The per-channel figures and the evidence of every loss, duplicate or disorder."""
    evidence: list[str] = []
    per: dict[str, Counter[str]] = {c: Counter() for c in CHANNELS}
    for item in ledger.sent.values():
        figures = per[item.channel]
        figures[item.status] += 1
        figures["platform_retries"] += item.platform_retries
        asked, answers = seen.asked.get(item.marker, []), seen.answered[item.marker]
        where = f"{item.marker} ({item.channel}, conversation {item.conversation})"
        if len(asked) > 1 or answers > 1:
            figures["duplicated"] += 1
            evidence.append(f"duplicate: {where}: {len(asked)} user rows, {answers} answers")
        if item.status == "accepted" and (not asked or not answers):
            figures["lost"] += 1
            reply = seen.replies.get(seen.run_of.get(item.marker, ""), "")
            evidence.append(f"lost: {where}: {len(asked)} user rows, {answers} answers"
                            + (f"; the run replied {reply[:160]!r}" if reply else ""))  # fmt: skip
        if asked and answers == 1 and len(asked) == 1:
            figures["answered_once"] += 1
            sessions = {s for s, _ in asked} | seen.answered_in[item.marker]
            if len(sessions) > 1:
                figures["misrouted"] += 1
                evidence.append(f"misrouted: {where}: rows in {sorted(sessions)}")
        wrong = item.channel == "openai" and _answered(item.reply) != [item.marker]
        if item.status == "accepted" and wrong:
            figures["wrong_reply"] += 1
            evidence.append(f"wrong reply: {where}: {item.reply[:120]!r}")
        if item.channel in platforms:
            count = platforms[item.channel][item.marker]
            if answers and count == 1:
                figures["delivered_once"] += 1
            elif answers and count == 0:
                figures["not_delivered"] += 1
                evidence.append(f"lost: answered, never delivered on {item.channel}: {where}")
            elif count > 1 or (count and not answers):
                figures["delivered_twice"] += 1
                evidence.append(f"duplicate: delivered {count} times on {item.channel}: {where}")
        if item.channel == "webchat" and item.marker in webchat_seen:
            figures["seen_live"] += 1
    for conversation, marks in ledger.order.items():
        arrived = [m for m in marks if seen.asked.get(m)]
        by_row = sorted(arrived, key=lambda m: seen.asked[m][0][1])
        channel = ledger.sent[marks[0]].channel
        per[channel]["conversations"] += 1
        if by_row != arrived:
            per[channel]["out_of_order"] += 1
            i = next(i for i, (a, b) in enumerate(zip(arrived, by_row, strict=True)) if a != b)
            evidence.append(f"out of order: conversation {conversation}, from message {i + 1}: "
                            f"sent {arrived[i:i + 4]}, transcript {by_row[i:i + 4]}")  # fmt: skip
    return {c: dict(v) for c, v in per.items()}, evidence


# A slot due this close to its job's removal may not have fired yet (on a loaded 2-core CI
# machine the firing can lag its due time by seconds); a scheduler that stopped is still seen.
SLACK_S = 6.0


def check_cron(
    seen: Transcripts,
    every_s: dict[str, float],
    faults: list[dict[str, Any]],
    window: tuple[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Fires per slot: none twice, each answered once; missed slots (a gap wider than the
    interval) counted apart with the faults near them. ``window``: when the jobs were added and
    removed; a job that fired late at the start, or stopped firing before its removal, missed
    the slots of those gaps too (a scheduler that stops after a fault is seen, not hidden)."""
    evidence: list[str] = []
    result: dict[str, Any] = {}
    for job, every in every_s.items():
        slots = sorted(due for (name, due) in seen.cron_asked if name == job)
        twice = [d for d in slots if seen.cron_asked[(job, d)] > 1]
        unanswered = [d for d in slots if seen.cron_answered[(job, d)] == 0]
        answered_twice = [d for d in slots if seen.cron_answered[(job, d)] > 1]
        times = [_parse(d) for d in slots]
        gaps = [(b, (a - b).total_seconds(), round((a - b).total_seconds() / every) - 1)
                for b, a in itertools.pairwise(times)]  # fmt: skip
        if window is not None:
            # The first slot is due one interval after the add (so "added" acts as a slot);
            # at the end, slots due more than SLACK_S before the removal should have fired.
            added, removed = _parse(window[0]), _parse(window[1])
            first = times[0] if times else removed
            lead = (first - added).total_seconds()
            gaps.insert(0, (added, lead, round(lead / every) - 1))
            if times:
                tail = (removed - times[-1]).total_seconds()
                gaps.append((times[-1], tail, int(max(0.0, tail - SLACK_S) // every)))
        missed: list[dict[str, Any]] = []
        for before, gap, count in gaps:
            if gap > 1.5 * every and count > 0:
                near = [
                    f"{f['kind']} {f.get('target', '')} at {f['at']}"
                    for f in faults
                    if -every - 20 <= (_parse(f["at"]) - before).total_seconds() <= gap
                ]
                missed.append({"after": before.isoformat(), "slots": count, "faults_near": near})
        for d in twice + answered_twice:
            evidence.append(f"cron {job}: slot {d} fired or answered twice")
        for d in unanswered:
            evidence.append(f"cron {job}: slot {d} fired but not answered")
        for m in missed:
            evidence.append(f"cron {job}: {m['slots']} slot(s) missed after {m['after']} "
                            f"(faults near: {', '.join(m['faults_near']) or 'none'})")  # fmt: skip
        result[job] = {
            "every_s": every,
            "slots_fired": len(slots),
            "first_slot": slots[0] if slots else None,
            "last_slot": slots[-1] if slots else None,
            "fired_twice": len(twice),
            "answered_twice": len(answered_twice),
            "unanswered": len(unanswered),
            "missed_slots": sum(m["slots"] for m in missed),
            "missed": missed,
        }
    return result, evidence


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def check_memory(
    client: httpx.AsyncClient, ledger: Ledger, seen: Transcripts
) -> tuple[dict[str, Any], list[str]]:
    """Every document ingested through the API is found by its marker; every fact a
    ``remember`` message had the model store is found from its own session."""
    evidence: list[str] = []
    written = found = 0
    for mark, status in ledger.memory_docs.items():
        if status != "accepted":
            continue
        written += 1
        r = await client.get("/api/memory/search", params={"q": mark, "k": 5}, timeout=60)
        if r.status_code == 200 and any(mark in h["text"] for h in r.json()["hits"]):
            found += 1
        else:
            evidence.append(f"memory document soak/{mark}.md not found: {r.status_code}")
    facts = facts_found = 0
    for item in ledger.sent.values():
        # A fact the memory tool refused (memory down: the tool said so) was never stored.
        if item.kind != "remember" or not seen.stored.get(item.marker):
            continue
        facts += 1
        session = seen.asked[item.marker][0][0]
        r = await client.post(
            "/tools/invoke",
            json={
                "tool": "memory_search",
                "args": {"query": fact(item.marker), "k": 10},
                "sessionKey": session,
            },
            timeout=60,
        )
        text = r.json()["content"][0]["text"] if r.status_code == 200 else r.text
        if fact(item.marker) in text:
            facts_found += 1
        else:
            evidence.append(f"memory fact of {item.marker} not found from {session}")
    figures = {
        "documents_written": written,
        "documents_found": found,
        "facts_stored": facts,
        "facts_found": facts_found,
        "documents_unknown": sum(s != "accepted" for s in ledger.memory_docs.values()),
        "facts_refused": sum(not ok for ok in seen.stored.values()),
    }
    return figures, evidence
