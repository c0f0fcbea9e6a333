"""Errors raised by the schedule engine.

Every problem with a schedule a caller supplied is a :class:`ScheduleError`
carrying the field it is about and a human reason. ``field`` is a path
relative to the ``Job`` message of ``tickwheel/v1/job.proto``
(``schedule.cron.expression``, ``schedule.cron.time_zone``,
``schedule.local.local_time``, ``schedule.local.time_zone``, ``schedule.once_at``,
``schedule``, ``jitter.window``, ``end_at``, ``max_runs``); the API layer maps
it to INVALID_ARGUMENT with a field violation on ``job_field`` (the same path
under ``job.``).
"""

from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule that cannot be accepted.

    ``field`` names the offending field (see the module docstring); ``reason``
    is one sentence a user can act on, without the field name. ``str(error)``
    is ``"<field>: <reason>"``.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason

    @property
    def job_field(self) -> str:
        """The field path as the API reports it, rooted at ``job``."""
        return f"job.{self.field}"


class UnknownZoneError(LookupError):
    """A zone key that the time-zone database does not contain.

    Raised by :class:`~tickwheel_server.schedule.zones.ZoneRegistry`; the
    engine turns it into a :class:`ScheduleError` on the right field.
    """

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key
