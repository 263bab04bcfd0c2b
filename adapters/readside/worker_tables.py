"""Coordination between workers, kept beside the read models: run leases and who serves what.

These rows are not projections of events: they say which worker holds a run right now
(``actae_run_leases``, with a token that strictly increases per take-over) and which agents
the live workers can run (``actae_worker_agents``, renewed while a worker lives). From the
latter run_status learns that a running run has no live worker with its workflow
(``unserved``, ``next_action`` "register workflow '<agent>'") without anyone writing on the
run's channel, where a note would move the cursor under the run's own writers.
:class:`actae.adapters.readside.readmodels.ReadModelDB` inherits these methods; they hold no
backend's particulars (its subclasses store values and run statements their backend's way).
"""

# ruff: noqa: S608 - SQL assembled from our own constant table and column names, never input

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from actae.adapters.readside.schema import LEASES, REGRESSIONS, WORKERS


class WorkerTables:
    """``ReadModelDB`` methods for run leases and the agents live workers serve."""

    if TYPE_CHECKING:  # provided by ReadModelDB, one subclass per backend

        def adapt(self, value: Any) -> Any:
            """A Python value in the form this backend's driver stores."""
            ...

        def transaction(self) -> AbstractContextManager[None]:
            """A transaction, or a savepoint inside one."""
            ...

        mark: ClassVar[str]
        """The driver's positional parameter, as statements here write it."""

        def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
            """Run one statement (written with the parameter ``mark``)."""
            ...

        def refresh_runs(self, run_ids: Sequence[Any]) -> None:
            """Recompute the derived columns of these runs."""
            ...

    # -- run ownership leases ---------------------------------------------------------------

    def acquire_lease(self, run_id: Any, worker: str, now: datetime, until: datetime) -> int | None:
        """Take the run if nobody holds a live lease on it; returns the new token."""
        p = self.mark
        with self.transaction():
            row = self.execute(
                f"INSERT INTO {LEASES} AS l (run_id, worker, token, expires_at) "
                f"VALUES ({p}, {p}, 1, {p}) ON CONFLICT (run_id) DO UPDATE SET "
                "worker = excluded.worker, token = l.token + 1, expires_at = excluded.expires_at "
                f"WHERE l.expires_at <= {p} RETURNING token",
                (self._run_key(run_id), worker, self.adapt(until), self.adapt(now)),
            ).fetchone()
        return None if row is None else int(row[0])

    def renew_lease(self, run_id: Any, token: int, until: datetime) -> bool:
        """Extend our lease; False if someone else took the run."""
        p = self.mark
        with self.transaction():
            cursor = self.execute(
                f"UPDATE {LEASES} SET expires_at = {p} WHERE run_id = {p} AND token = {p}",
                (self.adapt(until), self._run_key(run_id), token),
            )
            return bool(cursor.rowcount)

    def release_lease(self, run_id: Any, token: int, now: datetime) -> None:
        """Let the run go (only if we still hold it)."""
        p = self.mark
        with self.transaction():
            self.execute(
                f"UPDATE {LEASES} SET expires_at = {p} WHERE run_id = {p} AND token = {p}",
                (self.adapt(now), self._run_key(run_id), token),
            )

    def _run_key(self, run_id: Any) -> Any:
        """A run id as ``run_status.run_id`` stores it, so the two tables join."""
        return self.adapt(UUID(str(run_id)))

    # -- who serves which agent -------------------------------------------------------------

    def advertise(self, worker: str, agents: Sequence[str], until: datetime) -> None:
        """Say that ``worker`` runs workflows for ``agents`` until ``until`` (store clock)."""
        at, p = self.adapt(until), self.mark
        with self.transaction():
            self.execute(f"DELETE FROM {WORKERS} WHERE worker = {p}", (worker,))
            for agent in agents:
                self.execute(
                    f"INSERT INTO {WORKERS} (worker, agent_id, seen_until) VALUES ({p}, {p}, {p})",
                    (worker, agent, at),
                )

    def mark_unserved(self, now: datetime) -> list[Any]:
        """Flag running runs that no live worker serves (and unflag served ones) at ``now``.

        Returns the runs whose flag changed, after refreshing their next action.
        """
        p = self.mark
        served = (
            f"EXISTS (SELECT 1 FROM {WORKERS} w WHERE w.agent_id = r.agent_id "
            f"AND w.seen_until > {p})"
        )
        with self.transaction():
            rows = self.execute(
                f"SELECT r.run_id, r.unserved, {served} FROM run_status r "
                "WHERE r.lifecycle = 'running'",
                (self.adapt(now),),
            ).fetchall()
            changed = [
                (run, not serves) for run, flagged, serves in rows if bool(flagged) == bool(serves)
            ]
            for run, unserved in changed:
                self.execute(
                    f"UPDATE run_status SET unserved = {p} WHERE run_id = {p}",
                    (self.adapt(unserved), run),
                )
            self.refresh_runs([run for run, _ in changed])
        return [run for run, _ in changed]

    # -- history found behind what a process saw --------------------------------------------

    def mark_regressed(self, channel_id: Any, detail: str, now: datetime) -> None:
        """Say on run_status that ``channel_id``'s history went back (``detail``: how far).

        Not an event: the channel's log is what regressed, and a note on it would be a
        write past the loss. The row stays until an operator deletes it (docs/outages.md).
        """
        p, channel = self.mark, self.adapt(UUID(str(channel_id)))
        with self.transaction():
            self.execute(
                f"INSERT INTO {REGRESSIONS} (channel_id, detail, found_at) VALUES ({p}, {p}, {p}) "
                "ON CONFLICT (channel_id) DO UPDATE SET detail = excluded.detail, "
                "found_at = excluded.found_at",
                (channel, detail, self.adapt(now)),
            )
            rows = self.execute(
                f"SELECT run_id FROM run_status WHERE channel_id = {p}", (channel,)
            ).fetchall()
            self.refresh_runs([row[0] for row in rows])

    # -- retention's lookups ----------------------------------------------------------------

    def due_runs(
        self,
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

    def recently(self, column: str, since: datetime) -> list[tuple[UUID, UUID]]:
        """Runs (and their channels) whose ``column`` (forgotten_at, purged_at) is since."""
        p = self.mark
        with self.transaction():
            rows = self.execute(
                f"SELECT run_id, channel_id FROM run_status WHERE {column} >= {p}",
                (self.adapt(since),),
            ).fetchall()
        return [(UUID(str(row[0])), UUID(str(row[1]))) for row in rows]

    def effect_keys_of(self, run_ids: Sequence[Any]) -> list[str]:
        """The ledger keys of these runs' effects (and of their steps' attempt counters)."""
        p = self.mark
        keys: list[str] = []
        with self.transaction():
            for run_id in run_ids:
                rows = self.execute(
                    f"SELECT effect_key FROM effects WHERE run_id = {p}", (self._run_key(run_id),)
                ).fetchall()
                keys.extend(str(row[0]) for row in rows)
        return keys
