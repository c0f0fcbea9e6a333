"""Array parameters of the hot paths' driver SQL (``store.base``): the
literals ``array_literal`` writes read back as the same lists on a real
PostgreSQL, through the same ``CAST(:x AS …[])`` the statements use."""

from __future__ import annotations

import pytest

from tickwheel_server.store import create_store_engine
from tickwheel_server.store.base import array_literal, driver_sql, execute_arrays

pytestmark = pytest.mark.postgres

STRINGS = [
    "job_1:1780000000000000", "", "NULL", "null", 'a "quoted" word', "back\\slash", "a,comma", "{braces}",
    " spaced ", "tab\there", "new\nline", "é ü ✓", "'single'",
]


@pytest.mark.parametrize("values, kind", [
    (STRINGS, "TEXT"),
    ([*STRINGS, None, "after a null"], "TEXT"),
    ([None, None], "TEXT"),
    (["plain", "ids", "only"], "TEXT"),
    ([], "TEXT"),
    ([0, -1, 2**62, 7], "BIGINT"),
    ([1, None, 3], "BIGINT"),
    ([1, 2, 3], "INTEGER"),
])  # fmt: skip
def test_a_literal_reads_back_as_the_list(postgres_url: str, values: list, kind: str) -> None:
    engine = create_store_engine(postgres_url)
    try:
        with engine.connect() as conn:
            read = execute_arrays(conn, driver_sql(f"SELECT CAST(:values AS {kind}[])"), {"values": values}).scalar()
    finally:
        engine.dispose()
    assert read == values


def test_the_literal_of_plain_lists_is_one_join() -> None:
    assert array_literal(["a", "b:1"]) == '{"a","b:1"}'
    assert array_literal([3, None, 4]) == "{3,NULL,4}"
    assert array_literal([None]) == "{NULL}"
    assert array_literal(['say "hi"', None]) == '{"say \\"hi\\"",NULL}'
    assert array_literal(["a", "back\\slash"]) == '{"a","back\\\\slash"}'
    assert array_literal(['"', "b"]) == '{"\\"","b"}'
    assert array_literal(["b", None, "\\"]) == '{"b",NULL,"\\\\"}'
    with pytest.raises(TypeError):
        array_literal([1.5, 2.5])
