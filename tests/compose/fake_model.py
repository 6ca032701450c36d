"""The fake model API of the Compose smoke run (a third-party API): tests/fakes/llm.py's
``tool_then_text`` (a ``get_time`` call, then "Tool said: <its result>"), whose final answer also
names the model the request body asked for, so that the smoke run sees from the reply which
model the agent sent, e.g. after the configuration file changed it (tests/compose/configrun.py).

    python -m tests.compose.fake_model --host 0.0.0.0 --port 8999
"""

from __future__ import annotations

import argparse
import contextlib
import re

from tests.fakes.llm import FakeLLM, FakeRequest, Reply, Script, tool_then_text

# How the final answer names the request's model: "Tool said: <result> [model: <name>]".
MODEL_TAG = "[model: {}]"
_MODEL = re.compile(r"\[model: ([^\]]*)\]")


def naming_the_model(script: Script) -> Script:
    """``script``, its text answers followed by the model of the request they answer."""

    def named(request: FakeRequest) -> Reply:
        reply = script(request)
        if reply.text:
            reply.text = f"{reply.text} {MODEL_TAG.format(request.model)}"
        print(f"fake model: a request for model {request.model!r}", flush=True)
        return reply

    return named


def model_named(reply: str) -> str | None:
    """The model a final answer of :func:`naming_the_model` names (None: it names none)."""
    found = _MODEL.search(reply)
    return found.group(1) if found else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.compose.fake_model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8999)
    args = parser.parse_args(argv)
    llm = FakeLLM(naming_the_model(tool_then_text()), host=args.host, port=args.port)

    def announce(server: FakeLLM) -> None:
        print(f"fake model (tool_then_text, naming the model) on {server.base_url}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        llm.serve_forever(announce)


if __name__ == "__main__":
    main()
