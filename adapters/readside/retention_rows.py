"""What retention asks the read models: the runs a policy makes due, and what they left.

Retention (``store.apply_retention``) finds its candidates here, then checks each against
the stored run before anything is written, so a row that lags the log only costs a look.
:class:`actae.adapters.readside.readmodels.ReadModelDB` inherits these methods; they hold
no backend's particulars (its subclasses store values and run statements their backend's
way).
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from actae.adapters.readside.standings import Transactional


class RetentionLookups:
    """``ReadModelDB`` methods that find the runs retention is due to forget or purge.

    Each names what it needs of its ``self`` (``Transactional``), which ``ReadModelDB`` is.
    """

    def due_runs(
        self: Transactional,
        rules: Sequence[tuple[str | None, str, datetime]],
        own_agents: Sequence[str],
        *,
        held: bool,
        limit: int,
    ) -> list[UUID]:
        """Finished runs a retention rule makes due, not purged, oldest end first.

        ``rules`` are (agent, status, ended by); an agent of ``None`` means every agent not
        in ``own_agents``. With ``held`` the runs a legal hold keeps instead. Each is
        checked against the stored run before anything is written, so a row that lags the
        log only costs a look.
        """
        if not rules:
            return []
        p = self.mark
        params: list[Any] = []
        clauses = []
        for agent, status, ended_by in rules:
            clause = f"(lifecycle = {p} AND ended_at <= {p}"
            params += [status, self.adapt(ended_by)]
            if agent is not None:
                clause += f" AND agent_id = {p}"
                params.append(agent)
            elif own_agents:
                clause += f" AND agent_id NOT IN ({', '.join([p] * len(own_agents))})"
                params += list(own_agents)
            clauses.append(clause + ")")
        hold = "coalesce(held, FALSE)" if held else "NOT coalesce(held, FALSE)"
        with self.transaction():
            rows = self.execute(
                f"SELECT run_id FROM run_status WHERE purged_at IS NULL AND {hold} "
                f"AND ({' OR '.join(clauses)}) ORDER BY ended_at, run_id LIMIT {int(limit)}",
                params,
            ).fetchall()
        return [UUID(str(row[0])) for row in rows]

    def recently(self: Transactional, column: str, since: datetime) -> list[tuple[UUID, UUID]]:
        """Runs (and their channels) whose ``column`` (forgotten_at, purged_at) is since."""
        p = self.mark
        with self.transaction():
            rows = self.execute(
                f"SELECT run_id, channel_id FROM run_status WHERE {column} >= {p}",
                (self.adapt(since),),
            ).fetchall()
        return [(UUID(str(row[0])), UUID(str(row[1]))) for row in rows]

    def effect_keys_of(self: Transactional, run_ids: Sequence[Any]) -> list[str]:
        """The ledger keys of these runs' effects (and of their steps' attempt counters)."""
        p = self.mark
        keys: list[str] = []
        with self.transaction():
            for run_id in run_ids:
                run = self.adapt(UUID(str(run_id)))
                rows = self.execute(
                    f"SELECT effect_key FROM effects WHERE run_id = {p}", (run,)
                ).fetchall()
                keys.extend(str(row[0]) for row in rows)
        return keys
