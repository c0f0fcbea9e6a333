"""Alerts: the catalogue of what is raised, the loops that watch for it, and
the feed that streams changes to operators (docs/architecture.md, "Rooms").
Their rows are kept by ``store/alerts.py``."""
