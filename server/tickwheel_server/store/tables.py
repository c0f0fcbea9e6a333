"""The current shape of the tables, for building queries.

The migrations in :mod:`.migrations` are the history that creates these; this
module mirrors their result. A test (tests/conformance/test_schema.py) checks
that a migrated database has exactly these columns.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

tenants = sa.Table(
    "tenants",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("weight", sa.Integer, nullable=False),
    sa.Column("max_concurrency", sa.Integer, nullable=False),
    sa.Column("max_jobs", sa.BigInteger, nullable=False),
    sa.Column("max_payload_bytes", sa.BigInteger, nullable=False),
    sa.Column("requests_per_second", sa.Integer, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("pause_reason", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("max_pending_manual_runs", sa.BigInteger, nullable=False),  # migration 0035
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("secret_hash", sa.LargeBinary, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger),
)

worker_credentials = sa.Table(
    "worker_credentials",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("secret_hash", sa.LargeBinary, nullable=False),
    sa.Column("tenants", sa.Text, nullable=False),
    sa.Column("handlers", sa.Text, nullable=False),
    sa.Column("http", sa.Boolean, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("spec", sa.LargeBinary, nullable=False),
    sa.Column("time_zone", sa.Text, nullable=False),
    sa.Column("tzdata_version", sa.Text, nullable=False),
    sa.Column("pause_reason", sa.Text, nullable=False),
    sa.Column("paused_at", sa.BigInteger),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("quota_slot", sa.Integer, nullable=False),
    sa.Column("calendar", sa.Text, nullable=False, server_default=""),
)
"""A job's definition and what queries find it by. Its cursor is in
:data:`job_cursors` (migration 0032). ``state`` here is the state the last
job write (create, update, pause, resume, tzdata recompute) left: the claim
completes a job in its cursor only, so ``job_cursors.state`` is the job's
state and this one only keeps ``jobs_active_zone`` to the jobs a job write
left active (the tzdata recompute checks the cursor's)."""

job_cursors = sa.Table(
    "job_cursors",
    metadata,
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("next_run_at", sa.BigInteger),
    sa.Column("next_due_at", sa.BigInteger),
    sa.Column("run_count", sa.BigInteger, nullable=False),
    sa.Column("next_nominal_at", sa.BigInteger),
    # NULL unless ``previous`` moved the cursor's occurrence earlier: then
    # ``next_run_at`` is that earlier instant (the claim's scan key) and this
    # the cursor's nominal instant (migration 0026).
)
"""A job's cursor, one row per job (migration 0032): what the claim reads
through ``job_cursors_due (partition, next_run_at) WHERE state = 'active'``
and the only row it writes, so a claimed job rewrites this narrow row and
its two index entries, not ``jobs`` (its definition) and its five. The
job's ``tenant`` and ``version`` are copies (the tenant never changes; the
version changes only in a job write, which writes both rows): the claim
reads no ``jobs`` row for a definition its cache holds at that version.
Every other writer of a cursor writes it in the transaction that writes
the job, scoped by tenant."""

tenant_quota = sa.Table(
    "tenant_quota",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("slot", sa.Integer, primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False),
    sa.Column("allowance", sa.BigInteger, nullable=False),
)

manual_quota = sa.Table(
    "manual_quota",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("slot", sa.Integer, primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False),
    sa.Column("allowance", sa.BigInteger, nullable=False),
)
"""The pending-manual-runs quota's slots (migration 0035), as
:data:`tenant_quota` is the max-jobs quota's: ``used`` counts the tenant's
manual runs waiting to start (``scheduled``, ``waiting``) that name the slot
in ``executions.manual_slot``."""

job_revisions = sa.Table(
    "job_revisions",
    metadata,
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("version", sa.BigInteger, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("spec", sa.LargeBinary, nullable=False),
    sa.Column("version_at", sa.BigInteger, nullable=False),
    sa.Column("changed_at", sa.BigInteger, nullable=False),
    sa.Column("changed_by", sa.Text, nullable=False),
    sa.Column("update_mask", sa.Text, nullable=False),
    sa.Column("changed_to_version", sa.BigInteger, nullable=False),
)

request_ids = sa.Table(
    "request_ids",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("request_id", sa.Text, primary_key=True),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

executions = sa.Table(
    "executions",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("partition", sa.Integer, nullable=False),
    sa.Column("origin", sa.Text, nullable=False),
    sa.Column("nominal_at", sa.BigInteger, nullable=False),
    sa.Column("due_at", sa.BigInteger, nullable=False),
    sa.Column("ready_at", sa.BigInteger, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("delivery", sa.Integer, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("owner", sa.Text),
    sa.Column("worker_id", sa.Text),
    sa.Column("handler", sa.Text),
    sa.Column("missed_count", sa.Integer, nullable=False),
    sa.Column("reap_count", sa.Integer, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("dead_reason", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("finished_at", sa.BigInteger),
    sa.Column("handed_out_at", sa.BigInteger),
    sa.Column("allow_overlap", sa.Boolean, nullable=False),
    sa.Column("wait_key", sa.Text),
    sa.Column("waiting_since", sa.BigInteger),
    sa.Column("held_keys", sa.Text),
    sa.Column("cancel_requested_at", sa.BigInteger),
    sa.Column("cancel_reason", sa.Text),
    sa.Column("trace_context", sa.Text),
    # The last attempt's record when it succeeded plainly (migration 0025); NULL otherwise.
    sa.Column("attempt_started_at", sa.BigInteger),
    sa.Column("attempt_worker_id", sa.Text),
    sa.Column("attempt_worker_started_at", sa.BigInteger),
    sa.Column("attempt_waited_us", sa.BigInteger),
    sa.Column("attempt_output", sa.LargeBinary),
    # The delivery the worker a running row was dealt to said, saying hello, it does not hold (migration 0031).
    sa.Column("unheld_delivery", sa.Integer),
    # A manual run's manual_quota slot, for its whole life; it counts the run while it waits to start (migration 0035).
    sa.Column("manual_slot", sa.Integer),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("execution_id", sa.Text, primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("delivery", sa.Integer, primary_key=True),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("started_at", sa.BigInteger, nullable=False),
    sa.Column("finished_at", sa.BigInteger),
    sa.Column("lateness_us", sa.BigInteger, nullable=False),
    sa.Column("worker_id", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("waited_us", sa.BigInteger, nullable=False),
    sa.Column("worker_started_at", sa.BigInteger),
    sa.Column("output", sa.LargeBinary),
)

skips = sa.Table(
    "skips",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("from_at", sa.BigInteger, nullable=False),
    sa.Column("to_at", sa.BigInteger, nullable=False),
    sa.Column("continues_at", sa.BigInteger),
    sa.Column("count", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

concurrency_keys = sa.Table(
    "concurrency_keys",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("max_running", sa.Integer, nullable=False),
    sa.Column("running", sa.Integer, nullable=False),
    sa.Column("limit_set_at", sa.BigInteger, nullable=False),
)

tenant_gates = sa.Table(
    "tenant_gates",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("rounds", sa.BigInteger, nullable=False),
)

tzdata_versions = sa.Table(
    "tzdata_versions",
    metadata,
    sa.Column("version", sa.Text, primary_key=True),
    sa.Column("fingerprints", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.BigInteger, nullable=False),
)

alerts = sa.Table(
    "alerts",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("dedup_key", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("severity", sa.Text, nullable=False),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("execution_id", sa.Text, nullable=False),
    sa.Column("server_id", sa.Text, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("details", sa.Text, nullable=False),
    sa.Column("raised_at", sa.BigInteger, nullable=False),
    sa.Column("last_seen_at", sa.BigInteger, nullable=False),
    sa.Column("count", sa.BigInteger, nullable=False),
    sa.Column("resolved_at", sa.BigInteger),
    sa.Column("changed_at", sa.BigInteger, nullable=False),
    sa.Column("seq", sa.BigInteger),
    sa.Column("notified", sa.Text),
)

alert_feed = sa.Table(
    "alert_feed",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.BigInteger, nullable=False),
)

attempt_rollups = sa.Table(
    "attempt_rollups",
    metadata,
    sa.Column("job_id", sa.Text, primary_key=True),
    sa.Column("day", sa.BigInteger, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("runs", sa.BigInteger, nullable=False),
    sa.Column("failures", sa.BigInteger, nullable=False),
    sa.Column("lateness_p50_us", sa.BigInteger, nullable=False),
    sa.Column("lateness_p90_us", sa.BigInteger, nullable=False),
    sa.Column("lateness_p99_us", sa.BigInteger, nullable=False),
    sa.Column("lateness_sketch", sa.Text, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

calendars = sa.Table(
    "calendars",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("spec", sa.LargeBinary, nullable=False),
    sa.Column("time_zone", sa.Text, nullable=False),
    sa.Column("business_days", sa.Integer, nullable=False),
    sa.Column("holiday_count", sa.Integer, nullable=False),
    sa.Column("half_day_count", sa.Integer, nullable=False),
    sa.Column("request_id", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)


calendar_walks = sa.Table(
    "calendar_walks",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("calendar", sa.Text, primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("after_job", sa.Text, nullable=False),
    sa.Column("job_count", sa.BigInteger, nullable=False),
    sa.Column("changed_count", sa.BigInteger, nullable=False),
    sa.Column("reported", sa.Text, nullable=False),
    sa.Column("started_at", sa.BigInteger, nullable=False),
    sa.Column("held_until", sa.BigInteger, nullable=False),
)
