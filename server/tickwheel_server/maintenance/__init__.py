"""Elected background duties that keep the store healthy: the reaper of lost
sessions and the retention of history (docs/architecture.md, "Rooms")."""
