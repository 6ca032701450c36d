"""Property-based run of the gateway's own OpenAPI (schemathesis, a short profile): every
operation, called with generated valid and invalid input on the running system (`switchboard
up`, a fake model), answers something other than a 5xx; and every operation that takes a JSON
body refuses one nested past ``switchboard.jsonsafe``'s bound with a 400 (OpenAI's shape, or
JSON-RPC's for A2A; issue 23). The webhooks and WebChat are fuzzed in
services/gateway/tests/test_webhook_fuzz.py.

The event stream (``/api/sessions/{key}/events``) is left out: it is meant to stay open."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from switchboard.jsonsafe import MAX_DEPTH
from tests.fakes.llm import FakeLLM, text_only
from tests.support.stack import Stack, start_stack, stop_stack

JSON_RPC_PATHS = ("/a2a", "/mcp")
EXAMPLES = 15  # per operation: a smoke run in `make test`, not an exhaustive one


@pytest.fixture(scope="module")
def fuzzed_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with FakeLLM(text_only("ok")) as llm:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
        stack = start_stack(tmp_path_factory.mktemp("fuzz"), env)
        yield stack
        left = stop_stack(stack)
        assert not left, f"processes left behind: {left}"


@pytest.fixture(scope="module")
def gateway_spec(fuzzed_stack: Stack) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {fuzzed_stack.token}"}
    spec: dict[str, Any] = httpx.get(
        f"{fuzzed_stack.url}/openapi.json", headers=auth, timeout=30
    ).json()
    spec["paths"].pop("/api/sessions/{key}/events", None)
    return spec


@pytest.fixture(scope="module")
def gateway_schema(gateway_spec: dict[str, Any]) -> Any:
    return schemathesis.openapi.from_dict(gateway_spec)


def test_every_json_body_nested_past_the_bound_is_400(
    gateway_spec: dict[str, Any], fuzzed_stack: Stack
) -> None:
    """Each operation with a JSON request body, sent a body nested past jsonsafe's bound and one
    10,000 levels deep (CPython's own parser fails near a thousand): a 400 in OpenAI's shape,
    or a JSON-RPC parse error where the route speaks JSON-RPC."""
    auth = {"Authorization": f"Bearer {fuzzed_stack.token}", "content-type": "application/json"}
    deep = "[" * (MAX_DEPTH + 5) + "1" + "]" * (MAX_DEPTH + 5)
    bodies = [f'{{"model": "switchboard", "messages": {deep}}}', "[" * 10_000 + "]" * 10_000]
    operations = 0
    for path, methods in gateway_spec["paths"].items():
        for method, operation in methods.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" not in content:
                continue
            operations += 1
            url = fuzzed_stack.url + re.sub(r"\{[^}]+\}", "x", path)
            for body in bodies:
                response = httpx.request(method, url, content=body, headers=auth, timeout=60)
                assert response.status_code == 400, (method, path, response.text[:300])
                answer = response.json()
                error = answer["error"]
                if path in JSON_RPC_PATHS:  # A2A's JSON-RPC: a parse error
                    assert (answer["jsonrpc"], error["code"]) == ("2.0", -32700), answer
                else:
                    assert error["code"] == "invalid_json", answer
                assert "deeper than" in error["message"], answer
    assert operations >= 5, operations


def test_no_operation_answers_5xx(gateway_schema: Any, fuzzed_stack: Stack) -> None:
    """Each operation in turn under hypothesis (schemathesis' pytest plugin does not run on
    this pytest); every failure is collected, then reported together."""
    auth = {"Authorization": f"Bearer {fuzzed_stack.token}"}
    failures: list[str] = []
    operations = 0
    for result in gateway_schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case) -> None:
            response = case.call(base_url=fuzzed_stack.url, headers=auth, timeout=60)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:300]}"
            )

        try:
            call()
        except AssertionError as exc:
            failures.append(str(exc))
    assert operations >= 10, operations  # the API's operations were found
    assert not failures, "\n".join(failures)
