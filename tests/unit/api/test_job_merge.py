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


def test_a_mask_is_each_path_once_and_at_most_64_paths() -> None:
    from google.protobuf import field_mask_pb2

    from tickwheel_server.api import calendars, convert
    from tickwheel_server.api.scheduler import update_paths
    from tickwheel_server.errors import InvalidArgument

    assert update_paths(field_mask_pb2.FieldMask(paths=["name", "labels", "name"])) == ("name", "labels")
    assert update_paths(field_mask_pb2.FieldMask(paths=["name"] * 64)) == ("name",)
    for check, path in ((update_paths, "name"), (calendars.update_paths, "time_zone")):
        with pytest.raises(InvalidArgument) as refused:
            check(field_mask_pb2.FieldMask(paths=[path] * 65))
        assert [(v.field, v.description) for v in refused.value.violations] == [("update_mask", "at most 64 paths (got 65)")]
    with pytest.raises(InvalidArgument) as refused:
        convert.enum_filter([4] * 33, convert.EXECUTION_STATUS_FROM_PROTO, "statuses", "unknown values")
    assert refused.value.violations[0].description == "at most 32 values (got 33)"
    assert convert.enum_filter([4, 4, 1], {1: "b", 4: "a"}, "statuses", "unknown values") == ["a", "b"]
