"""The one rule by which a run started ahead of its send instant reads as
not started (store/timeline.py): the pure function and the SQL filter agree."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tickwheel_server.store.timeline import GROUPS, is_ahead, may_show, scans, shown, shown_in

STATUSES = ("scheduled", "waiting", "running", "armed", "succeeded", "dead", "canceled")
SHOWN = ("scheduled", "waiting", "running", "succeeded", "dead", "canceled")


def test_a_running_row_is_shown_scheduled_only_before_its_send_instant() -> None:
    assert shown("running", 1_001, 1_000) == "scheduled"
    assert shown("running", 1_000, 1_000) == "running"  # at the instant it is sent
    assert shown("running", 999, 1_000) == "running"
    assert shown("running", None, 1_000) == "running"
    assert shown("armed", None, 1_000) == "scheduled"
    for status in ("scheduled", "waiting", "succeeded", "dead", "canceled"):
        assert shown(status, 5_000, 1_000) == status  # the instant matters to running rows only
    assert not is_ahead("succeeded", 5_000, 1_000) and is_ahead("running", 5_000, 1_000)


def test_what_a_stored_status_may_show() -> None:
    assert may_show(["running"]) == {"running", "scheduled"}
    assert may_show(["armed"]) == {"scheduled"}
    assert may_show(["succeeded", "dead"]) == {"succeeded", "dead"}


@pytest.mark.parametrize("asked", [{s} for s in SHOWN] + [{"running", "scheduled"}, {"running", "dead"}, set(SHOWN)])
def test_the_sql_filter_keeps_exactly_the_rows_shown_with_an_asked_status(asked) -> None:
    """Every stored status and hand-out instant, through ``shown_in`` on
    SQLite, against :func:`shown` of the same row."""
    now_us = 1_000
    engine = sa.create_engine("sqlite://")
    meta = sa.MetaData()
    rows = sa.Table("executions", meta, sa.Column("id", sa.Integer, primary_key=True), sa.Column("status", sa.Text),
                    sa.Column("handed_out_at", sa.BigInteger))
    meta.create_all(engine)
    stored = [(status, at) for status in STATUSES for at in (None, 999, 1_000, 1_001)]
    with engine.begin() as conn:
        conn.execute(rows.insert(), [dict(id=n, status=s, handed_out_at=at) for n, (s, at) in enumerate(stored)])
        for group in (*GROUPS, ("running", "scheduled")):
            kept = set(conn.execute(sa.select(rows.c.id).where(shown_in(asked, now_us, group, rows))).scalars())
            expected = {n for n, (s, at) in enumerate(stored) if s in group and shown(s, at, now_us) in asked}
            assert kept == expected, (group, asked)


def test_a_status_filter_needs_the_readers_clock() -> None:
    from tickwheel_server.store.tables import executions

    with pytest.raises(ValueError, match="now_us"):
        scans([executions.c.id], statuses=["running"])
    assert len(scans([executions.c.id])) == len(GROUPS)  # no filter: every group, no clock needed
    # A filter on scheduled reads the running group too (what was started ahead), with the instant.
    scheduled = scans([executions.c.id], statuses=["scheduled"], now_us=5)
    assert [scan.group for scan in scheduled] == [g for g in GROUPS if g != ("succeeded", "dead", "canceled")]
    assert "handed_out_at" in str(next(s for s in scheduled if s.group == ("running",)).query)


def test_the_running_groups_filter_is_always_in_its_statement() -> None:
    """Running rows are read whole (no index orders them): the instant
    condition costs the statement nothing, so a search does not take it
    as unfiltered (which would read up to its scan bound instead of a page)."""
    from sqlalchemy.dialects import postgresql, sqlite

    from tickwheel_server.store.engine import capabilities
    from tickwheel_server.store.tables import executions

    for dialect in (postgresql.psycopg.dialect(), sqlite.pysqlite.dialect()):
        # A tenant's running rows are read a session at a time, a statement that depends on the engine.
        caps = capabilities(dialect)
        for scope in (dict(), dict(tenant="acme"), dict(job_id="job_1")):
            for statuses in (["running"], ["scheduled"]):
                found = scans([executions.c.id], statuses=statuses, now_us=5, narrow=False, caps=caps, **scope)
                [running] = [scan for scan in found if scan.group == ("running",)]
                assert not running.unfiltered and "handed_out_at" in str(running.query), (dialect.name, scope, statuses)
