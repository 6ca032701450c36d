"""SB_NATS_URL may name several servers, comma-separated (every node of a NATS cluster): the
services connect to any of them (switchboard.bus.servers), and the URL helpers keep the list.
SB_NATS_REPLICAS and SB_NATS_CLUSTER refuse counts outside their bounds with a clear message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchboard import bus, natsauth
from switchboard.cli.main import main
from switchboard.cli.settings import LauncherSettings
from switchboard.embedded import NatsServer, free_port
from switchboard.settings import CommonSettings, describe


def test_servers_splits_the_list_and_refuses_an_empty_one() -> None:
    assert bus.servers("nats://127.0.0.1:4222") == ["nats://127.0.0.1:4222"]
    listed = " nats://a:1, nats://b:2 ,tls://c:3,"
    assert bus.servers(listed) == ["nats://a:1", "nats://b:2", "tls://c:3"]
    with pytest.raises(ValueError, match="SB_NATS_URL holds no server URL"):
        bus.servers(" , ")


def test_url_as_puts_the_login_in_every_url_of_a_list() -> None:
    one = natsauth.url_as("nats://127.0.0.1:4222", "admin", "p/w@x")
    assert one == "nats://admin:p%2Fw%40x@127.0.0.1:4222"
    many = natsauth.url_as("nats://127.0.0.1:1,nats://127.0.0.1:2", "router", "pw")
    assert many == "nats://router:pw@127.0.0.1:1,nats://router:pw@127.0.0.1:2"


async def test_a_service_connects_through_a_list_whose_other_server_is_down(
    nats_server: NatsServer,
) -> None:
    """A list with a port nobody listens on and the real server: the connection is made (on
    the old single-URL code the whole list was one unparsable URL), to the live server."""
    assert nats_server.credentials is not None
    password = nats_server.credentials.passwords["router"]
    dead = f"nats://127.0.0.1:{free_port()}"
    for url in (f"{dead},{nats_server.url}", f"{nats_server.url},{dead}"):
        nc = await bus.connect(url, "list-test", bus.Login("router", password))
        try:
            assert nc.is_connected
            assert nc.connected_url is not None and nc.connected_url.port == nats_server.port
            js = nc.jetstream()
            await bus.ensure_streams(js, bus.Subjects())  # router's right, through the list
            assert "INBOUND" not in await bus.missing_streams(js, bus.Subjects())
        finally:
            await nc.close()


@pytest.mark.parametrize("value", ["0", "6", "three"])
def test_nats_replicas_out_of_bounds_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        CommonSettings.from_environ({"SB_NATS_REPLICAS": value})
    assert describe(caught.value).startswith("nats_replicas: ")
    assert CommonSettings.from_environ({"SB_NATS_REPLICAS": "3"}).nats_replicas == 3
    assert CommonSettings.from_environ({}).nats_replicas == 1


@pytest.mark.parametrize("value", ["0", "6"])
def test_nats_cluster_out_of_bounds_is_refused_by_name(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        LauncherSettings.from_environ({"SB_NATS_CLUSTER": value})
    assert describe(caught.value).startswith("nats_cluster: ")
    assert LauncherSettings.from_environ({}).nats_cluster == 1


def test_up_refuses_a_cluster_size_out_of_bounds_before_starting_anything(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SB_NATS_CLUSTER", raising=False)
    assert main(["up", "--nats-cluster", "0"]) == 2
    assert "--nats-cluster 0: choose 1 to 5" in capsys.readouterr().err
    monkeypatch.setenv("SB_NATS_CLUSTER", "9")
    assert main(["up"]) == 2
    assert "nats_cluster: " in capsys.readouterr().err
