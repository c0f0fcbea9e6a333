"""The rules, pure: what to do, never how it is stored or sent.

Every module here decides from its inputs alone (instants are passed in; no
clock is read, no SQL or gRPC is imported) and is table-tested at fixed
instants in ``tests/unit/policy``. Stores and loops call them and write what
they return (docs/architecture.md, "Rooms").
"""
