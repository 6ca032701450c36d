"""Fixtures of the deployment checks: a copy of k8s/ with generated secrets, and its dev build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from switchboard.cli.secrets_env import env_file

from .manifests import DEV_OVERLAY, K8S, KUSTOMIZATIONS, Doc, kustomize, load_doc, secret_sources


@pytest.fixture(scope="module")
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


@pytest.fixture(scope="module")
def dev_build(k8s_copy: Path) -> list[Doc]:
    """The objects of the built dev overlay."""
    built = kustomize(k8s_copy, DEV_OVERLAY / "kustomization.yaml")
    return [doc for doc in YAML(typ="safe").load_all(built) if doc is not None]
