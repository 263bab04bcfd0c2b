"""Analyst roles on PostgreSQL: SELECT on the read models, nothing on the payloads or keys.

A rebuild's swap drops the granted tables, so analyst roles are remembered in
:data:`ANALYSTS` (by oid: a renamed role stays one, a new role taking a dropped one's name
does not) and the swap calls :func:`regrant`. No role is created here (the DBA's job).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import sql

from actae.adapters.persistence.libpq import MAX_NAME_BYTES
from actae.adapters.persistence.migrations import MIGRATIONS_TABLE
from actae.adapters.persistence.recorders import POSTGRES_EVENTS_TABLE
from actae.adapters.readside.schema import BOOKKEEPING
from actae.domain.errors import NotFoundError, ValidationError
from actae.domain.validation import require_text
from actae.projections.tables import TABLES, VIEWS

ANALYSTS = "actae_analysts"
CUSTODY = (
    "actae_data_keys",
    "actae_artifacts",
    "actae_artifact_chunks",
    "actae_artifact_refs",
    "actae_secrets",
)
PRIVATE = (POSTGRES_EVENTS_TABLE, *BOOKKEEPING, MIGRATIONS_TABLE, *CUSTODY, ANALYSTS)
"""Tables an analyst must not use. Any other ``actae_*`` relation of the schema counts too."""
READ_MODELS = (*(table.name for table in TABLES), *(view.name for view in VIEWS))
LOCK_ORDER = (*(view.name for view in VIEWS), *(table.name for table in TABLES))
"""The read models in the order a rebuild's swap drops them: this module locks them so too."""
ACCESS = "SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER"
"""Every table privilege, as ``has_table_privilege`` takes them (any one counts)."""
IN_SCHEMA = "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = %s "

log = logging.getLogger("actae.projector")


@dataclass(frozen=True)
class Access:
    """What :func:`grant` or :func:`revoke` did: one entry per object, as SQL says it."""

    role: str
    schema: str
    granted: tuple[str, ...]
    revoked: tuple[str, ...]


def check_role_name(role: str) -> str:
    """``role`` if it can name an analyst role, else :class:`ValidationError`."""
    require_text("ROLE", role, max_length=MAX_NAME_BYTES)
    if len(role.encode()) > MAX_NAME_BYTES:
        raise ValidationError("ROLE", f"is longer than PostgreSQL's {MAX_NAME_BYTES}-byte names")
    if role.lower() == "public" or role.startswith("pg_"):
        raise ValidationError("ROLE", f"{role} is not a role of its own: name an analyst's role")
    return role


class GrantingDB(Protocol):
    """PostgreSQL's read models: a connection, a transaction, the creators' turn (vs a swap)."""

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The connection of the transaction a grant runs in."""

    def transaction(self) -> AbstractContextManager[None]:
        """A transaction, or a savepoint inside one."""

    def take_turns(self) -> None:
        """Keep processes that create the read models apart (inside the transaction)."""


def grant(db: GrantingDB, role: str) -> Access:
    """Let ``role`` read the read models and nothing else of the store (safe to repeat).

    Refused, with nothing changed, for a missing role, a superuser, the tables' owner or a
    member of it, or a role that could still use a private table (through PUBLIC or a role).
    """
    with db.transaction():
        schema, oid = _lock_and_find(db, role)
        conn = db.conn
        _remember(conn, schema, oid, role)
        usage = sql.SQL("GRANT USAGE ON SCHEMA {} TO {}")
        conn.execute(usage.format(sql.Identifier(schema), sql.Identifier(role)))
        conn.execute(_on_read_models(sql.SQL("GRANT SELECT ON {} TO {}"), schema, [role]))
        private = _revoke_private(conn, schema, role)
        _refuse_leaks(conn, schema, oid, role, private)
    granted = (f"USAGE ON SCHEMA {schema}", *(f"SELECT ON {name}" for name in READ_MODELS))
    return Access(role, schema, granted, tuple(f"ALL ON {name}" for name in private))


def revoke(db: GrantingDB, role: str) -> Access:
    """Take back what :func:`grant` gave ``role`` (safe to repeat), rebuilds' grants too."""
    with db.transaction():
        schema, oid = _lock_and_find(db, role)
        conn = db.conn
        if _analysts_table(conn, schema) is not None:
            forget = sql.SQL("DELETE FROM {} WHERE role_oid = %s::oid")
            conn.execute(forget.format(sql.Identifier(schema, ANALYSTS)), [oid])
        conn.execute(_on_read_models(sql.SQL("REVOKE ALL ON {} FROM {}"), schema, [role]))
        usage = sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}")
        conn.execute(usage.format(sql.Identifier(schema), sql.Identifier(role)))
        private = _revoke_private(conn, schema, role)
    revoked = (
        *(f"ALL ON {name}" for name in READ_MODELS),
        f"USAGE ON SCHEMA {schema}",
        *(f"ALL ON {name}" for name in private),
    )
    return Access(role, schema, (), revoked)


def regrant(conn: psycopg.Connection[Any]) -> list[str]:
    """Grant the read models again to every analyst role (in a rebuild's swap); their names."""
    schema = _current_schema(conn)
    if schema is None:
        return []
    readable = _analysts_table(conn, schema)
    if readable is None:
        return []
    if not readable:
        log.warning(
            "the rebuilt read models were not granted to the analyst roles: this role cannot "
            "read %s.%s; run actae grant-analyst again for each",
            schema,
            ANALYSTS,
        )
        return []
    rows = conn.execute(
        sql.SQL(
            "SELECT r.rolname FROM {} a JOIN pg_roles r ON r.oid = a.role_oid ORDER BY 1"
        ).format(sql.Identifier(schema, ANALYSTS))
    ).fetchall()
    roles = [str(name) for (name,) in rows]
    if roles:
        conn.execute(_on_read_models(sql.SQL("GRANT SELECT ON {} TO {}"), schema, roles))
    return roles


def _lock_and_find(db: GrantingDB, role: str) -> tuple[str, int]:
    """The store's schema and ``role``'s oid, the read models locked in a swap's order."""
    check_role_name(role)
    db.take_turns()  # the creators' turn (this may create actae_analysts), as ensure_schema
    conn = db.conn
    schema = _current_schema(conn)
    if schema is None:
        raise NotFoundError("schema", "of the store", "the read models' schema is not there")
    names = _names(schema, LOCK_ORDER)
    conn.execute(sql.SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(names))
    found = conn.execute("SELECT oid, rolsuper FROM pg_roles WHERE rolname = %s", [role]).fetchone()
    if found is None:
        raise NotFoundError(
            "role",
            role,
            "create it first (e.g. CREATE ROLE ... LOGIN): creating logins is the DBA's job; "
            "names are case-sensitive, as pg_roles lists them",
        )
    oid, superuser = int(found[0]), bool(found[1])
    if superuser:
        raise ValidationError(
            "ROLE", f"{role} is a superuser: it reads every table whatever is granted"
        )
    _refuse_if_any(
        conn,
        "DISTINCT pg_get_userbyid(c.relowner)",
        "c.relname = ANY(%s) AND pg_has_role(%s::oid, c.relowner, 'MEMBER')",
        [schema, [*READ_MODELS, *PRIVATE], oid],
        lambda names: (
            f"{role} owns the store's tables or is a member of their owner "
            f"({names}): an analyst needs a role of its own"
        ),
    )
    return str(schema), oid


def _current_schema(conn: psycopg.Connection[Any]) -> str | None:
    row = conn.execute("SELECT current_schema()").fetchone()
    return None if row is None else row[0]


def _refuse_if_any(
    conn: psycopg.Connection[Any],
    select: str,
    where: str,
    params: list[Any],
    message: Callable[[str], str],
) -> None:
    """Fail with ``message`` of the names found (a function: a role's name may hold braces)."""
    rows = conn.execute(f"SELECT {select} {IN_SCHEMA}WHERE {where} ORDER BY 1", params).fetchall()
    if rows:
        raise ValidationError("ROLE", message(", ".join(str(name) for (name,) in rows)))


def _analysts_table(conn: psycopg.Connection[Any], schema: str) -> bool | None:
    """Whether this role may read the :data:`ANALYSTS` table (``None``: there is none)."""
    row = conn.execute(
        f"SELECT has_table_privilege(c.oid, 'SELECT') {IN_SCHEMA}WHERE c.relname = %s",
        [schema, ANALYSTS],
    ).fetchone()
    return None if row is None else bool(row[0])


def _remember(conn: psycopg.Connection[Any], schema: str, oid: int, role: str) -> None:
    """Record ``role`` in :data:`ANALYSTS` (made if missing, owned like the read models)."""
    table = sql.Identifier(schema, ANALYSTS)
    if _analysts_table(conn, schema) is None:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (role_oid oid PRIMARY KEY, role text NOT NULL, "
                "granted_at timestamptz NOT NULL DEFAULT now())"
            ).format(table)
        )
        conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(
                table,
                sql.Literal(
                    "Roles granted the read models by actae grant-analyst (role_oid, role as "
                    "named then, granted_at): a rebuild grants its fresh tables to them."
                ),
            )
        )
        owner = conn.execute(
            "SELECT pg_get_userbyid(c.relowner), pg_get_userbyid(c.relowner) <> current_user "
            f"{IN_SCHEMA}WHERE c.relname = %s",
            [schema, TABLES[0].name],
        ).fetchone()
        if owner is not None and owner[1]:  # the rebuilding role must read it
            conn.execute(
                sql.SQL("ALTER TABLE {} OWNER TO {}").format(table, sql.Identifier(owner[0]))
            )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (role_oid, role) VALUES (%s::oid, %s) "
            "ON CONFLICT (role_oid) DO UPDATE SET role = excluded.role"
        ).format(table),
        [oid, role],
    )


def _revoke_private(conn: psycopg.Connection[Any], schema: str, role: str) -> list[str]:
    """Revoke all on :data:`PRIVATE` and any other ``actae_*`` relation from ``role``; those."""
    rows = conn.execute(
        f"SELECT c.relname {IN_SCHEMA}WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND (c.relname = ANY(%s) OR c.relname LIKE 'actae\\_%%') ORDER BY c.relname",
        [schema, list(PRIVATE)],
    ).fetchall()
    found = {str(name) for (name,) in rows}
    named = [name for name in PRIVATE if name in found]
    private = [*named, *sorted(found - set(named))]
    if private:
        revoke_all = sql.SQL("REVOKE ALL ON {} FROM {}")
        conn.execute(revoke_all.format(_names(schema, private), sql.Identifier(role)))
    return private


def _refuse_leaks(
    conn: psycopg.Connection[Any], schema: str, oid: int, role: str, private: list[str]
) -> None:
    """Fail (rolling the grant back) if ``role`` could still use a private table."""
    _refuse_if_any(
        conn,
        "c.relname",
        "c.relname = ANY(%s) AND (has_table_privilege(%s::oid, c.oid, %s) "
        "OR has_any_column_privilege(%s::oid, c.oid, 'SELECT, INSERT, UPDATE, REFERENCES'))",
        [schema, private, oid, ACCESS, oid],
        lambda names: (
            f"{role} could still use {names} through PUBLIC or a role it belongs "
            "to (or pg_read_all_data); revoke those grants first. Nothing was granted"
        ),
    )


def _names(schema: str, names: Any) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(schema, name) for name in names)


def _on_read_models(statement: sql.SQL, schema: str, roles: list[str]) -> sql.Composed:
    grantees = sql.SQL(", ").join(sql.Identifier(role) for role in roles)
    return statement.format(_names(schema, READ_MODELS), grantees)
