"""NATS request/reply through the one helper: the answer parsed, and every way of getting none
(no responder, no answer in time, an answer that is not the message) as one UNAVAILABLE
error. A real NATS server."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.aio.msg import Msg

from switchboard import bus_request
from switchboard.errors import ErrorKind
from switchboard.v1 import sessions_pb2

SUBJECT = "test.request.command"


async def test_the_answer_comes_back_parsed(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:

        async def answer(msg: Msg) -> None:
            asked = sessions_pb2.SessionCommand.FromString(msg.data)
            reply = sessions_pb2.SessionCommandResult(text=f"did {asked.command}", outcome="ok")
            await msg.respond(reply.SerializeToString())

        await nc.subscribe(SUBJECT, cb=answer)
        result = await bus_request.request(
            nc,
            SUBJECT,
            sessions_pb2.SessionCommand(command="status"),
            sessions_pb2.SessionCommandResult,
            10.0,
        )
        assert (result.text, result.outcome) == ("did status", "ok")
    finally:
        await nc.close()


@pytest.mark.parametrize("responder", ["none", "silent", "garbage"])
async def test_no_answer_is_one_unavailable_error(nats_url: str, responder: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        if responder == "silent":

            async def ignore(msg: Msg) -> None:
                return None

            await nc.subscribe(SUBJECT, cb=ignore)
        elif responder == "garbage":

            async def garble(msg: Msg) -> None:
                await msg.respond(b"\x0a\xff")  # a length-delimited field cut short

            await nc.subscribe(SUBJECT, cb=garble)
        await nc.flush()
        with pytest.raises(bus_request.NoAnswer) as caught:
            await bus_request.request(
                nc,
                SUBJECT,
                sessions_pb2.SessionCommand(command="status"),
                sessions_pb2.SessionCommandResult,
                0.5 if responder == "silent" else 10.0,
            )
        assert caught.value.kind is ErrorKind.UNAVAILABLE
        assert str(caught.value).startswith(f"no answer on {SUBJECT} (")
    finally:
        await asyncio.wait_for(nc.close(), 10)
