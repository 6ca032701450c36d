"""NATS users: one per service, each allowed only the subjects it needs (docs/architecture.md,
SECURITY.md).

The permission table below is the one source of truth. :func:`server_config` renders it as a
nats-server ``authorization`` block whose passwords are environment references
(``$SB_NATS_PASSWORD_<USER>``): embedded mode writes it under ``$SB_HOME`` and passes generated
passwords in nats-server's environment; Compose and Kubernetes mount the same text, generated
into ``k8s/components/dev-dependencies/nats-auth.conf``
(``make nats-auth``; a test checks it for drift), with the passwords from secrets.

Each user also gets its own inbox prefix (``_INBOX_<user>``), so no service can listen to the
replies meant for another. ``admin`` (no restrictions) is for operators and test fixtures;
no service runs as admin.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from . import registry
from .bus import Subjects, inbox_prefix, servers

ADMIN = "admin"
# Who creates and updates the streams and KV buckets; the others wait for them to exist.
STREAM_OWNER = "router"
DEPLOY_CONFIG = "k8s/components/dev-dependencies/nats-auth.conf"


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def users() -> list[str]:
    return [ADMIN, *registry.names()]


def password_variable(user: str) -> str:
    """The environment variable nats-server reads ``user``'s password from."""
    return f"SB_NATS_PASSWORD_{user.upper().replace('-', '_')}"


def _consumer(s: Subjects, base: str) -> list[str]:
    """Bind to (create, look up) and pull from a durable consumer of the stream ``base``; ack."""
    stream = s.stream(base)
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
    ]


def _kv(bucket: str, *, listing: bool = False) -> list[str]:
    """Read and write the keys of a KV bucket (``listing``: also list and watch them)."""
    kv = f"KV_{bucket}"
    subjects = [f"$KV.{bucket}.>", f"$JS.API.DIRECT.GET.{kv}.>", f"$JS.API.STREAM.MSG.GET.{kv}"]
    if listing:
        subjects += [
            f"$JS.API.CONSUMER.CREATE.{kv}",
            f"$JS.API.CONSUMER.CREATE.{kv}.>",
            f"$JS.API.CONSUMER.INFO.{kv}.>",
            f"$JS.API.CONSUMER.DELETE.{kv}.>",
            f"$JS.FC.{kv}.>",  # the ordered consumer's flow control answers
        ]
    return subjects


def permissions(service: str, s: Subjects | None = None) -> Permissions:
    """What ``service`` may publish and subscribe to (besides answering requests it received)."""
    s = s or Subjects()
    p = s.prefix
    publish = ["$JS.API.INFO", "$JS.API.STREAM.INFO.*"]
    subscribe = [f"{inbox_prefix(service)}.>", s.health(service), s.health_replicas(service)]
    if service == STREAM_OWNER:
        publish += ["$JS.API.STREAM.CREATE.*", "$JS.API.STREAM.UPDATE.*"]
    if service == "gateway":
        publish += [
            f"{p}.inbound.>",
            f"{p}.deadletter.outbound.>",
            s.runs_abort(),
            s.sessions_command(),  # WebChat's /status, /reset... (answer: inbox)
            s.health("*"),
            s.health_replicas("*"),  # GET /api/health: every replica's answer
            # ... and the backlogs of the router's, the agents' and the executors' consumers
            # (read only: their info).
            f"$JS.API.CONSUMER.INFO.{s.stream('INBOUND')}.router",
            f"$JS.API.CONSUMER.INFO.{s.stream('LANES')}.dispatch",
            f"$JS.API.CONSUMER.INFO.{s.stream('TOOLS')}.executor",
            *_consumer(s, "OUTBOUND"),
            *_kv(s.channel_lease_bucket),
            *_kv(s.outbound_sent_bucket),
        ]
        subscribe += [f"{p}.events.>"]
    elif service == "router":
        # Pairing codes and the answers to chat commands go to the sender's chat as OUTBOUND
        # parts; "/approve <id>" and "/reset" (...) become requests to the agents (answer: inbox).
        publish += [
            f"{p}.lane.>",
            *_consumer(s, "INBOUND"),
            f"{p}.outbound.>",
            *_kv(s.pairing_bucket, listing=True),
            s.approvals_decide(),
            s.sessions_command(),
        ]
    elif service == "agent":
        lanes = s.stream("LANES")
        publish += [
            *_consumer(s, "LANES"),
            f"$JS.API.DIRECT.GET.{lanes}",
            f"$JS.API.DIRECT.GET.{lanes}.>",
            *_kv(s.lease_bucket),
            s.tools_call("*"),
            s.tools_cancel("*"),
            s.tools_specs(),
            f"{p}.approvals.>",
            f"{p}.events.>",
            f"{p}.outbound.>",
            s.runs_abort(),  # Sessions.Abort/Delete and /stop reach the run's replica
            # Sub-agents (sessions_spawn): a child's task, its result announced to the parent,
            # sessions_send: appended to those sessions' lanes (no route to resolve).
            f"{p}.lane.>",
        ]
        subscribe += [
            f"{p}.lane.>",
            s.runs_abort(),
            s.sessions_command(),
            s.tools_result("*"),
            s.tools_update("*"),
            s.tools_changed(),  # an executor's tools changed: the agent's specs are stale
            f"{p}.approvals.>",  # wake-ups of waiting runs, and the router's chat decisions
        ]
    elif service == "tools":
        # The executor only takes calls from TOOLS and answers; it can never start a call.
        publish += [
            *_consumer(s, "TOOLS"),
            s.tools_result("*"),
            s.tools_update("*"),
            s.tools_proc("*"),
            s.tools_procs(),
            s.tools_changed(),
        ]
        subscribe += [s.tools_specs(), s.tools_cancel("*"), s.tools_proc("*"), s.tools_procs()]
    elif service == "scheduler":
        # A fired job is a system event on INBOUND, channel "cron"; nothing else.
        publish += [s.inbound("cron")]
    elif service not in registry.names():
        raise KeyError(f"no NATS permissions for unknown service {service!r}")
    return Permissions(tuple(publish), tuple(subscribe))


def _allow(kind: str, subjects: Iterable[str]) -> list[str]:
    return [f"      {kind}: {{allow: [", *(f'        "{x}"' for x in subjects), "      ]}"]


def server_config(s: Subjects | None = None) -> str:
    """The nats-server ``authorization`` block for every user of :func:`users`."""
    s = s or Subjects()
    lines = [
        "# Generated from libs/switchboard/switchboard/natsauth.py by"
        " `make nats-auth`: do not edit.",
        "# One user per service with the subjects it needs; passwords come from the environment.",
        "authorization {",
        "  users = [",
        f"    {{user: {ADMIN}, password: ${password_variable(ADMIN)}}}",
    ]
    for name in registry.names():
        perms = permissions(name, s)
        lines += [
            f"    {{user: {name}, password: ${password_variable(name)}, permissions: {{",
            *_allow("publish", perms.publish),
            *_allow("subscribe", perms.subscribe),
            "      allow_responses: true",
            "    }}",
        ]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def url_as(url: str, user: str, password: str) -> str:
    """``url`` (``nats://host:port``, or several comma-separated: a cluster's nodes) with
    ``user`` and ``password`` in each URL."""
    login = f"{quote(user, safe='')}:{quote(password, safe='')}"
    with_login = []
    for one in servers(url):
        parts = urlsplit(one)
        with_login.append(
            urlunsplit(parts._replace(netloc=f"{login}@{parts.hostname}:{parts.port}"))
        )
    return ",".join(with_login)


@dataclass(frozen=True)
class Credentials:
    """A password per user (embedded mode and tests generate them). nats-server parses an
    environment value like a config value: one starting with a digit is read as a number and
    refused, so every password starts with a letter and is hex after it."""

    passwords: Mapping[str, str]

    @classmethod
    def generate(cls) -> Credentials:
        return cls({user: "p" + secrets.token_hex(24) for user in users()})

    @classmethod
    def derive(cls, admin_password: str) -> Credentials:
        """Every password from the admin's (HMAC per user): whoever holds the admin password
        (test fixtures) can start services as their own users."""
        key = admin_password.encode()

        def password(user: str) -> str:
            return "p" + hmac.new(key, user.encode(), hashlib.sha256).hexdigest()

        return cls({u: admin_password if u == ADMIN else password(u) for u in users()})

    def server_env(self) -> dict[str, str]:
        """nats-server's environment: the password variables of :func:`server_config`."""
        return {password_variable(user): pw for user, pw in self.passwords.items()}

    def service_env(self, user: str) -> dict[str, str]:
        """What a service (or the admin) connects with."""
        return {"SB_NATS_USER": user, "SB_NATS_PASSWORD": self.passwords[user]}


if __name__ == "__main__":
    sys.stdout.write(server_config())
