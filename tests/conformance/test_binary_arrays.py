"""The claim's packed array parameters (``store/binary_arrays.py``) read
back by real PostgreSQL as the values sent, through a store engine's
connection and psycopg's pipeline as the claim's writes send them (with
the COMMIT: a pipelined trip that leaves its transaction open is refused,
nothing sent, since it would arm no idle limit)."""

from __future__ import annotations

import pytest

from tickwheel_server.store import pipeline
from tickwheel_server.store.binary_arrays import BigintArray, ByteaArray, IntegerArray, TextArray

COLUMNS = {
    "texts": (TextArray, "TEXT", ["01KC:2026-12-07T00:00:00Z", "", 'q"\\,{}', "é☃ 日本", None, "NULL"]),
    "same_length": (TextArray, "TEXT", [f"job_{index:05d}" for index in range(2000)]),
    "payloads": (ByteaArray, "BYTEA", [b"{}", b"", bytes(range(256)), None]),
    "partitions": (IntegerArray, "INTEGER", [0, 255, -(2**31), 2**31 - 1, None]),
    "instants": (BigintArray, "BIGINT", [1_796_601_600_000_000, -1, 2**63 - 1, -(2**63), None]),
    "empty": (BigintArray, "BIGINT", []),
}


@pytest.fixture
def engine(migrated_engine):
    if migrated_engine.dialect.name == "sqlite":
        pytest.skip("arrays are PostgreSQL's and CockroachDB's")
    return migrated_engine


def test_every_column_reads_back_as_sent(engine) -> None:
    sql = "SELECT " + ", ".join(f"CAST(%({name})b AS {kind}[])" for name, (_, kind, _) in COLUMNS.items())
    parameters = {name: wrapper(values) for name, (wrapper, _, values) in COLUMNS.items()}
    with engine.begin() as conn:
        direct = conn.exec_driver_sql(sql, parameters).one()
    with engine.connect() as conn:
        (piped,) = pipeline.send(conn, [(sql, parameters)], commit=True)[0]
    for row in (tuple(direct), piped):
        for (name, (_, _, values)), read in zip(COLUMNS.items(), row):
            assert list(read) == values, name


def test_a_value_out_of_the_column_s_range_writes_nothing(engine) -> None:
    import psycopg
    import sqlalchemy as sa

    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE packed_probe (n INTEGER)")
    with pytest.raises((psycopg.DataError, sa.exc.DataError)), engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO packed_probe SELECT 1")
        conn.exec_driver_sql("INSERT INTO packed_probe SELECT unnest(CAST(%(n)b AS INTEGER[]))",
                             {"n": IntegerArray([1, 2**31])})
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM packed_probe").scalar() == 0


def test_a_binary_trip_without_the_commit_is_refused_and_sends_nothing(engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE open_probe (n INTEGER)")
    with engine.begin() as conn:
        with pytest.raises(ValueError, match="idle limit"):
            pipeline.send(conn, [("INSERT INTO open_probe SELECT unnest(CAST(%(n)b AS INTEGER[]))",
                                  {"n": IntegerArray([1, 2])})])
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM open_probe").scalar() == 0
