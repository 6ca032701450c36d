"""What the registry cannot say about a service's deployment: the hand-tuned part.

Everything else in a service's Compose service, Kubernetes objects and NATS user follows from its
registry entry (ports, ``needs``, ``calls``, ``scaled``); a new service with no entry here gets
the defaults of :class:`Deploy` (the router's shape: small resources, no volume, no internet).
Each field is here because at least one service differs from that default for a reason the
registry has no word for (a volume, a sandbox's CPU, the model keys it reads).
"""

from __future__ import annotations

from dataclasses import dataclass

WORKSPACES_DIR = "/workspaces"
REPLICAS_SHARE_CONSUMERS = (
    "# Replicas share the durable consumers; lanes keep per-session order (docs/architecture.md).",
)


@dataclass(frozen=True)
class EnvGroup:
    """Settings handed over as a group, under a comment: passed through from the host in
    Compose, optional keys of the Secret in Kubernetes."""

    names: tuple[str, ...]
    comment: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim of the service's own (the shared workspaces claim is not one:
    k8s/base/workspaces.yaml). A ReadWriteOnce claim makes the Deployment ``Recreate``."""

    name: str
    access_mode: str = "ReadWriteOnce"
    storage: str = "10Gi"


@dataclass(frozen=True)
class Volume:
    """A volume mounted at ``path``: the Compose named volume ``compose`` and the Kubernetes
    PersistentVolumeClaim ``claim`` (``read_only`` there: the pod only reads it)."""

    claim: str
    path: str
    compose: str
    compose_comment: str = ""
    read_only: bool = False


@dataclass(frozen=True)
class Resources:
    requests: tuple[str, str] = ("50m", "96Mi")  # cpu, memory
    limits: tuple[str, str] = ("500m", "256Mi")
    limits_memory_comment: str = ""


@dataclass(frozen=True)
class Deploy:
    header: tuple[str, ...] = ()  # k8s/base/<name>.yaml's opening comment (else the summary)
    compose_comment: tuple[str, ...] = ()  # under the Compose service's name
    compose_replicas: int = 1  # Compose's default for ${SB_<NAME>_REPLICAS} (scaled services)
    k8s_replicas: int = 1
    env: tuple[tuple[str, str], ...] = ()  # literal settings, the same in Compose and Kubernetes
    passthrough: tuple[EnvGroup, ...] = ()  # Compose: from the host environment when set
    optional_secrets: tuple[EnvGroup, ...] = ()  # Kubernetes: optional keys of the Secret
    claims: tuple[Claim, ...] = ()
    volumes: tuple[Volume, ...] = ()
    fs_group_change_policy: bool = False  # a large shared volume: chown only on a mismatch
    startup_probe: tuple[str, ...] = ()  # a gRPC startup probe, with this comment
    resources: Resources = Resources()
    tmp_size: str = "64Mi"  # the emptyDir at /tmp
    internet: str = ""  # why it may reach the internet on 443 and 80 ("" = it may not)


def _workspaces(comment: str = "", *, read_only: bool = False) -> Volume:
    return Volume("workspaces", WORKSPACES_DIR, "tools-workspaces", comment, read_only)


MODEL_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "SB_MODEL")
FAILOVER_KEYS = (
    *("SB_MODEL_FALLBACKS", "SB_MODEL_TIERS", "SB_AGENT_MODELS"),
    *("SB_AUTH_PROFILES", "SB_BUDGET", "SB_PRICES"),
)
CHANNEL_SECRETS = (
    *("SB_TELEGRAM_BOT_TOKEN", "SB_TELEGRAM_WEBHOOK_SECRET", "SB_TELEGRAM_ACCOUNTS"),
    *("SB_SLACK_BOT_TOKEN", "SB_SLACK_SIGNING_SECRET", "SB_SLACK_ACCOUNTS"),
    *("SB_DISCORD_BOT_TOKEN", "SB_DISCORD_ACCOUNTS"),
    *("SB_HOOKS_TOKEN", "SB_HOOKS_MAPPINGS"),
)
CHANNEL_SETTINGS = (
    *("SB_TELEGRAM_MODE", "SB_TELEGRAM_WEBHOOK_URL"),
    *("SB_DISCORD_PUBLIC_KEY", "SB_DISCORD_APPLICATION_ID"),
)

OVERRIDES: dict[str, Deploy] = {
    "gateway": Deploy(
        header=(
            "# gateway: the HTTP edge (channel webhooks, WebChat, OpenAI-compatible API, admin"
            " API). The only",
            "# service that takes outside traffic: overlays put an Ingress or LoadBalancer in"
            " front of it.",
        ),
        passthrough=(
            EnvGroup(
                (*CHANNEL_SECRETS, *CHANNEL_SETTINGS),
                (
                    "# Chat channels (docs/channels/README.md): passed through from the host"
                    " environment when set;",
                    "# a channel is served when its credentials are.",
                ),
            ),
        ),
        optional_secrets=(
            EnvGroup(
                CHANNEL_SECRETS,
                (
                    "# Chat channels: served when their credentials are in the Secret"
                    " (docs/channels/README.md).",
                ),
            ),
        ),
        resources=Resources(("100m", "128Mi"), ("1", "512Mi")),
        internet="the chat platforms' APIs (Telegram, Slack, Discord) and webhook deliveries",
    ),
    "router": Deploy(
        header=(
            "# router: the inbound pipeline (allowlist, pairing, mention gating, dedupe,"
            " debounce, routing).",
            "# gRPC RouterAdmin (pairing) on 50052 for the gateway, ops HTTP on 9101.",
        ),
        compose_comment=REPLICAS_SHARE_CONSUMERS,
    ),
    "agent": Deploy(
        header=(
            "# agent: the agent runtime (lanes, runs, LLM tool loop). gRPC Sessions on 50051 (with",
            "# grpc.health.v1, used as the startup probe), ops HTTP on 9102. Needs PostgreSQL"
            " and model keys.",
            "# Reads the workspace files (AGENTS.md, SOUL.md, skills...) from the workspaces"
            " volume at",
            "# /workspaces, the one the tools service writes (workspaces.yaml).",
        ),
        compose_comment=REPLICAS_SHARE_CONSUMERS,
        compose_replicas=2,
        env=(("SB_WORKSPACES_DIR", WORKSPACES_DIR),),
        passthrough=(
            EnvGroup(
                (*MODEL_KEYS, *FAILOVER_KEYS),
                ("# Model provider settings: passed through from the host environment when set.",),
            ),
        ),
        optional_secrets=(
            EnvGroup(
                MODEL_KEYS,
                (
                    "# Model settings are optional keys: a deployment sets the ones for its"
                    " provider, and a",
                    "# Secret without them (overlays/dev's generated one) still starts the agent.",
                ),
            ),
            EnvGroup(
                FAILOVER_KEYS,
                ("# Failover and budgets (docs/models.md); SB_AUTH_PROFILES holds keys.",),
            ),
        ),
        volumes=(_workspaces("the agents' files; the tools run in them"),),
        fs_group_change_policy=True,
        startup_probe=(
            "# Start-up (migrations, provider set-up) ends when the gRPC server reports SERVING.",
        ),
        resources=Resources(("200m", "256Mi"), ("2", "1Gi")),
        tmp_size="256Mi",
        internet="the model providers' APIs",
    ),
    "memory": Deploy(
        header=(
            "# memory: embeddings and hybrid search over what each agent remembers (gRPC Memory"
            " on 50053 for",
            "# the agent and the gateway, ops HTTP on 9104). Its vectors live in the Qdrant"
            " server of",
            "# SB_QDRANT_URL (config.yaml; the dev overlay runs one), its cache and documents in"
            " PostgreSQL.",
            "# The local embedding model is in the image. One replica is enough for a household;"
            " with the",
            "# Qdrant server more are fine.",
        ),
        compose_comment=(
            "# One replica: scale it only with the Qdrant server (it is, here); embedded mode's"
            " local",
            "# store is one process's.",
        ),
        resources=Resources(("100m", "384Mi"), ("1", "1Gi")),
        internet="an OpenAI-compatible embeddings API (when configured)",
    ),
    "tools": Deploy(
        header=(
            "# tools: the tool executor sandbox; pulls tool calls from NATS, so it scales on its"
            " own (the",
            "# prod overlay's KEDA ScaledObject, on the TOOLS backlog). Tool workspaces are the"
            " workspaces",
            "# volume at /workspaces (workspaces.yaml), shared with the agent and every other"
            " replica.",
        ),
        compose_comment=REPLICAS_SHARE_CONSUMERS,
        compose_replicas=2,
        env=(("SB_WORKSPACES_DIR", WORKSPACES_DIR),),
        volumes=(_workspaces("shared with agent and scheduler (same path)"),),
        fs_group_change_policy=True,
        resources=Resources(("100m", "128Mi"), ("1", "1Gi")),
        internet="web_fetch and the commands exec runs",
    ),
    "scheduler": Deploy(
        header=(
            "# scheduler: cron, interval and one-shot jobs, heartbeats and watchers (gRPC"
            " Scheduler on 50054",
            "# for the agent's cron tool and the gateway's /api/cron, ops HTTP on 9105). Jobs"
            " live in",
            "# PostgreSQL; replicas share them (each due job is claimed by one, FOR UPDATE SKIP"
            " LOCKED) and",
            "# fire them as system events on NATS (user scheduler: sb.inbound.cron only)."
            " watch_file jobs",
            "# read the agents' workspaces: the workspaces volume (workspaces.yaml), mounted"
            " read-only.",
        ),
        compose_comment=(
            "# Replicas share the jobs: each due job is claimed by one (SELECT ... FOR UPDATE SKIP",
            "# LOCKED). The agents' workspaces are mounted for watch_file jobs.",
        ),
        compose_replicas=2,
        k8s_replicas=2,
        env=(("SB_WORKSPACES_DIR", WORKSPACES_DIR),),
        passthrough=(
            EnvGroup(
                ("SB_QUIET_HOURS",),
                (
                    "# Quiet hours (docs/scheduler.md): passed through from the host"
                    " environment when set.",
                ),
            ),
        ),
        volumes=(_workspaces(read_only=True),),
        fs_group_change_policy=True,
        resources=Resources(("50m", "96Mi"), ("1", "256Mi")),
        internet="webhook and watch_url jobs",
    ),
    "media": Deploy(
        header=(
            "# media: attachments sniffed, checked and stored with a TTL, images resized, audio"
            " transcribed",
            "# (gRPC Media on 50055 for the agent and the gateway, ops HTTP on 9106). The files"
            " live on the",
            "# media-store volume (a PersistentVolumeClaim), their records and expiry in"
            " PostgreSQL. One",
            "# replica: more need a ReadWriteMany volume shared by all (the store and its cleanup"
            " are safe",
            "# for that). Voice notes are transcribed when the secret has"
            " SB_TRANSCRIPTION_API_KEY.",
        ),
        compose_comment=("# One replica: its files are the media-data volume (docs/media.md).",),
        env=(("SB_MEDIA_DIR", "/data/media"),),
        passthrough=(
            EnvGroup(
                ("SB_TRANSCRIPTION_API_KEY", "SB_TRANSCRIPTION_BASE_URL", "SB_TRANSCRIPTION_MODEL"),
                (
                    "# Voice notes: an OpenAI-compatible transcription endpoint, passed"
                    " through when set.",
                ),
            ),
        ),
        optional_secrets=(EnvGroup(("SB_TRANSCRIPTION_API_KEY",)),),
        claims=(Claim("media-store"),),
        volumes=(Volume("media-store", "/data/media", "media-data"),),
        resources=Resources(
            ("100m", "256Mi"),
            ("2", "1536Mi"),
            "A 50 MiB file in memory, and a large image decoded (50 megapixels at most).",
        ),
        internet="attachments fetched by URL and the transcription API",
    ),
}


def of(name: str) -> Deploy:
    """The overrides of a service; the defaults for one with no entry."""
    return OVERRIDES.get(name, Deploy())
