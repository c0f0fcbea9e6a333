"""What the worker runtime shares with the server: the clock, ids and
instants, the backoff, structured logs, the target address policy and the
quoting of what a peer sent.

Pure standard library, so ``tickwheel_worker`` (what tenants install) never
imports ``tickwheel_server``; the server imports these too, so both sides
agree on one definition of each (docs/architecture.md, "Rooms").
"""
