"""Schema migrations, applied in version order by :mod:`tickwheel_server.store.migrate`.

Add ``NNNN_name.py`` with ``upgrade(conn, caps)`` (or ``NNNN_name.sql`` for
SQL that runs unchanged on SQLite, PostgreSQL and CockroachDB). Never edit a
migration that has shipped: add a new one. Define tables inside the
migration (as they were at that version), never import the live models.
"""
