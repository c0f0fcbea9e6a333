"""UpdateJob's merge of a patch into the stored definition at the mask's
paths (``api.scheduler.merge_job``): every path the mask names ends as the
patch has it, unset included, whatever the patch leaves unset above it."""

from __future__ import annotations

import pytest
from tickwheel.v1 import job_pb2

from tickwheel_server.api.scheduler import merge_job


def stored_cron() -> job_pb2.Job:
    job = job_pb2.Job(name="nightly", payload=b"p")
    job.schedule.cron.expression, job.schedule.cron.time_zone = "0 2 * * *", "Europe/London"
    job.jitter.window.FromSeconds(30)
    job.retry_policy.max_attempts = 4
    job.retry_policy.initial_backoff.FromSeconds(2)
    return job


def stored_once() -> job_pb2.Job:
    job = job_pb2.Job(name="once")
    job.schedule.once_at.FromSeconds(2_000_000_000)
    return job


def test_a_path_under_a_parent_unset_in_the_patch_clears_the_leaf_alone() -> None:
    merged = merge_job(stored_cron(), job_pb2.Job(), ("schedule.cron.time_zone", "jitter.window"))
    assert (merged.schedule.cron.expression, merged.schedule.cron.time_zone) == ("0 2 * * *", "")
    assert not merged.jitter.HasField("window")
    assert (merged.name, merged.retry_policy.max_attempts) == ("nightly", 4)


def test_a_path_under_another_case_of_a_oneof_in_the_patch_clears_the_leaf() -> None:
    patch = job_pb2.Job()
    patch.schedule.once_at.FromSeconds(1)  # `schedule` is set, `schedule.cron` is not
    merged = merge_job(stored_cron(), patch, ("schedule.cron.time_zone",))
    assert merged.schedule.WhichOneof("kind") == "cron"
    assert (merged.schedule.cron.expression, merged.schedule.cron.time_zone) == ("0 2 * * *", "")


def test_a_parent_unset_in_both_is_not_created() -> None:
    merged = merge_job(stored_once(), job_pb2.Job(), ("schedule.cron.time_zone", "retry_policy.max_attempts"))
    assert merged == stored_once()
    assert merged.schedule.WhichOneof("kind") == "once_at" and not merged.HasField("retry_policy")


@pytest.mark.parametrize("paths", [("retry_policy.max_attempts",), ("retry_policy",)])
def test_a_set_patch_is_copied_at_its_path(paths) -> None:
    patch = job_pb2.Job()
    patch.retry_policy.max_attempts = 9
    merged = merge_job(stored_cron(), patch, paths)
    assert merged.retry_policy.max_attempts == 9
    kept = merged.retry_policy.initial_backoff.seconds
    assert kept == (2 if paths == ("retry_policy.max_attempts",) else 0)


def test_the_whole_message_and_a_path_under_it_agree() -> None:
    merged = merge_job(stored_cron(), job_pb2.Job(), ("schedule", "schedule.cron.time_zone"))
    assert not merged.HasField("schedule")
