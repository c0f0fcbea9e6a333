"""ListWorkerCredentials' and ListApiKeys' pages on PostgreSQL, shown with
EXPLAIN ANALYZE (``store/credentials.py``, ``store/tenants.py``,
``store/base.py`` ``newest_first``): a page reads about what it answers,
walking an index in the listing's order, never sorting every live row.

The data: 20 000 live worker credentials and 20 000 API keys of 200
tenants (100 each), a tenant ``lone`` with one of each issued first, and
1 000 revoked credentials; ANALYZE'd. The statements explained are those
the stores really send (captured), with their own parameters, for a first
page and a page deep into the listing.

What the planner does, for the record (PostgreSQL 15): a credential page is
a Limit over an Index Scan of ``worker_credentials_live_newest`` (migration
0038), the keyset's ``created_at <=`` its index condition; before it, a
Sort over a Seq Scan of every credential. A page filtered by tenant walks
that index from the keyset, the tenant found by ``strpos`` in each row
(no index serves a name in the JSON list): a tenant holding 1 of 200
credentials reads about 200 a row it answers, ``lone`` (issued first) all
of them. A key page is an Index Scan of ``api_keys_tenant (tenant,
created_at)`` (with an Incremental Sort by id, or a Bitmap scan and Sort
of the tenant's keys from the keyset where the planner prices that lower),
starting at the previous page's last instant; before, it read the
tenant's keys from its newest, the keyset only a filter.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import sqlalchemy as sa

from tickwheel.shared.clock import FakeClock
from tickwheel.shared.ids import from_us, to_us
from tickwheel_server.store import create_store_engine, migrate
from tickwheel_server.store.credentials import WorkerCredentialStore
from tickwheel_server.store.tables import api_keys, tenants, worker_credentials
from tickwheel_server.store.tenants import TenantStore

from tests.support.plans import INDEX_SCANS, captured, describe, nodes, plan, rows_read

pytestmark = pytest.mark.postgres

T = datetime(2027, 1, 4, tzinfo=timezone.utc)
TENANTS = 200
EACH = 100
PAGE = 50


def _populate(engine: sa.Engine) -> None:
    now_us = to_us(T)
    names = [f"t{i:04d}" for i in range(TENANTS)]
    with engine.begin() as conn:
        conn.execute(tenants.insert(), [dict(
            name=name, weight=1, max_concurrency=0, max_jobs=1000, max_payload_bytes=65536, requests_per_second=100,
            state="active", pause_reason="", created_at=now_us, updated_at=now_us, version=1)
            for name in [*names, "lone"]])  # fmt: skip
        creds, keys = [], []
        for k in range(TENANTS * EACH):
            at = now_us + k  # newest last
            creds.append(dict(id=f"wc{k:06d}", secret_hash=b"x", tenants=json.dumps([names[k % TENANTS]]),
                              handlers="[]", http=False, description="", created_at=at,
                              revoked_at=at + 1 if k % 20 == 0 else None))
            keys.append(dict(id=f"ak{k:06d}", tenant=names[k % TENANTS], secret_hash=b"x", description="",
                             created_at=at, expires_at=None))
        creds.append(dict(id="wclone", secret_hash=b"x", tenants=json.dumps(["lone"]), handlers="[]", http=False,
                          description="", created_at=now_us - 1, revoked_at=None))
        keys.append(dict(id="aklone", tenant="lone", secret_hash=b"x", description="", created_at=now_us - 1,
                         expires_at=None))
        conn.execute(worker_credentials.insert(), creds)
        conn.execute(api_keys.insert(), keys)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")


@pytest.fixture
def populated(postgres_url):
    engine = create_store_engine(postgres_url)
    migrate(engine)
    _populate(engine)
    yield engine
    engine.dispose()


async def _sent(engine, call) -> tuple[str, dict]:
    with captured(engine) as seen:
        await call
    [found] = [s for s in seen if "ORDER BY" in s.statement]
    return found.statement, found.parameters


LIVE = TENANTS * EACH * 19 // 20 + 1
"""Live credentials: every twentieth is revoked; ``lone``'s is live."""


@pytest.mark.parametrize("tenant", ["", "t0007", "lone"])
@pytest.mark.parametrize("deep", [False, True], ids=["first", "deep"])
async def test_a_credential_page_walks_its_order_and_sorts_nothing(populated, tenant, deep) -> None:
    store = WorkerCredentialStore(populated, FakeClock(T))
    after = (from_us(to_us(T) + TENANTS * EACH // 2), "wc") if deep else None
    statement, parameters = await _sent(populated, store.list(tenant, after=after, limit=PAGE))
    for mode in ("force_custom_plan", "force_generic_plan"):
        top = plan(populated, statement, parameters, mode=mode, analyze=True)
        shown = (mode, describe(top))
        assert not [n for n in nodes(top) if "Sort" in n["Node Type"]], shown
        assert [n.get("Index Name") for n in nodes(top) if n.get("Relation Name") == "worker_credentials"] == [
            "worker_credentials_live_newest"], shown
        read = rows_read(top, "worker_credentials")
        if not tenant:  # what it answers and one more, however deep
            assert read <= PAGE + 1, (shown, read)
        else:  # a walk from the keyset until the page is full: at most the live ones from there
            assert read <= (LIVE // 2 + 1 if deep else LIVE), (shown, read)


@pytest.mark.parametrize("tenant", ["t0007", "lone"])
@pytest.mark.parametrize("deep", [False, True], ids=["first", "deep"])
async def test_a_key_page_starts_at_its_keyset(populated, tenant, deep) -> None:
    store = TenantStore(populated, FakeClock(T))
    after = (from_us(to_us(T) + TENANTS * EACH // 2), "ak") if deep else None
    statement, parameters = await _sent(populated, store.list_keys(tenant, after=after, limit=PAGE))
    for mode in ("force_custom_plan", "force_generic_plan"):
        top = plan(populated, statement, parameters, mode=mode, analyze=True)
        # Deep: the tenant's keys from the previous page's last instant, not from its newest.
        assert rows_read(top, "api_keys") <= (PAGE + 1 if deep else EACH), (mode, describe(top), rows_read(top, "api_keys"))
        assert [n.get("Index Name") for n in nodes(top) if n["Node Type"] in INDEX_SCANS] == ["api_keys_tenant"]
