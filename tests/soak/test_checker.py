"""The campaign's checker can fail: each kind of fault it exists to see (a message lost, taken
twice, answered twice, out of order, answered in another session, a reply never delivered or
delivered twice, a cron slot fired twice) is reported, with the message that shows it, on a
planted example; a clean run reports none."""

from __future__ import annotations

from collections import Counter

from tests.soak.checker import Transcripts, check_cron, check_messages
from tests.soak.ledger import Ledger


def ledger_of(*channels: str) -> Ledger:
    """Three accepted messages per channel, one conversation per channel."""
    ledger = Ledger()
    for channel in channels:
        for _ in range(3):
            ledger.new(channel, f"conv-{channel}", "plain").status = "accepted"
    return ledger


def clean(ledger: Ledger) -> tuple[Transcripts, dict[str, Counter[str]]]:
    """What a correct system leaves: one user row and one answer each, in order, in one
    session; one delivery each on the platforms."""
    seen = Transcripts()
    platforms: dict[str, Counter[str]] = {p: Counter() for p in ("telegram", "slack", "discord")}
    for row, item in enumerate(ledger.sent.values()):
        session = f"main:{item.channel}:{item.conversation}"
        seen.asked[item.marker].append((session, row))
        seen.answered[item.marker] += 1
        seen.answered_in[item.marker].add(session)
        if item.channel in platforms:
            platforms[item.channel][item.marker] += 1
        item.reply = f"ANSWER {item.marker}"
    return seen, platforms


def test_a_clean_run_reports_nothing() -> None:
    ledger = ledger_of("openai", "telegram", "webchat")
    seen, platforms = clean(ledger)
    figures, evidence = check_messages(ledger, seen, platforms, set())
    assert evidence == []
    assert figures["telegram"]["answered_once"] == 3 and figures["telegram"]["delivered_once"] == 3
    assert figures["openai"]["accepted"] == 3


def test_every_planted_fault_is_reported() -> None:
    ledger = ledger_of("openai", "api", "telegram", "slack", "discord")
    seen, platforms = clean(ledger)
    marks = {c: [m for m, s in ledger.sent.items() if s.channel == c] for c in ("openai", "api",
             "telegram", "slack", "discord")}  # fmt: skip
    # api: the first message is lost, the second taken twice, the third answered twice.
    lost, taken_twice, answered_twice = marks["api"]
    del seen.asked[lost]
    seen.answered[lost] = 0
    seen.asked[taken_twice].append(("main:api:conv-api", 99))
    seen.answered[answered_twice] += 1
    # telegram: two messages swapped in the transcript; the third answered in another session.
    first, second, third = marks["telegram"]
    seen.asked[first], seen.asked[second] = seen.asked[second], seen.asked[first]
    seen.answered_in[third].add("main:telegram:someone-else")
    # slack: one reply never delivered, one delivered twice; discord: one delivered twice.
    platforms["slack"][marks["slack"][0]] = 0
    platforms["slack"][marks["slack"][1]] = 2
    platforms["discord"][marks["discord"][2]] = 2
    # openai: a 200 whose answer is another message's.
    ledger.sent[marks["openai"][0]].reply = f"ANSWER {marks['openai'][1]}"

    figures, evidence = check_messages(ledger, seen, platforms, set())

    assert figures["api"]["lost"] == 1 and figures["api"]["duplicated"] == 2
    assert figures["telegram"]["out_of_order"] == 1 and figures["telegram"]["misrouted"] == 1
    assert figures["slack"]["not_delivered"] == 1 and figures["slack"]["delivered_twice"] == 1
    assert figures["discord"]["delivered_twice"] == 1
    assert figures["openai"]["wrong_reply"] == 1
    text = "\n".join(evidence)
    for mark in (lost, taken_twice, answered_twice, third, marks["slack"][0],
                 marks["slack"][1], marks["discord"][2], marks["openai"][0]):  # fmt: skip
        assert mark in text, (mark, text)
    assert "out of order: conversation conv-telegram" in text


def test_an_unknown_message_may_arrive_once_but_not_twice() -> None:
    ledger = ledger_of("webchat")
    seen, platforms = clean(ledger)
    never, twice = list(ledger.sent)[:2]
    for mark in (never, twice):
        ledger.sent[mark].status = "unknown"
    del seen.asked[never]
    seen.answered[never] = 0
    seen.answered[twice] += 1
    figures, evidence = check_messages(ledger, seen, platforms, set())
    assert figures["webchat"].get("lost", 0) == 0  # never taken: nothing to answer
    assert figures["webchat"]["duplicated"] == 1 and twice in evidence[0]


def test_a_cron_slot_fired_twice_or_unanswered_is_reported_and_gaps_are_missed_slots() -> None:
    seen = Transcripts()
    slots = ["2026-01-01T00:00:00Z", "2026-01-01T00:00:03Z", "2026-01-01T00:00:12Z"]
    for due in slots:
        seen.cron_asked[("job", due)] += 1
        seen.cron_answered[("job", due)] += 1
    seen.cron_asked[("job", slots[1])] += 1  # fired twice
    seen.cron_answered[("job", slots[2])] = 0  # never answered
    fault = {"at": "2026-01-01T00:00:05+00:00", "kind": "postgres", "target": "postgres"}
    cron, evidence = check_cron(seen, {"job": 3.0}, [fault])
    job = cron["job"]
    assert (job["slots_fired"], job["fired_twice"], job["unanswered"]) == (3, 1, 1)
    assert job["missed_slots"] == 2  # 00:06 and 00:09
    assert job["missed"][0]["faults_near"] == ["postgres postgres at 2026-01-01T00:00:05+00:00"]
    assert len(evidence) == 3 and "2 slot(s) missed after 2026-01-01T00:00:03" in evidence[2]


def test_a_job_that_stops_firing_before_its_removal_or_starts_late_missed_those_slots() -> None:
    seen = Transcripts()
    for second in (3, 6, 9):
        due = f"2026-01-01T00:00:0{second}Z"
        seen.cron_asked[("job", due)] += 1
        seen.cron_answered[("job", due)] += 1
    # Added at 00:00:00 and removed at 00:00:10.5: every slot fired, none missed.
    whole = ("2026-01-01T00:00:00.000+00:00", "2026-01-01T00:00:10.500+00:00")
    assert check_cron(seen, {"job": 3.0}, [], whole)[0]["job"]["missed_slots"] == 0
    # Removed at 00:00:28: the slots of 00:12, 00:15, 00:18 and 00:21 never fired (one due
    # at 00:00:24, closer to the removal than SLACK_S, might not have fired yet).
    late = ("2026-01-01T00:00:00.000+00:00", "2026-01-01T00:00:28.000+00:00")
    cron, evidence = check_cron(seen, {"job": 3.0}, [], late)
    assert cron["job"]["missed_slots"] == 4 and "after 2026-01-01T00:00:09" in evidence[0]
    # Added at 23:59:51: the first slot should have come at 23:59:54.
    early = ("2025-12-31T23:59:51.000+00:00", "2026-01-01T00:00:10.500+00:00")
    assert check_cron(seen, {"job": 3.0}, [], early)[0]["job"]["missed_slots"] == 3
