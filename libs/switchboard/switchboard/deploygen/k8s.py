"""The per-service Kubernetes objects of k8s/base: ``<name>.yaml`` (ServiceAccount, Service,
the service's own claims, Deployment) and the PodDisruptionBudgets. Every Deployment gets the
same hardening (non-root, read-only root, no capabilities, RuntimeDefault seccomp, no API
token), probes on the health port and Prometheus annotations on the ops port."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from .. import natsauth
from ..registry import Service
from . import configfile, overrides
from .compose import ALL_INTERFACES, callee_env

SECRET = "switchboard-secrets"
RUNTIME_ID = 10001
WIDTH = 100


def comment(text: str, indent: str = "") -> list[str]:
    """``text`` as comment lines of at most WIDTH characters."""
    return textwrap.wrap(text, WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ")


def quantity(value: str) -> str:
    """A bare number is quoted (a string in the manifest, as kubectl prints it)."""
    return f'"{value}"' if value.isdigit() else value


def summary(service: Service) -> str:
    """The registry's summary without its list of gRPC APIs, nor the service's name again."""
    text = service.summary.split("; gRPC")[0]
    for named in (f"the {service.name}: ", f"the {service.name} service: "):
        text = text.removeprefix(named)
    return text


def env_value(name: str, value: str) -> list[str]:
    return [f"            - name: {name}", f"              value: {value}"]


def env_secret(name: str, key: str, *, optional: bool = False) -> list[str]:
    lines = [
        f"            - name: {name}",
        "              valueFrom:",
        "                secretKeyRef:",
        f"                  name: {SECRET}",
        f"                  key: {key}",
    ]
    return [*lines, "                  optional: true"] if optional else lines


def callers(service: Service, services: Sequence[Service]) -> list[str]:
    return [s.name for s in services if service.name in s.calls]


def and_list(names: Sequence[str]) -> str:
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def container_env(service: Service, services: Sequence[Service]) -> list[str]:
    deploy = overrides.of(service.name)
    lines = env_value("OTEL_SERVICE_NAME", service.otel_name)
    ordered = [p for p in service.ports if p.public or p.name == "ops"]
    for port in ordered:
        lines += env_value(port.setting, f'"{port.number}"')
    for port in service.ports:
        if port in ordered:
            continue
        if port.name == "grpc":
            who = callers(service, services)
            reach = f" for {and_list([f'the {n}' for n in who])}" if who else ""
            lines.append(
                f"            # gRPC on the pod IP{reach}; every call needs SB_SERVICE_TOKEN."
            )
        lines += env_value(port.host_setting, ALL_INTERFACES)
        lines += env_value(port.setting, f'"{port.number}"')
    for name, value in [*deploy.env, *callee_env(service, services)]:
        lines += env_value(name, value)
    if any(p.public for p in service.ports):
        lines += env_secret("SB_GATEWAY_TOKEN", "SB_GATEWAY_TOKEN")
    if service.port("grpc") or service.calls:
        lines += env_secret("SB_SERVICE_TOKEN", "SB_SERVICE_TOKEN")
    if "postgres" in service.needs:
        lines += env_secret("SB_DATABASE_URL", "SB_DATABASE_URL")
    lines += env_value("SB_CONFIG_FILE", configfile.PATH)
    lines += env_value("SB_NATS_USER", service.name)
    lines += env_secret("SB_NATS_PASSWORD", natsauth.password_variable(service.name))
    for group in deploy.optional_secrets:
        lines += [f"            {c}" for c in group.comment]
        for name in group.names:
            lines += env_secret(name, name, optional=True)
    return lines


def header(service: Service) -> list[str]:
    return list(overrides.of(service.name).header) or comment(
        f"{service.name}: {summary(service)}."
    )


def labels(name: str, indent: str) -> list[str]:
    return [f"{indent}labels:", f"{indent}  app.kubernetes.io/name: {name}"]


def service_objects(service: Service) -> list[str]:
    """The ServiceAccount, the Service and the service's own PersistentVolumeClaims."""
    name = service.name
    lines = [
        "apiVersion: v1",
        "kind: ServiceAccount",
        "metadata:",
        f"  name: {name}",
        *labels(name, "  "),
        "automountServiceAccountToken: false",
        "---",
        "apiVersion: v1",
        "kind: Service",
        "metadata:",
        f"  name: {name}",
        *labels(name, "  "),
        "spec:",
        "  selector:",
        f"    app.kubernetes.io/name: {name}",
        "  ports:",
    ]
    for port in service.ports:
        lines += [
            f"    - name: {port.name}",
            f"      port: {port.number}",
            f"      targetPort: {port.name}",
        ]
        if port.name == "grpc":
            lines.append("      appProtocol: grpc")
    for claim in overrides.of(name).claims:
        lines += [
            "---",
            "apiVersion: v1",
            "kind: PersistentVolumeClaim",
            "metadata:",
            f"  name: {claim.name}",
            *labels(name, "  "),
            "spec:",
            f'  accessModes: ["{claim.access_mode}"]',
            "  resources:",
            "    requests:",
            f"      storage: {claim.storage}",
        ]
    return lines


def deployment(service: Service, services: Sequence[Service]) -> list[str]:
    deploy = overrides.of(service.name)
    name = service.name
    ops = (service.port("ops") or service.health_port).number
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "metadata:",
        f"  name: {name}",
        *labels(name, "  "),
        "spec:",
        f"  replicas: {deploy.k8s_replicas}",
    ]
    if any(c.access_mode == "ReadWriteOnce" for c in deploy.claims):
        lines += [
            "  # The volume is ReadWriteOnce: the old pod goes before the new one starts.",
            "  strategy:",
            "    type: Recreate",
        ]
    lines += [
        "  selector:",
        "    matchLabels:",
        f"      app.kubernetes.io/name: {name}",
        "  template:",
        "    metadata:",
        *labels(name, "      "),
        "      annotations:",
        '        prometheus.io/scrape: "true"',
        f'        prometheus.io/port: "{ops}"',
        "        prometheus.io/path: /metrics",
        "    spec:",
        f"      serviceAccountName: {name}",
        "      automountServiceAccountToken: false",
        "      enableServiceLinks: false",
        "      securityContext:",
        "        runAsNonRoot: true",
        f"        runAsUser: {RUNTIME_ID}",
        f"        runAsGroup: {RUNTIME_ID}",
        f"        fsGroup: {RUNTIME_ID}",
    ]
    if deploy.fs_group_change_policy:
        lines.append("        fsGroupChangePolicy: OnRootMismatch")
    lines += [
        "        seccompProfile:",
        "          type: RuntimeDefault",
        "      containers:",
        f"        - name: {name}",
        f"          image: switchboard/{name}:dev",
        "          ports:",
    ]
    for port in service.ports:
        lines += [f"            - name: {port.name}", f"              containerPort: {port.number}"]
    lines += [
        "          envFrom:",
        "            - configMapRef:",
        "                name: switchboard-config",
        "          env:",
        *container_env(service, services),
    ]
    grpc = service.port("grpc")
    if deploy.startup_probe and grpc:
        lines += [f"          {c}" for c in deploy.startup_probe]
        lines += [
            "          startupProbe:",
            "            grpc:",
            f"              port: {grpc.number}",
            "            periodSeconds: 2",
            "            failureThreshold: 60",
        ]
    health = service.health_port.name
    for probe, path, period in (("liveness", "/healthz", 10), ("readiness", "/readyz", 5)):
        lines += [
            f"          {probe}Probe:",
            "            httpGet:",
            f"              path: {path}",
            f"              port: {health}",
            f"            periodSeconds: {period}",
        ]
    resources = deploy.resources
    lines += [
        "          resources:",
        "            requests:",
        f"              cpu: {quantity(resources.requests[0])}",
        f"              memory: {quantity(resources.requests[1])}",
        "            limits:",
        f"              cpu: {quantity(resources.limits[0])}",
        *comment(resources.limits_memory_comment, "              "),
        f"              memory: {quantity(resources.limits[1])}",
        "          securityContext:",
        "            allowPrivilegeEscalation: false",
        "            readOnlyRootFilesystem: true",
        "            capabilities:",
        '              drop: ["ALL"]',
        "          volumeMounts:",
        "            - name: tmp",
        "              mountPath: /tmp",
        f"            - name: {configfile.VOLUME}",
        f"              mountPath: {configfile.MOUNT_DIR}",
        "              readOnly: true",
    ]
    read_only = ["              readOnly: true"]
    for volume in deploy.volumes:
        lines += [f"            - name: {volume.claim}", f"              mountPath: {volume.path}"]
        lines += read_only if volume.read_only else []
    lines += [
        "      volumes:",
        "        - name: tmp",
        "          emptyDir:",
        f"            sizeLimit: {deploy.tmp_size}",
        f"        - name: {configfile.VOLUME}",
        "          configMap:",
        f"            name: {configfile.CONFIGMAP}",
    ]
    for volume in deploy.volumes:
        lines += [
            f"        - name: {volume.claim}",
            "          persistentVolumeClaim:",
            f"            claimName: {volume.claim}",
        ]
        lines += ["            readOnly: true"] if volume.read_only else []
    return lines


def manifest(service: Service, services: Sequence[Service], banner: list[str]) -> str:
    """The whole of k8s/base/<name>.yaml."""
    lines = [
        *banner,
        *header(service),
        *service_objects(service),
        "---",
        *deployment(service, services),
    ]
    return "\n".join(lines) + "\n"


PDB_HEADER = (
    "# One PodDisruptionBudget per service: a voluntary disruption (a node drained, a cluster",
    "# upgrade) takes at most one pod of a service at a time. maxUnavailable rather than",
    "# minAvailable, so that a single-replica service (overlays/dev, media on its ReadWriteOnce",
    "# volume) never blocks a drain; with two or more replicas (overlays/prod) one keeps serving.",
)


def disruption_budgets(services: Sequence[Service], banner: list[str]) -> str:
    """The whole of k8s/base/disruption-budgets.yaml."""
    blocks = [
        [
            "apiVersion: policy/v1",
            "kind: PodDisruptionBudget",
            "metadata:",
            f"  name: {s.name}",
            *labels(s.name, "  "),
            "spec:",
            "  maxUnavailable: 1",
            "  selector:",
            "    matchLabels:",
            f"      app.kubernetes.io/name: {s.name}",
        ]
        for s in services
    ]
    lines = [*banner, *PDB_HEADER]
    for i, block in enumerate(blocks):
        lines += ["---", *block] if i else block
    return "\n".join(lines) + "\n"


def nats_passwords() -> list[str]:
    """nats-server's environment in components/dev-dependencies: every user's password."""
    lines = []
    for user in natsauth.users():
        variable = natsauth.password_variable(user)
        lines += env_secret(variable, variable)
    return lines


def secret_keys(services: Sequence[Service]) -> list[str]:
    """The comment of k8s/base/config.yaml that says which Deployment takes which key."""

    def line(key: str, users: str) -> str:
        return f"#   {key:<25} {users}"

    lines = [
        line(
            natsauth.password_variable(s.name),
            f"{s.name:<7} (as SB_NATS_PASSWORD, NATS user {s.name})",
        )
        for s in services
    ]
    public = [s.name for s in services if any(p.public for p in s.ports)]
    rpc = [s.name for s in services if s.port("grpc") or s.calls]
    database = [s.name for s in services if "postgres" in s.needs]
    lines.append(
        line("SB_GATEWAY_TOKEN", f"{', '.join(public)} (the bearer token of the HTTP API)")
    )
    lines.append(line("SB_SERVICE_TOKEN", f"{', '.join(rpc)} (gRPC servers and clients)"))
    lines.append(line("SB_DATABASE_URL", ", ".join(database)))
    return lines
