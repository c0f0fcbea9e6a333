"""Membership in a list as one statement text (``store.base.one_of`` and
``pairs_in``): ``= ANY (CAST(:p AS TEXT[]))``, and pairs looked up in a
JSON object, on PostgreSQL (and CockroachDB), the expanding ``IN`` on SQLite. Hostile
values find exactly their own rows: a quote, a comma, braces, a backslash
or the word NULL in a value never splits it, ends it or matches another
row; an empty list finds nothing; 10 000 values go in one statement."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tickwheel_server.store.base import one_of, pairs_in
from tickwheel_server.store.engine import capabilities
from tickwheel_server.store.isolation import lock_keys
from tickwheel_server.store.tables import concurrency_keys

from tests.support.plans import captured

HOSTILE = [
    'a "quoted" name', "it's", "a,comma", "{braces}", "back\\slash", "\\", '"', "NULL", "null", "", " spaced ",
    "tab\there", "new\nline", "é ü ✓", "}", "{", "a\\,b", '\\"', "x' OR '1'='1",
]
"""Each is a row of its own; so is every piece a wrong quoting would cut one into."""
DECOYS = ["a", "comma", "braces", "quoted", "it", "s", "b", "x", "1", "back", "slash", "tab", "NUL"]


def _rows(engine, tenant_names: list[tuple[str, str]]) -> None:
    with engine.begin() as conn:
        conn.execute(concurrency_keys.insert(), [
            dict(tenant=t, name=n, max_running=1, running=0, limit_set_at=0) for t, n in tenant_names
        ])  # fmt: skip


@pytest.fixture
def keys(migrated_engine):
    _rows(migrated_engine, [("acme", name) for name in HOSTILE + DECOYS]
          + [("other", name) for name in HOSTILE] + [(name, "k") for name in HOSTILE])  # fmt: skip
    return migrated_engine


def _names(engine, *where) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        query = sa.select(concurrency_keys.c.tenant, concurrency_keys.c.name).where(*where)
        return sorted(tuple(row) for row in conn.execute(query))


@pytest.mark.parametrize("wanted", [HOSTILE, HOSTILE[:1], ["a,comma"], ["{braces}", "absent"], [], ["absent"]])
def test_one_of_finds_exactly_the_rows_of_its_hostile_values(keys, wanted: list[str]) -> None:
    caps = capabilities(keys)
    found = _names(keys, concurrency_keys.c.tenant == "acme", one_of(caps, concurrency_keys.c.name, wanted))
    assert found == sorted(("acme", name) for name in set(wanted) & set(HOSTILE))


@pytest.mark.parametrize("pick", [slice(None), slice(0, 1), slice(2, 5), slice(0, 0)])
def test_pairs_in_pairs_each_value_with_its_own_partner(keys, pick: slice) -> None:
    caps = capabilities(keys)
    # Each hostile name paired with a tenant it has, and once crossed with one it has not.
    wanted = [("other", name) for name in HOSTILE[pick]] + [(name, "k") for name in HOSTILE[pick]]
    crossed = [("k", name) for name in HOSTILE[pick]] + [(name, "other") for name in HOSTILE[pick]]
    found = _names(keys, pairs_in(caps, (concurrency_keys.c.tenant, concurrency_keys.c.name), wanted + crossed,
                                  ("TEXT", "TEXT")))  # fmt: skip
    assert found == sorted(set(wanted))


def test_ten_thousand_values_in_one_statement_of_one_text(migrated_engine) -> None:
    caps = capabilities(migrated_engine)
    many = [f"key_{n:05d},{{\"'\\" for n in range(10_000)]
    _rows(migrated_engine, [("acme", name) for name in many[::2]])
    with captured(migrated_engine) as seen:
        assert len(_names(migrated_engine, one_of(caps, concurrency_keys.c.name, many))) == 5_000
        pairs = [("acme", name) for name in many]
        assert len(_names(migrated_engine, pairs_in(caps, (concurrency_keys.c.tenant, concurrency_keys.c.name),
                                                    pairs, ("TEXT", "TEXT")))) == 5_000  # fmt: skip
        _names(migrated_engine, one_of(caps, concurrency_keys.c.name, many[:3]))
        _names(migrated_engine, pairs_in(caps, (concurrency_keys.c.tenant, concurrency_keys.c.name), pairs[:3],
                                         ("TEXT", "TEXT")))  # fmt: skip
    seen = [sent for sent in seen if sent.statement.startswith("SELECT")]  # not SQLite's BEGIN
    assert len(seen) == 4
    if not caps.is_sqlite:  # one text whatever the length: one prepared plan, one plan-cache entry
        assert seen[0].statement == seen[2].statement and seen[1].statement == seen[3].statement
        assert "ANY (CAST(" in seen[0].statement and "AS JSONB) ?" in seen[1].statement
        assert all(len(sent.parameters) <= 2 for sent in seen)


def test_integer_arrays_and_nulls_are_no_members(migrated_engine) -> None:
    caps = capabilities(migrated_engine)
    _rows(migrated_engine, [("acme", "a")])
    assert _names(migrated_engine, one_of(caps, concurrency_keys.c.running, [0, 7], "INTEGER")) == [("acme", "a")]
    assert _names(migrated_engine, one_of(caps, concurrency_keys.c.running, [None, 7], "INTEGER")) == []
    assert _names(migrated_engine, one_of(caps, concurrency_keys.c.limit_set_at, [2**62, 0], "BIGINT")) == [
        ("acme", "a")
    ]


def test_lock_keys_reads_exactly_the_pairs_asked_for(keys) -> None:
    caps = capabilities(keys)
    wanted = [("other", HOSTILE[0]), (HOSTILE[3], "k"), ("acme", "a,comma"), ("acme", "absent"), ("k", HOSTILE[3])]
    with keys.begin() as conn:
        found = lock_keys(conn, caps, wanted, heads=True)
    assert sorted(found) == sorted(wanted[:3])
    assert all(row.head_ready_at is None for row in found.values())


def test_pairs_whose_text_runs_together_stay_apart(migrated_engine) -> None:
    """A pair is found as one key ``length(a) || ':' || a || b``: pairs
    whose two texts read the same end to end are other keys."""
    caps = capabilities(migrated_engine)
    together = [("ab", "c"), ("a", "bc"), ("1:a", "b"), ("1", ":ab"), ("", "1:ab"), ("é", "x"), ("é:", "")]
    _rows(migrated_engine, together)
    columns = (concurrency_keys.c.tenant, concurrency_keys.c.name)
    for pair in together:
        assert _names(migrated_engine, pairs_in(caps, columns, [pair], ("TEXT", "TEXT"))) == [pair]
    assert _names(migrated_engine, pairs_in(caps, columns, [("a", "b:c"), ("abc", "")], ("TEXT", "TEXT"))) == []
