"""A server refuses to start on a store missing any migration, also one
older than the newest applied (a store migrated before that migration
existed), and says what to run."""

from __future__ import annotations

import secrets

import pytest
import sqlalchemy as sa

from tickwheel_server.app import StartupError, TickwheelServer
from tickwheel_server.config import ServerConfig
from tickwheel_server.store import create_store_engine, migrate


async def test_a_store_missing_an_older_migration_is_refused(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = create_store_engine(url)
    migrate(engine)
    with engine.begin() as conn:  # as if 0006 had been written after this store was migrated
        conn.execute(sa.text("DELETE FROM schema_migrations WHERE version = 6"))
    engine.dispose()
    server = TickwheelServer(ServerConfig(store=url, etcd="memory", admin_token=secrets.token_urlsafe(24),
                                          listen="127.0.0.1:0"))
    with pytest.raises(StartupError, match="lacks migrations 0006.*tickwheel migrate"):
        await server.start()
    server.engine.dispose()
