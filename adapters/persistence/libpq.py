"""libpq connection parameters in a PostgreSQL store URL: which are carried, which refused.

A parameter such as ``sslmode=verify-full`` must reach every connection, or some would talk
plaintext while the URL says otherwise: each is carried to all (``PASSED_THROUGH``, checked
here) or refused by name, with the reason. Every connection names itself
(``application_name``: the URL's, else this process's, unless ``PGAPPNAME`` is set).
"""

from __future__ import annotations

import os

from actae.domain.errors import ValidationError
from actae.domain.validation import require_int

DEFAULT_APPLICATION_NAME = "actae"
"""What a connection calls itself when neither its URL nor its process says otherwise."""
MAX_NAME_BYTES = 63
"""PostgreSQL keeps this many bytes of a name (NAMEDATALEN - 1): a longer one is cut."""
_process_name = DEFAULT_APPLICATION_NAME


def name_connections(name: str) -> None:
    """Name the connections this process opens from now on (the CLI's; never the library's)."""
    global _process_name  # noqa: PLW0603 - one name per process, like its argv
    _process_name = name.encode()[:MAX_NAME_BYTES].decode(errors="ignore") or (
        DEFAULT_APPLICATION_NAME
    )


def default_name() -> dict[str, str]:
    """The ``application_name`` a connection gets unless its URL names it (none: ``PGAPPNAME``)."""
    return {} if "PGAPPNAME" in os.environ else {"application_name": _process_name}


ON_OFF = ("0", "1")
CHOICES: dict[str, tuple[str, ...]] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "sslnegotiation": ("postgres", "direct"),
    "sslcertmode": ("disable", "allow", "require"),
    "sslsni": ON_OFF,
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "channel_binding": ("disable", "prefer", "require"),
    "gssencmode": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "keepalives": ON_OFF,
}
WHOLE_NUMBERS: dict[str, tuple[int, int]] = {
    "connect_timeout": (1, 86_400),  # seconds; libpq reads 0 or less as "wait forever"
    "keepalives_idle": (0, 2**31 - 1),
    "keepalives_interval": (0, 2**31 - 1),
    "keepalives_count": (0, 2**31 - 1),
    "tcp_user_timeout": (0, 2**31 - 1),
}
TEXTS = (
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcrl",
    "sslcrldir",
    "passfile",
    "application_name",
    "options",
    "require_auth",
)
PASSED_THROUGH = frozenset({*CHOICES, *WHOLE_NUMBERS, *TEXTS})
"""libpq parameters accepted in a store URL's query and given to every connection."""

IN_THE_URL = "is part of the URL itself: postgresql://user:password@host:port/dbname"
REFUSED: dict[str, str] = {
    "password": "would show in the process list like the rest of the URL; put it in "
    "~/.pgpass or a passfile= file (see docs/connecting.md), or as user:password@host",
    "host": IN_THE_URL,
    "hostaddr": IN_THE_URL,
    "port": IN_THE_URL,
    "user": IN_THE_URL,
    "dbname": IN_THE_URL,
    "service": "a service file's host, port, user and database would be overridden by the "
    "URL's own (or their defaults); write them in the URL and the rest as parameters",
    "client_encoding": "Actae always talks UTF8 to the server",
    "replication": "Actae needs ordinary connections",
    "load_balance_hosts": "Actae connects to one host",
}
"""libpq parameters refused by name: they cannot be carried faithfully."""


def refusal(name: str, *, known: list[str]) -> ValidationError:
    """The error for a query option that is not accepted."""
    if name in REFUSED:
        return ValidationError(f"url.{name}", f"not accepted: {REFUSED[name]}")
    return ValidationError(f"url.{name}", f"unknown option; known: {known}")


def check_parameter(name: str, value: str) -> str:
    """``value`` if it is a valid value of the accepted libpq parameter ``name``."""
    field = f"url.{name}"
    if name in CHOICES and value not in CHOICES[name]:
        raise ValidationError(field, f"expected one of {CHOICES[name]}, got {value!r:.40}")
    if name in WHOLE_NUMBERS:
        if not value.isdecimal():
            raise ValidationError(field, f"expected a whole number, got {value!r:.40}")
        low, high = WHOLE_NUMBERS[name]
        require_int(field, int(value), minimum=low, maximum=high)
    return value
