"""Strict schema validation of Kubernetes objects, custom resources included, and checkov.

Built-in kinds go through kubernetes-validate (`--strict`: unknown fields are errors); it only
warns about a kind it has no schema for, so custom resources are validated here against the
JSON Schemas of tests/deploy/schemas/ (see its README for where they come from), and a kind
with neither is an error. checkov is not in requirements-dev.txt (its pins conflict with ours:
packaging<24 against pytest's >=24): `make install` puts it in its own virtualenv,
.venv-checkov."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .manifests import ROOT, Doc, run_tool

SCHEMAS = Path(__file__).resolve().parent / "schemas"
# (apiVersion, kind) of each custom resource k8s/ uses -> its JSON Schema.
CUSTOM_RESOURCES = {
    ("keda.sh/v1alpha1", "ScaledObject"): SCHEMAS / "keda.sh-v1alpha1-scaledobject.json",
}
CHECKOV_VENV = ROOT / ".venv-checkov"


def is_custom(doc: Doc) -> bool:
    return (doc.get("apiVersion"), doc.get("kind")) in CUSTOM_RESOURCES


def custom_resource_errors(doc: Doc) -> list[str]:
    """A custom resource's violations of its schema (an unknown field, a wrong type...)."""
    schema = json.loads(CUSTOM_RESOURCES[(doc["apiVersion"], doc["kind"])].read_text())
    validator = jsonschema.Draft202012Validator(schema)
    where = f"{doc['kind']} {doc.get('metadata', {}).get('name')}"
    return [
        f"{where}: {'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(doc)
    ]


def validate_strictly(docs: list[Doc], scratch: Path) -> None:
    """Fail unless every object passes its schema: built-in kinds with kubernetes-validate
    --strict, custom resources with their vendored schema."""
    problems = [error for doc in docs if is_custom(doc) for error in custom_resource_errors(doc)]
    assert not problems, "\n".join(problems)
    built_in = [doc for doc in docs if not is_custom(doc)]
    # As JSON documents: YAML 1.1 readers (kubernetes-validate's) take a plain `off` for false.
    target = scratch / "built-in.yaml"
    target.write_text("".join(f"---\n{json.dumps(doc)}\n" for doc in built_in))
    output = run_tool("kubernetes-validate", "--strict", "--quiet", str(target))
    assert "Couldn't find schema" not in output, f"objects of unknown kinds:\n{output}"


def checkov() -> str:
    """The checkov executable; skipped where it is not installed, but not under CI=true."""
    for candidate in (CHECKOV_VENV / "bin" / "checkov", shutil.which("checkov")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    reason = "checkov is not installed (`make install` puts it in .venv-checkov)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: this must run here, not be skipped)", pytrace=False)
    pytest.skip(reason)


def checkov_failures(manifests: list[Path]) -> set[tuple[str, str, str]]:
    """(file stem, check id, resource) of every failed checkov check on files of Kubernetes
    objects, in one run (checkov's start-up is most of its time). No network: --skip-download
    keeps checkov from fetching its guidelines."""
    files = [argument for path in manifests for argument in ("--file", str(path))]
    command = [
        checkov(),
        *("--framework", "kubernetes", *files),
        *("--output", "json", "--quiet", "--compact", "--skip-download"),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode in {0, 1}, f"checkov failed to run:\n{result.stderr[-2000:]}"
    report: Any = json.loads(result.stdout)
    summary = report.get("summary", report)
    assert summary["resource_count"] > 0 and not summary["parsing_errors"], f"checkov: {summary}"
    return {
        (Path(check["file_path"]).stem, check["check_id"], check["resource"])
        for check in report["results"]["failed_checks"]
    }
