"""The Grafana dashboards of deploy/grafana/dashboards: each is a dashboard Grafana's file
provisioning loads (the model's required fields, unique uids and panel ids, panels inside the
24-column grid, every query on the provisioned Prometheus), the issue's dashboards all exist,
and every query selects only metrics and labels the code exports. That the queries return data
from a running system is tests/deploy/test_dashboards_data.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .manifests import ROOT
from .metrics_catalog import exported_series, selectors, unknown_references

DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
# The dashboards the issue asks for, by uid (the file's name).
EXPECTED = {
    "switchboard-overview",  # RED per service
    "switchboard-lanes",  # lanes and queue wait
    "switchboard-llm",  # model latency, tokens, cost by model
    "switchboard-tools",  # tools and executor backlog
    "switchboard-channels",  # channels
}
PROMETHEUS_UID = "prometheus"  # deploy/grafana/provisioning/datasources
GRID_WIDTH = 24
PANEL_TYPES = {"row", "timeseries", "stat"}


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def queries() -> list[Any]:
    """(dashboard file, panel title, expr) of every query, as pytest parameters."""
    return [
        pytest.param(expr, id=f"{path.stem}:{panel['title']}:{target['refId']}")
        for path in dashboard_files()
        for panel in panels(json.loads(path.read_text()))
        for target in panel.get("targets", [])
        for expr in [target["expr"]]
    ]


def test_the_issues_dashboards_exist() -> None:
    assert {path.stem for path in dashboard_files()} == EXPECTED


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.stem)
def test_a_dashboard_is_a_grafana_dashboard(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] == path.stem, "the uid is the file's name (links stay stable)"
    assert len(dashboard["uid"]) <= 40, "Grafana's uid limit"
    assert isinstance(dashboard["title"], str) and dashboard["title"].startswith("Switchboard")
    assert "id" not in dashboard or dashboard["id"] is None, "provisioned: Grafana assigns ids"
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert "switchboard" in dashboard["tags"]
    assert {"from", "to"} <= set(dashboard["time"])
    assert isinstance(dashboard["templating"]["list"], list)

    all_panels = panels(dashboard)
    ids = [panel["id"] for panel in all_panels]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in all_panels:
        where = f"{path.stem}: {panel.get('title')!r}"
        assert panel["type"] in PANEL_TYPES, where
        assert panel["title"], where
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= set(grid), where
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= GRID_WIDTH, where
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == PROMETHEUS_UID, where
        targets = panel["targets"]
        assert targets, f"{where}: no query"
        ref_ids = [target["refId"] for target in targets]
        assert len(ref_ids) == len(set(ref_ids)), f"{where}: refIds are unique"
        for target in targets:
            assert target["datasource"]["uid"] == PROMETHEUS_UID, where
            assert target["expr"].strip(), where


def test_dashboards_have_unique_uids_and_titles() -> None:
    loaded = [json.loads(path.read_text()) for path in dashboard_files()]
    assert len({d["uid"] for d in loaded}) == len(loaded)
    assert len({d["title"] for d in loaded}) == len(loaded)


@pytest.mark.parametrize("expr", queries())
def test_a_query_selects_metrics_the_code_exports(expr: str) -> None:
    """A renamed metric or label would leave a panel that is empty for ever."""
    assert selectors(expr), "selects no Switchboard series"
    assert not unknown_references(expr, exported_series())
