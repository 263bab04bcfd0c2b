"""Store URLs: the one place where a backend is chosen.

``memory://``, ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` and
``postgresql://user:password@host:5432/db?schema=actae&pool_size=8``. The URL becomes the
complete eventsourcing environment; ``os.environ`` is never consulted, so a stray variable
cannot pick the backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from actae.domain.errors import ValidationError

CODEC_ENV = {
    "MAPPER_TOPIC": "actae.adapters.codec:PydanticMapper",
    "TRANSCODER_TOPIC": "actae.adapters.codec:OrjsonTranscoder",
}
POSTGRES_OPTIONS = {"schema", "pool_size", "max_overflow", "connect_timeout", "sslmode"}
IDENTIFIER_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


@dataclass(frozen=True)
class StoreUrl:
    """A parsed store URL: backend name, eventsourcing env, and connection details."""

    backend: str
    env: dict[str, str]
    display: str
    sqlite_path: str | None = None
    postgres_conninfo: dict[str, str] = field(default_factory=dict)
    postgres_schema: str = "public"


def parse_store_url(url: str) -> StoreUrl:
    """Parse ``url`` or raise :class:`ValidationError` saying which forms are accepted."""
    if not isinstance(url, str):
        raise ValidationError("url", f"expected a string, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return StoreUrl("memory", {"PERSISTENCE_MODULE": "eventsourcing.popo", **CODEC_ENV}, url)
    if scheme == "sqlite":
        return _sqlite(url)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url)
    raise ValidationError(
        "url",
        f"unknown scheme in {url!r}; use memory://, sqlite:///path.db or "
        "postgresql://user@host:5432/db?schema=name",
    )


def _sqlite(url: str) -> StoreUrl:
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        raise ValidationError("url", f"expected sqlite:///path.db, got {url!r}")
    path = unquote(url[len(prefix) :])
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": path,
        "SQLITE_LOCK_TIMEOUT": "30",
        **CODEC_ENV,
    }
    return StoreUrl("sqlite", env, url, sqlite_path=path)


def _postgres(url: str) -> StoreUrl:
    parts = urlsplit(url)
    options = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    unknown = sorted(set(options) - POSTGRES_OPTIONS)
    if unknown:
        known = sorted(POSTGRES_OPTIONS)
        raise ValidationError(f"url.{unknown[0]}", f"unknown option; known: {known}")
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise ValidationError("url", "a PostgreSQL URL needs a database name: postgresql://host/db")
    schema = _schema(options.get("schema", "public"))
    try:
        port = parts.port or 5432
    except ValueError:  # urllib refuses a port that is not a number in 0-65535
        raise ValidationError("url", "the port must be a number, e.g. host:5432") from None
    conninfo = {
        "host": parts.hostname or "127.0.0.1",
        "port": str(port),
        "dbname": dbname,
        "user": unquote(parts.username or "postgres"),
    }
    if parts.password:
        conninfo["password"] = unquote(parts.password)
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": conninfo["dbname"],
        "POSTGRES_HOST": conninfo["host"],
        "POSTGRES_PORT": conninfo["port"],
        "POSTGRES_USER": conninfo["user"],
        "POSTGRES_PASSWORD": conninfo.get("password", ""),
        "POSTGRES_SCHEMA": schema,
        "POSTGRES_POOL_SIZE": options.get("pool_size", "5"),
        "POSTGRES_MAX_OVERFLOW": options.get("max_overflow", "10"),
        "POSTGRES_CONNECT_TIMEOUT": options.get("connect_timeout", "10"),
        "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
        "POSTGRES_LOCK_TIMEOUT": "10",
        "APPLICATION_RECORDER_TOPIC": "actae.adapters.postgres:ActaePostgresRecorder",
        **CODEC_ENV,
    }
    display = url.replace(f":{parts.password}@", ":***@") if parts.password else url
    return StoreUrl("postgresql", env, display, postgres_conninfo=conninfo, postgres_schema=schema)


MAX_SCHEMA_BYTES = 63
"""PostgreSQL silently cuts longer names: two URLs would open one store."""


def _schema(schema: str) -> str:
    """A schema name PostgreSQL keeps as given and that is not one of its own."""
    if not schema or not set(schema) <= IDENTIFIER_CHARS or schema[0].isdigit():
        raise ValidationError("url.schema", "use lower-case letters, digits and underscores")
    if len(schema.encode()) > MAX_SCHEMA_BYTES:
        raise ValidationError(
            "url.schema", f"at most {MAX_SCHEMA_BYTES} bytes (PostgreSQL cuts longer names)"
        )
    if schema == "information_schema" or schema.startswith("pg_"):
        raise ValidationError("url.schema", f"{schema!r} belongs to PostgreSQL; choose another")
    return schema
