"""The cluster as each server sees it through the lease store: its presence
record (:mod:`.presence`) and drain requests between servers (:mod:`.drain`).
Every server runs both; elected duties are in ``maintenance/``, the keys in
``lease/keys.py``."""
