"""Store URLs: the one place where a backend is chosen (never by ``os.environ``).

``memory://``, ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` and
``postgresql://user:password@host:5432/db?schema=actae&pool_size=8&sslmode=verify-full``.
Every query option is checked: it reaches every connection, or is refused by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from actae.adapters.persistence.libpq import (
    MAX_NAME_BYTES,
    PASSED_THROUGH,
    check_parameter,
    default_name,
    refusal,
)
from actae.adapters.persistence.turns import DEFAULT_LOCK_WAIT
from actae.domain.errors import ValidationError
from actae.domain.validation import require_int, require_storable

CUSTODY_OPTIONS = ("keyring", "inline_max", "artifacts")
"""Options of every backend: encryption at rest, and where large documents go."""
ACTAE_OPTIONS = ("schema", "pool_size", "max_overflow", "lock_wait", *CUSTODY_OPTIONS)
"""Options of Actae itself; ``connect_timeout`` is libpq's and also bounds a pool wait."""
IDENTIFIER_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")
MAX_POOL_SIZE = 1000
MAX_LOCK_WAIT = 86400
DEFAULT_INLINE_MAX = 256 * 1024
"""Documents up to this many bytes of JSON stay in the event row (docs/performance.md)."""
MIN_INLINE_MAX = 1024
MAX_INLINE_MAX = 64 * 1024 * 1024
DEFAULT_CONNECT_TIMEOUT = "10"
"""Seconds a pool waits for a connection when the URL gives no ``connect_timeout``."""
SECRET_OPTIONS = re.compile(r"(?<=[?&]sslpassword=)[^&#]*")


@dataclass(frozen=True)
class StoreUrl:
    """A parsed store URL: the backend, and what it takes to connect to it.

    ``postgres_conninfo`` holds every libpq parameter: ``psycopg.connect(**conninfo)``.
    """

    backend: str
    display: str
    sqlite_path: str | None = None
    postgres_conninfo: dict[str, str] = field(default_factory=dict)
    postgres_schema: str = "public"
    pool_size: int = 5
    max_overflow: int = 10
    pool_timeout: float = float(DEFAULT_CONNECT_TIMEOUT)
    keyring: str | None = None
    """Path of the keyring file that turns encryption at rest on (``?keyring=``)."""
    inline_max: int = DEFAULT_INLINE_MAX
    """Largest document kept in its event row; larger ones become artifacts."""
    artifacts: str | None = None
    """Where artifacts live: ``None`` in the database itself, or ``file:///path``."""
    lock_wait: float = DEFAULT_LOCK_WAIT
    """Seconds an open waits for its turn at changing the schema (``?lock_wait=``)."""


def parse_store_url(url: str) -> StoreUrl:
    """Parse ``url`` or raise :class:`ValidationError` saying which forms are accepted."""
    if not isinstance(url, str):
        raise ValidationError("url", f"expected a string, got {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        query = url.partition("?")[2]
        return StoreUrl("memory", url, **_custody(_query(query)))
    require_storable("url", url)
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
    base, _, query = url.partition("?")
    if not base.startswith(prefix) or len(base) == len(prefix):
        raise ValidationError("url", f"expected sqlite:///path.db, got {url!r}")
    path = unquote(base[len(prefix) :])
    require_storable("url", path)
    return StoreUrl("sqlite", url, sqlite_path=path, **_custody(_query(query)))


def _custody(options: dict[str, str]) -> dict[str, Any]:
    """The custody options of a URL's query, checked; any other option is refused by name."""
    for name in options:
        if name not in CUSTODY_OPTIONS:
            raise ValidationError(
                f"url.{name}", f"unknown option; this backend takes {', '.join(CUSTODY_OPTIONS)}"
            )
    keyring = options.get("keyring")
    inline_max = _count(
        options, "inline_max", DEFAULT_INLINE_MAX, minimum=MIN_INLINE_MAX, maximum=MAX_INLINE_MAX
    )
    return {
        "keyring": None if keyring is None else unquote(keyring),
        "inline_max": inline_max,
        "artifacts": options.get("artifacts"),
    }


DEAD_SERVER_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""libpq parameters every connection gets unless the URL sets them: a server gone without a TCP
reset is noticed within about 30 s, not the kernel's 15 minutes."""


def _postgres(url: str) -> StoreUrl:
    parts = urlsplit(url)
    display = _masked(url, parts.password)
    options = _query(parts.query)
    for name in options:
        if name not in ACTAE_OPTIONS and name not in PASSED_THROUGH:
            raise refusal(name, known=sorted((*ACTAE_OPTIONS, *PASSED_THROUGH)))
    libpq = {
        **DEAD_SERVER_DEFAULTS,
        **default_name(),
        **{
            name: check_parameter(name, value)
            for name, value in options.items()
            if name in PASSED_THROUGH
        },
    }
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise ValidationError("url", "a PostgreSQL URL needs a database name: postgresql://host/db")
    schema = _schema(options.get("schema", "public"))
    try:
        port = 5432 if parts.port is None else parts.port
    except ValueError:  # urllib refuses a port that is not a number in 0-65535
        raise ValidationError("url", "the port must be a number, e.g. host:5432") from None
    if port == 0:
        raise ValidationError("url", "the port must be a number from 1 to 65535")
    conninfo = {
        "host": unquote(parts.hostname or "127.0.0.1"),
        "port": str(port),
        "dbname": dbname,
        "user": unquote(parts.username or "postgres"),
    }
    if parts.password:
        conninfo["password"] = unquote(parts.password)
    for name, value in conninfo.items():
        require_storable(f"url.{name}", value)
    return StoreUrl(
        "postgresql",
        display,
        postgres_conninfo={**conninfo, **libpq},
        postgres_schema=schema,
        pool_size=_count(options, "pool_size", 5, minimum=1),
        max_overflow=_count(options, "max_overflow", 10, minimum=0),
        lock_wait=float(
            _count(options, "lock_wait", int(DEFAULT_LOCK_WAIT), minimum=1, maximum=MAX_LOCK_WAIT)
        ),
        pool_timeout=float(libpq.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)),
        **_custody({name: value for name, value in options.items() if name in CUSTODY_OPTIONS}),
    )


def _query(query: str) -> dict[str, str]:
    """The URL's query as a dict; a malformed, empty or repeated option is refused."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except (ValueError, UnicodeError):
        raise ValidationError("url", "the query must be name=value pairs joined by &") from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name in options:
            raise ValidationError(f"url.{name}", "is given twice")
        if not value:
            raise ValidationError(f"url.{name}", "has no value")
        require_storable(f"url.{name}", value)
        options[name] = value
    return options


def _count(
    options: dict[str, str], name: str, default: int, *, minimum: int, maximum: int = MAX_POOL_SIZE
) -> int:
    """A whole-number option from ``minimum`` to ``maximum``; ``default`` when absent."""
    text = options.get(name)
    if text is None:
        return default
    if not text.isdecimal():
        raise ValidationError(f"url.{name}", f"expected a whole number, got {text!r:.40}")
    return require_int(f"url.{name}", int(text), minimum=minimum, maximum=maximum)


def _masked(url: str, password: str | None) -> str:
    """The URL to show: its password and any ``sslpassword`` as ``***``."""
    if password:
        url = url.replace(f":{password}@", ":***@", 1)
    return SECRET_OPTIONS.sub("***", url)


def _schema(schema: str) -> str:
    """A schema name PostgreSQL keeps as given and that is not one of its own."""
    if not schema or not set(schema) <= IDENTIFIER_CHARS or schema[0].isdigit():
        raise ValidationError("url.schema", "use lower-case letters, digits and underscores")
    if len(schema.encode()) > MAX_NAME_BYTES:  # cut, two URLs would open one store
        raise ValidationError(
            "url.schema", f"at most {MAX_NAME_BYTES} bytes (PostgreSQL cuts longer names)"
        )
    if schema == "information_schema" or schema.startswith("pg_"):
        raise ValidationError("url.schema", f"{schema!r} belongs to PostgreSQL; choose another")
    return schema
