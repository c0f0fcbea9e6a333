"""Migrated SQLite stores for tests, without migrating each one (pytest plugin).

Fixtures:

- ``migrated_sqlite_url`` (per test): ``sqlite:///…/store.db`` in the test's
  ``tmp_path``, a file already holding the schema ``migrate()`` makes: a copy
  (SQLite's online backup) of a template that ``migrate()`` (the code under
  test) ran on once per session. What a test sees is what ``migrate()`` on an
  empty file leaves; ``migrate()`` on it applies nothing. Tests of the
  migrations themselves make their own empty file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _migrated_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tickwheel_server.store import create_store_engine, migrate  # the code under test

    path = tmp_path_factory.mktemp("sqlite-template") / "store.db"
    engine = create_store_engine(f"sqlite:///{path}")
    try:
        migrate(engine)
    finally:
        engine.dispose()
    return path


def copy_store(template: Path, target: Path) -> None:
    """Copy the SQLite database ``template`` (with its WAL, if any) into a new file ``target``."""
    source = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    try:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()


@pytest.fixture
def migrated_sqlite_url(_migrated_sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh migrated SQLite store in this test's folder, as a ``sqlite:///`` URL."""
    target = tmp_path / "store.db"
    copy_store(_migrated_sqlite_template, target)
    return f"sqlite:///{target}"
