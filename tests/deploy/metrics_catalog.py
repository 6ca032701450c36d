"""Every Prometheus metric Switchboard's code defines, read from the source (not imported: no
service's dependencies are needed), and the series and labels PromQL expressions use, for the
checks of the alert rules and the Grafana dashboards (tests/deploy/test_alert_rules.py,
test_dashboards.py, test_dashboards_data.py)."""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    ROOT / "libs" / "switchboard" / "switchboard",
    *sorted(ROOT.glob("services/*/switchboard_*")),
)
KINDS = {"Counter", "Gauge", "Histogram", "Summary"}
# The suffixes prometheus_client exposes for each kind (a Counter's name loses a "_total").
SUFFIXES = {
    "Counter": ("_total", "_created"),
    "Gauge": ("",),
    "Histogram": ("_bucket", "_count", "_sum", "_created"),
    "Summary": ("_count", "_sum", "_created"),
}
# Labels every scraped series has (prometheus.yml's targets set `service`), and a histogram's.
TARGET_LABELS = {"job", "instance", "service"}
# Series Prometheus makes of each scrape itself.
SCRAPE_SERIES = {"up"}


@dataclass(frozen=True)
class Metric:
    name: str  # as given to prometheus_client
    kind: str
    labels: tuple[str, ...]
    source: str  # the file that defines it, relative to the repository

    @property
    def base(self) -> str:
        return self.name.removesuffix("_total") if self.kind == "Counter" else self.name

    def series(self) -> dict[str, set[str]]:
        """Each series name Prometheus stores of it -> the labels that series may carry."""
        labels = set(self.labels) | TARGET_LABELS
        return {
            self.base + suffix: labels | ({"le"} if suffix == "_bucket" else set())
            for suffix in SUFFIXES[self.kind]
        }


def _metric(call: ast.Call, source: str) -> Metric | None:
    func = call.func
    kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if kind not in KINDS or not call.args:
        return None
    name = call.args[0]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None  # collections.Counter(...) and the like
    labels: ast.expr | None = call.args[2] if len(call.args) > 2 else None
    for keyword in call.keywords:
        if keyword.arg == "labelnames":
            labels = keyword.value
    names = ast.literal_eval(labels) if labels is not None else ()
    return Metric(name.value, kind, tuple(names), source)


@functools.cache
def defined_metrics() -> dict[str, Metric]:
    """Every metric of the libs and services (tests excluded), by its name."""
    found: dict[str, Metric] = {}
    for top in SOURCES:
        for path in sorted(top.rglob("*.py")):
            if "v1" in path.relative_to(top).parts:
                continue  # generated protobuf code
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    metric = _metric(node, str(path.relative_to(ROOT)))
                    if metric is not None:
                        found[metric.name] = metric
    return found


def exported_series() -> dict[str, set[str]]:
    """Every series name the system's /metrics and Prometheus's scrapes can hold -> its labels."""
    series: dict[str, set[str]] = {name: set(TARGET_LABELS) for name in SCRAPE_SERIES}
    for metric in defined_metrics().values():
        series.update(metric.series())
    return series


# A series selector: `name{matchers}` or a bare name; matchers are `label op "value"`.
SELECTOR = re.compile(r"\b(?P<name>sb_[a-z0-9_]+|up)\b(?:\{(?P<matchers>[^}]*)\})?")
MATCHER = re.compile(r"\s*(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"[^\"]*\"\s*,?")


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(series name, the labels it is matched on) of each selector in a PromQL expression."""
    found = []
    for match in SELECTOR.finditer(expr):
        labels = {m["label"] for m in MATCHER.finditer(match["matchers"] or "")}
        found.append((match["name"], labels))
    return found


def unknown_references(expr: str, known: dict[str, set[str]]) -> list[str]:
    """What ``expr`` selects that the code does not export: unknown series, unknown labels."""
    problems = []
    for name, labels in selectors(expr):
        if name not in known:
            problems.append(f"{name}: no such metric in the code")
        elif labels - known[name]:
            problems.append(f"{name}: no label {sorted(labels - known[name])}")
    return problems
