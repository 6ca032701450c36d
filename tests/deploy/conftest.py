"""Fixtures of the deployment checks: a copy of k8s/ with generated secrets, and its kustomize
builds, each made once per session."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from switchboard.cli.secrets_env import env_file

from .manifests import K8S, KUSTOMIZATIONS, OVERLAYS, Doc, kustomize, load_doc, secret_sources


class Builds:
    """`kubectl kustomize` of kustomizations of the copy of k8s/, each run once."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self._texts: dict[Path, str] = {}
        self._docs: dict[Path, list[Doc]] = {}

    def text(self, kustomization: Path) -> str:
        if kustomization not in self._texts:
            self._texts[kustomization] = kustomize(self.copy, kustomization)
        return self._texts[kustomization]

    def docs(self, kustomization: Path) -> list[Doc]:
        """The objects of the build (shared between tests: read them, never change them)."""
        if kustomization not in self._docs:
            loaded = YAML(typ="safe").load_all(self.text(kustomization))
            self._docs[kustomization] = [doc for doc in loaded if doc is not None]
        return self._docs[kustomization]


@pytest.fixture(scope="session")
def k8s_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """k8s/ copied with a fresh secrets.env for every secretGenerator (as `switchboard secrets
    --k8s` writes it), so that kustomize builds without a secrets.env in the repository."""
    copy = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, copy, ignore=shutil.ignore_patterns("secrets.env"))
    for kustomization in KUSTOMIZATIONS:
        for source in secret_sources(load_doc(kustomization)):
            target = copy / kustomization.parent.relative_to(K8S) / source
            target.write_text(env_file(database_url=True))
            target.chmod(0o600)
    return copy


@pytest.fixture(scope="session")
def builds(k8s_copy: Path) -> Builds:
    return Builds(k8s_copy)


@pytest.fixture(scope="session")
def dev_build(builds: Builds) -> list[Doc]:
    """The objects of the built dev overlay."""
    return builds.docs(OVERLAYS["dev"])


@pytest.fixture(scope="session")
def prod_build(builds: Builds) -> list[Doc]:
    """The objects of the built prod overlay."""
    return builds.docs(OVERLAYS["prod"])


@pytest.fixture(scope="session", params=sorted(OVERLAYS))
def overlay(request: pytest.FixtureRequest, builds: Builds) -> tuple[str, list[Doc]]:
    """(name, objects) of each overlay's build in turn."""
    name: str = request.param
    return name, builds.docs(OVERLAYS[name])
