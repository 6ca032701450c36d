"""The configuration file in Compose and Kubernetes (issue 27, part 5; docs/config-file.md, "In
containers"): every service mounts the directory that holds ``switchboard.toml`` read-only,
never the file itself (a subPath or single-file mount never sees an update), names it with
SB_CONFIG_FILE, and the watcher applies a ConfigMap update, which the kubelet makes by swapping
a symlink."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from switchboard.configfile.load import load
from switchboard.configfile.reload import Watcher, reloadable
from switchboard.deploygen import configfile
from switchboard.registry import Service

from .manifests import (
    BASE,
    ROOT,
    SERVICES,
    base_container,
    base_pod,
    compose_services,
    container_env,
    load_doc,
    mounted_volume,
    objects,
    service_id,
)

COMPOSE_BIND = {
    "type": "bind",
    "source": configfile.COMPOSE_DIR,
    "target": configfile.MOUNT_DIR,
    "read_only": True,
}


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_every_deployment_mounts_the_configmap_as_a_directory(service: Service) -> None:
    pod, container = base_pod(service), base_container(service)
    assert container_env(container).get("SB_CONFIG_FILE") == configfile.PATH
    mounts = [m for m in container["volumeMounts"] if m["mountPath"] == configfile.MOUNT_DIR]
    assert len(mounts) == 1, f"{service.name}: no mount at {configfile.MOUNT_DIR}"
    assert "subPath" not in mounts[0], f"{service.name}: a subPath mount never sees updates"
    assert mounts[0].get("readOnly") is True, f"{service.name}: the file must be read-only"
    volume = mounted_volume(pod, container, configfile.MOUNT_DIR)
    assert volume.get("configMap") == {"name": configfile.CONFIGMAP}, volume


def test_the_configmap_is_in_the_base_and_sets_nothing(tmp_path: Path) -> None:
    assert "config-file.yaml" in load_doc(BASE / "kustomization.yaml")["resources"]
    configmap = objects(BASE / "config-file.yaml", "ConfigMap")[configfile.CONFIGMAP]
    assert set(configmap["data"]) == {configfile.FILE_NAME}
    path = tmp_path / configfile.FILE_NAME
    path.write_text(configmap["data"][configfile.FILE_NAME])
    assert load(path, {}).environ == {}  # valid, and only comments


@pytest.mark.parametrize("service", SERVICES, ids=service_id)
def test_every_compose_service_bind_mounts_the_directory(service: Service) -> None:
    compose = compose_services()[service.name]
    assert compose["environment"].get("SB_CONFIG_FILE") == configfile.PATH
    binds = [v for v in compose["volumes"] if isinstance(v, dict)]
    assert binds == [COMPOSE_BIND], f"{service.name}: {binds}"


def test_the_compose_directory_exists_and_its_file_is_not_committed() -> None:
    directory = ROOT / "config"  # Compose refuses to start on a missing bind source
    assert (directory / "switchboard.example.toml").is_file()
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "config/switchboard.toml" in ignored, "a person's own file must stay out of git"


def test_the_example_once_uncommented_is_valid_and_only_sets_what_reloads(
    tmp_path: Path,
) -> None:
    path = tmp_path / configfile.FILE_NAME
    path.write_text(configfile.EXAMPLE)
    variables = set(load(path, {}).environ)
    assert variables, "the example sets nothing once uncommented"
    assert not {v for v in variables if not reloadable(v)}, variables


def publish(directory: Path, version: str, text: str) -> None:
    """What the kubelet does: the data in a new hidden directory, then ``..data`` swapped to it
    by a rename (atomic); ``switchboard.toml`` is a symlink through ``..data``."""
    data = directory / f"..{version}"
    data.mkdir()
    (data / configfile.FILE_NAME).write_text(text)
    link = directory / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, directory / "..data")


async def test_a_configmap_update_reaches_the_running_service(tmp_path: Path) -> None:
    publish(tmp_path, "v1", '[router]\ndm_policy = "allowlist"\n')
    path = tmp_path / configfile.FILE_NAME
    path.symlink_to(f"..data/{configfile.FILE_NAME}")
    applied: list[dict[str, str | None]] = []
    done = asyncio.Event()

    async def apply(changes: dict[str, str | None]) -> None:
        applied.append(changes)
        done.set()

    environ = {"SB_DM_POLICY": "allowlist"}
    watcher = Watcher(path, environ, ["SB_DM_POLICY"], apply, ["router"], poll_s=0.05)
    watching = asyncio.create_task(watcher.run())
    try:
        publish(tmp_path, "v2", '[router]\ndm_policy = "open"\n')
        # The first check imports every settings class: seconds on a busy machine.
        await asyncio.wait_for(done.wait(), 60)
    finally:
        watching.cancel()
    assert applied == [{"SB_DM_POLICY": "open"}]
