"""``switchboard secrets``: fresh credentials for Compose and Kubernetes, as an env file.

Embedded mode makes its own under ``$SB_HOME/secrets``; a deployment takes them from an env file
(Compose reads ``.env``; the Kubernetes dev overlay generates its Secret from ``secrets.env``).
Every value is random (``secrets.token_urlsafe``); nothing is a default anyone else knows.
"""

from __future__ import annotations

import argparse
import secrets
import sys

from switchboard import natsauth

DATABASE_HOST = "postgres:5432"  # the PostgreSQL of Compose and of the dev overlay


def env_file(*, database_url: bool, grafana: bool = False) -> str:
    """The env file's text; ``database_url`` adds SB_DATABASE_URL for the dev PostgreSQL,
    ``grafana`` the admin password of Compose's Grafana."""
    postgres = secrets.token_urlsafe(24)
    values = {
        "SB_GATEWAY_TOKEN": secrets.token_urlsafe(32),
        "SB_SERVICE_TOKEN": secrets.token_urlsafe(32),
        "POSTGRES_PASSWORD": postgres,
        **natsauth.Credentials.generate().server_env(),
    }
    if database_url:  # token_urlsafe needs no percent-encoding in a URL
        values["SB_DATABASE_URL"] = (
            f"postgresql://switchboard:{postgres}@{DATABASE_HOST}/switchboard"
        )
    if grafana:
        values["GRAFANA_ADMIN_PASSWORD"] = secrets.token_urlsafe(24)
    lines = ["# Switchboard credentials, generated: keep this file private (chmod 600)."]
    lines += [f"{name}={value}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(env_file(database_url=args.k8s, grafana=not args.k8s))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "secrets", help="print fresh credentials for Compose (.env) or Kubernetes (secrets.env)"
    )
    parser.add_argument(
        "--k8s", action="store_true", help="add SB_DATABASE_URL for the dev overlay's PostgreSQL"
    )
    parser.set_defaults(func=run)
