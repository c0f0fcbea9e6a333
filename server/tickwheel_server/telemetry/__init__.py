"""Metrics, traces and structured logs of a server and its workers.

``metrics``: OpenTelemetry SDK instruments per server, rendered on scrape as
Prometheus text (``prometheus``) on the HTTP endpoint's ``/metrics``;
``gauges``: the figures read from the store before a scrape.
"""
