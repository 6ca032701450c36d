"""Property-based run of the gateway's own OpenAPI (schemathesis, a short profile): every
operation, called with generated valid and invalid input on the running system (`switchboard
up`, a fake model), answers something other than a 5xx.

The event stream (``/api/sessions/{key}/events``) is left out: it is meant to stay open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from tests.fakes.llm import FakeLLM, text_only
from tests.support.stack import Stack, start_stack, stop_stack

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
def gateway_schema(fuzzed_stack: Stack) -> Any:
    auth = {"Authorization": f"Bearer {fuzzed_stack.token}"}
    spec = httpx.get(f"{fuzzed_stack.url}/openapi.json", headers=auth, timeout=30).json()
    spec["paths"].pop("/api/sessions/{key}/events", None)
    return schemathesis.openapi.from_dict(spec)


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
