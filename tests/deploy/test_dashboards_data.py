"""The dashboards have data and the alert rules evaluate, against a real Prometheus (Debian's
``prometheus`` package) scraping the real services: every service as a process with a scripted
fake model (one system for the module), traffic through the gateway that reaches every service
(a chat turn with a tool call, memory, scheduler, media and router APIs, a refused request),
then every PromQL query of every dashboard panel run through Prometheus's HTTP API must return
a sample with a value. Panels whose metrics cannot have series in such a run are listed below
with the reason, and must indeed be empty (the list cannot go stale)."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from switchboard import registry
from switchboard.embedded import free_port
from tests.fakes.llm import tool_then_text
from tests.support.services import ServiceProcesses, with_fake_model

from .debian_tools import prometheus_tool
from .metrics_catalog import selectors
from .test_dashboards import dashboard_files, panels

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"
MODEL = "gpt-4o-mini"
RATE_INTERVAL = "5m"  # what Grafana's $__rate_interval stands for here: the whole test run
WAIT_S = 90.0  # bound for the scrapes to carry what the traffic did (1 s scrape interval)

# Panels (dashboard uid, title) that cannot have data in a test run, and why.
NO_CHANNEL = "no chat platform is configured in this system (channels have e2e tests of their own)"
EMPTY_PANELS = {
    ("switchboard-channels", "Reply parts out by channel and outcome"): NO_CHANNEL,
    ("switchboard-channels", "Dead letters, last hour"): NO_CHANNEL,
    ("switchboard-channels", "Delivery backlog"): NO_CHANNEL,
    ("switchboard-channels", "Channel leases held"): NO_CHANNEL,
    ("switchboard-channels", "Polling healthy"): NO_CHANNEL,
    ("switchboard-channels", "Poll restarts"): NO_CHANNEL,
    ("switchboard-channels", "Refused by inbound security"): "the test's DM policy is open",
    ("switchboard-llm", "Unpriced model calls"): "the model has an SB_PRICES entry",
    ("switchboard-llm", "Runs stopped by a budget"): "no SB_BUDGET is set",
    ("switchboard-llm", "Failovers by reason"): "the one model never fails",
    ("switchboard-llm", "Compactions by reason"): "two one-turn sessions are never compacted",
    ("switchboard-tools", "Approvals by outcome"): "no tool needs an approval here",
    ("switchboard-tools", "Calls refused by policy"): "the default policy allows get_time",
}
# Metrics of alert rules with no series in a test run, and why.
EMPTY_ALERT_METRICS = {
    "sb_outbound_messages_total": NO_CHANNEL,
    "sb_llm_unpriced_calls_total": "the model has an SB_PRICES entry",
    "sb_agent_budget_stops_total": "no SB_BUDGET is set",
    "sb_agent_failovers_total": "the one model never fails",
}


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_MODEL": f"openai:{MODEL}",
        "SB_PRICES": json.dumps({MODEL: {"input": 0.15, "output": 0.6}}),
    }
    home = tmp_path_factory.mktemp("dashboards")
    script = tool_then_text()  # get_time: a call through the TOOLS stream to the executor
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


def scrape_config(system: ServiceProcesses) -> dict[str, Any]:
    """Like deploy/prometheus/prometheus.yml: every service's ops port, labelled `service`."""
    jobs = [
        {
            "job_name": f"switchboard-{service.name}",
            "static_configs": [
                {
                    "targets": [f"127.0.0.1:{system.ops_ports[service.name]}"],
                    "labels": {"service": service.name},
                }
            ],
        }
        for service in registry.SERVICES
    ]
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": jobs,
    }


class Prometheus:
    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=10)

    def query(self, expr: str) -> list[dict[str, Any]]:
        r = self.http.get("/api/v1/query", params={"query": expr})
        assert r.status_code == 200, f"{expr}: {r.text}"
        body = r.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def has_data(self, expr: str) -> bool:
        """A sample with a value (not NaN: a quantile of nothing observed is no data)."""
        return any(not math.isnan(float(s["value"][1])) for s in self.query(expr))


@pytest.fixture(scope="module")
def prometheus(
    system: ServiceProcesses, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    binary = prometheus_tool("prometheus")
    here = tmp_path_factory.mktemp("prometheus")
    config = here / "prometheus.yml"
    YAML().dump(scrape_config(system), config)
    port = free_port()
    log = open(here / "prometheus.log", "wb")  # noqa: SIM115 (the child owns it)
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={here / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while not ready(server):
            assert proc.poll() is None, (here / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Prometheus did not become ready in 60 s"
            time.sleep(0.2)
        yield server
    finally:
        proc.terminate()
        proc.wait(30)


def ready(server: Prometheus) -> bool:
    try:
        return server.http.get("/-/ready").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def traffic(system: ServiceProcesses, prometheus: Prometheus) -> None:
    """What a while of use would show, in brief: once every target is up, a chat turn with a
    tool call and one call to each service's API through the gateway, twice. A labelled series
    appears at its first event, and a rate needs it to grow between two scrapes: the second
    round comes once every target was scraped after the first."""
    targets = len(registry.SERVICES)
    wait(lambda: len(prometheus.query("up == 1")) == targets, "every target up")
    use(system, "first")
    done = time.time()
    wait(lambda: bool(prometheus.query(f"min(timestamp(up)) > {done}")), "a scrape after it")
    use(system, "second")


def use(system: ServiceProcesses, session: str) -> None:
    headers = {"Authorization": f"Bearer {system.token}", "X-Switchboard-Session": session}
    with httpx.Client(base_url=system.url, headers=headers, timeout=120) as c:
        r = c.post(
            "/v1/chat/completions",
            json={"model": "switchboard", "messages": [{"role": "user", "content": "time?"}]},
        )
        assert r.status_code == 200, r.text
        assert "Tool said" in r.json()["choices"][0]["message"]["content"]  # the tool ran
        # The memory service answers alike each round: an agent that never stored anything
        # (the session's own agent has its turns synced to memory after the first round).
        memory = c.get("/api/memory/search", params={"q": "time", "agent": "nobody"})
        assert memory.status_code == 404, memory.text
        assert c.get("/api/cron").status_code == 200  # scheduler
        assert c.get(f"/api/media/{'0' * 64}").status_code == 404  # media (nothing stored)
        assert c.get("/api/pairing").status_code == 200  # router's admin API
    refused = httpx.get(f"{system.url}/v1/models", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401


def wait(predicate: Any, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(0.5)


def dashboard_queries() -> dict[tuple[str, str, str], str]:
    """(dashboard uid, panel title, refId) -> the query as Prometheus runs it."""
    found = {}
    for path in dashboard_files():
        for panel in panels(json.loads(path.read_text())):
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$__rate_interval", RATE_INTERVAL)
                assert "$" not in expr, f"{expr}: a Grafana variable this test cannot fill"
                found[(path.stem, panel["title"], target["refId"])] = expr
    return found


def diagnose(prometheus: Prometheus, key: tuple[str, str, str], expr: str) -> str:
    """A query without data, and what Prometheus holds of its series (by service)."""
    held = {
        name: {
            s["metric"].get("service", "?"): s["value"][1]
            for s in prometheus.query(f'count by (service) ({{__name__="{name}"}})')
        }
        for name, _ in selectors(expr)
    }
    return f"{key}: {expr}\n    series held (count by service): {held}"


def test_every_dashboard_query_returns_data(prometheus: Prometheus, traffic: None) -> None:
    queries = dashboard_queries()
    expected = {key: expr for key, expr in queries.items() if key[:2] not in EMPTY_PANELS}
    missing = dict(expected)

    def all_have_data() -> bool:
        for key, expr in list(missing.items()):
            if prometheus.has_data(expr):
                del missing[key]
        return not missing

    try:
        wait(all_have_data, "every dashboard query has data")
    except AssertionError:
        problems = [diagnose(prometheus, key, expr) for key, expr in missing.items()]
        pytest.fail("no data:\n" + "\n".join(problems))
    listed = {key[:2] for key in queries}
    assert set(EMPTY_PANELS) <= listed, f"not panels: {set(EMPTY_PANELS) - listed}"
    stale = [k for k, expr in queries.items() if k[:2] in EMPTY_PANELS and prometheus.query(expr)]
    assert not stale, f"panels listed as empty have data (remove them from EMPTY_PANELS): {stale}"


def test_the_alert_rules_evaluate_over_existing_series(
    prometheus: Prometheus, traffic: None
) -> None:
    """Prometheus loaded every rule and evaluates it without error; every series a rule reads
    exists (but for the listed ones), so a renamed label or metric cannot silence an alert."""
    groups = YAML(typ="safe").load(RULES.read_text())["groups"]
    names = {name for g in groups for rule in g["rules"] for name, _ in selectors(rule["expr"])}
    missing = set(names) - set(EMPTY_ALERT_METRICS)

    def all_exist() -> bool:
        for name in list(missing):
            if prometheus.query(f'count({{__name__="{name}"}})'):
                missing.discard(name)
        return not missing

    wait(all_exist, f"series of {sorted(missing)}")
    stale = [n for n in EMPTY_ALERT_METRICS if prometheus.query(f'count({{__name__="{n}"}})')]
    assert not stale, f"listed as empty but have series: {stale}"

    def rules() -> list[dict[str, Any]]:
        r = prometheus.http.get("/api/v1/rules")
        assert r.status_code == 200, r.text
        return [rule for group in r.json()["data"]["groups"] for rule in group["rules"]]

    # A rule's health is "unknown" until its first evaluation.
    wait(lambda: all(rule["health"] != "unknown" for rule in rules()), "every rule evaluated")
    loaded = rules()
    assert len(loaded) == sum(len(g["rules"]) for g in groups), "Prometheus loaded every rule"
    failing = [(rule["name"], rule.get("lastError")) for rule in loaded if rule["health"] != "ok"]
    assert not failing
