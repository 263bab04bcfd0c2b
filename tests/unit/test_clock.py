"""The store's clock: the database's on PostgreSQL whatever this host's says, and its warning.

A wrong host clock is simulated by patching ``actae.adapters.persistence.clock.wall_clock``, the
library's single read of the local wall clock.
"""

from __future__ import annotations

import dataclasses
import io
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import actae
from actae.adapters.persistence import clock as clocks
from actae.adapters.persistence import postgres
from actae.adapters.persistence.url import parse_store_url
from tests.helpers import wait_for

HOUR = 3600.0
AGREE = timedelta(milliseconds=50)
"""How close two readings of one clock taken a moment apart must be."""


def skew_host_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    real = clocks.wall_clock
    monkeypatch.setattr(clocks, "wall_clock", lambda: real() + timedelta(seconds=seconds))


def database_now(pg_url: str) -> datetime:
    with psycopg.connect(**parse_store_url(pg_url).postgres_conninfo) as conn:  # type: ignore[arg-type]
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    moment: datetime = row[0]
    return moment


@pytest.mark.parametrize(("skew", "words"), [(HOUR, "ahead of"), (-HOUR, "behind")])
@pytest.mark.postgres
def test_a_worker_whose_host_clock_is_far_off_says_so_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, skew: float, words: str
) -> None:
    skew_host_clock(monkeypatch, skew)
    out = io.StringIO()
    with actae.open(pg_url) as store:
        worker = actae.Worker(store, name="w", registry=actae.Registry(), out=out)
        worker.run_once()
        worker.run_once()
    said = [line for line in out.getvalue().splitlines() if "clock" in line]
    assert said == [
        f"[w] this host's clock is 3600.0 s {words} the database's; leases, timers and "
        "retries use the database's clock, but fix the host's clock (NTP)"
    ]


@pytest.mark.postgres
def test_a_worker_whose_host_clock_is_close_enough_says_nothing(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew_host_clock(monkeypatch, clocks.MAX_HOST_SKEW - 0.5)
    out = io.StringIO()
    with actae.open(pg_url) as store:
        actae.Worker(store, name="w", registry=actae.Registry(), out=out).run_once()
        assert store.clock_skew() == pytest.approx(0.5 - clocks.MAX_HOST_SKEW, abs=0.05)
    assert "clock" not in out.getvalue()


def test_the_warning_starts_just_past_the_limit() -> None:
    assert clocks.skew_warning(clocks.MAX_HOST_SKEW) is None
    assert clocks.skew_warning(-clocks.MAX_HOST_SKEW) is None
    assert clocks.skew_warning(None) is None
    assert "behind" in (clocks.skew_warning(clocks.MAX_HOST_SKEW + 0.01) or "")
    assert "ahead of" in (clocks.skew_warning(-clocks.MAX_HOST_SKEW - 0.01) or "")


@pytest.mark.postgres
def test_a_postgres_store_tells_the_databases_time_on_a_host_an_hour_off(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew_host_clock(monkeypatch, HOUR)
    with actae.open(pg_url) as store:
        before = database_now(pg_url)
        now = store.now()
        after = database_now(pg_url)
        assert before - AGREE <= now <= after + AGREE
        assert store.clock_skew() == pytest.approx(-HOUR, abs=0.05)
        run = store.start_run("w", agent_id="a", state={})
        assert before - AGREE <= store.run(run.run_id).created_at <= database_now(pg_url)


def test_a_single_host_store_runs_on_this_hosts_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew_host_clock(monkeypatch, HOUR)
    with actae.open(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        assert abs(store.now() - clocks.wall_clock()) < AGREE
        assert store.clock_skew() is None


@pytest.mark.postgres
def test_virtual_time_shared_through_a_file_is_based_on_the_databases_clock(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skew_host_clock(monkeypatch, -HOUR)
    shared = actae.OffsetClock(str(tmp_path / "clock"))
    shared.advance(100)
    with actae.open(pg_url, clock=shared) as store:
        before = database_now(pg_url) + timedelta(seconds=100)
        now = store.now()
        after = database_now(pg_url) + timedelta(seconds=100)
        assert before - AGREE <= now <= after + AGREE  # bracketed: a slow connect adds no error
        shared.advance(50)  # every store on this file moves with it
        assert abs(store.now() - now - timedelta(seconds=50)) < AGREE
        assert store.clock_skew() == pytest.approx(HOUR, abs=0.05)
    assert shared.base is None  # the caller's clock is left as it was given


@pytest.mark.postgres
def test_the_database_clock_is_read_again_and_keeps_time_while_it_cannot_be(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conninfo = parse_store_url(pg_url).postgres_conninfo
    clock = postgres.DatabaseClock(conninfo, resample_every=0.05)
    try:
        first = clock.reading
        wait_for(lambda: clock.reading is not first, "a second reading")

        failures: list[str] = []

        def unreachable(_: object) -> postgres.Reading:
            failures.append("refused")
            raise psycopg.OperationalError("connection refused")

        monkeypatch.setattr(postgres, "read_database_clock", unreachable)
        wait_for(lambda: failures, "a reading to fail")
        kept = clock.reading
        assert abs(clock() - database_now(pg_url)) < AGREE  # time goes on from the last one
        monkeypatch.undo()
        wait_for(lambda: clock.reading is not kept, "a reading once the database is back")
        assert abs(clock() - database_now(pg_url)) < AGREE
    finally:
        clock.close()


@pytest.mark.postgres
def test_closing_the_store_stops_reading_the_databases_clock(pg_url: str) -> None:
    with actae.open(pg_url) as store:
        clock = store._service.clock  # the sampler is not public
        assert isinstance(clock, postgres.DatabaseClock)
    clock._sampler.join(timeout=5)
    assert not clock._sampler.is_alive()


@pytest.mark.postgres
def test_the_database_clock_never_runs_backwards_at_a_new_reading(pg_url: str) -> None:
    """A reading a second behind (a failover to a server with its own clock) holds time still."""
    clock = postgres.DatabaseClock(parse_store_url(pg_url).postgres_conninfo, resample_every=3600)
    try:
        before = clock()
        clock.reading = dataclasses.replace(
            clock.reading, database=clock.reading.database - timedelta(seconds=1)
        )
        assert clock() >= before
    finally:
        clock.close()


@pytest.mark.postgres
def test_a_transition_is_never_stamped_before_the_time_the_last_reading_gave(
    pg_url: str,
) -> None:
    """A reading that lands behind the last one does not take a write's time back."""
    with actae.open(pg_url) as store:
        clock = store._service.clock  # the readings are not public
        assert isinstance(clock, postgres.DatabaseClock)
        run = store.start_run("floor", agent_id="a", state={})
        head = store.head(run.channel_id)
        (opened,) = store.events(run.channel_id)
        # A reading a minute behind replaces the last one, as the sampler replaces it.
        clock.reading = dataclasses.replace(
            clock.reading, database=clock.reading.database - timedelta(minutes=1)
        )
        cid, v, c = run.channel_id, head.state_version, head.cursor
        store.transition(cid, kind="k", payload={}, state={}, expected_version=v, expected_cursor=c)
        assert store.events(run.channel_id)[-1].recorded_at >= opened.recorded_at
