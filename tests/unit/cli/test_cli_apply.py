"""`tickwheel apply`'s calls against a scripted server: a large file created
in batches with the same request ids on every run and a progress line only
on a terminal, a create refused stopping the updates and deletes, a create
whose request id's job was deleted sent again under the next id, and an
update the server refuses in validate_only making the file invalid with
nothing written."""

from __future__ import annotations

import io
import json
import sys
from datetime import datetime, timezone

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tests.unit.sdk.fake_tickwheel import FakeTickwheel, failure
from tickwheel.v1 import job_pb2, scheduler_pb2
from tickwheel_server.cli import applyfile, applyplan


class Store:
    """BatchCreateJobs remembering request ids; names in ``refuse`` get
    INVALID_ARGUMENT, request ids in ``deleted`` NOT_FOUND."""

    def __init__(self) -> None:
        self.jobs: dict[str, job_pb2.Job] = {}
        self.refuse: set[str] = set()
        self.deleted: set[str] = set()

    def __call__(self, request, _context):
        response = scheduler_pb2.BatchCreateJobsResponse()
        for item in request.items:
            if item.job.name in self.refuse or item.request_id in self.deleted:
                not_found = item.request_id in self.deleted
                detail = any_pb2.Any()
                detail.Pack(error_details_pb2.BadRequest(field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field="job.target.http.url", description="refused")]))
                response.results.add(error=status_pb2.Status(
                    code=code_pb2.NOT_FOUND if not_found else code_pb2.INVALID_ARGUMENT, message="no",
                    details=[] if not_found else [detail]))  # fmt: skip
                continue
            seen = item.request_id in self.jobs
            if not seen:
                self.jobs[item.request_id] = job_pb2.Job(id=f"job_{len(self.jobs):05d}", name=item.job.name, version=1)
            response.results.add(job=scheduler_pb2.CreateJobResponse(job=self.jobs[item.request_id], created=not seen))
        return response


@pytest.fixture
def store(fake: FakeTickwheel) -> Store:
    answer = Store()
    fake.reply("BatchCreateJobs", answer)
    fake.reply("ListJobs", scheduler_pb2.ListJobsResponse())
    return answer


def _toml(tmp_path, *names: str, cron: str = "0 2 * * *"):
    path = tmp_path / "jobs.toml"
    path.write_text("".join(f'[[jobs]]\nname = "{n}"\ncron = "{cron}"\nhandler = "h"\n\n' for n in names))
    return path


def _stored(name: str, job_id: str, cron: str = "0 2 * * *") -> job_pb2.Job:
    (entry,) = applyfile.read(f'[[jobs]]\nname = "{name}"\ncron = "{cron}"\nhandler = "h"\n'.encode(), "toml")
    (normalised,), _ = applyplan.check([entry], datetime.now(timezone.utc))
    job = job_pb2.Job()
    job.CopyFrom(normalised)
    job.id, job.version = job_id, 4
    return job


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_large_file_goes_in_batches_with_the_same_request_ids_every_run(
    cli, fake, tenant, store, tmp_path, monkeypatch
) -> None:
    path = _toml(tmp_path, *(f"job-{i}" for i in range(2500)))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    result = cli(*tenant, "apply", "-f", str(path), "--yes")
    assert result.code == 0, terminal.getvalue()
    calls = fake.requests("BatchCreateJobs")
    assert [len(r.items) for r in calls] == [1000, 1000, 500]
    ids = [item.request_id for r in calls for item in r.items]
    assert len(set(ids)) == 2500 and all(i.startswith("apply-") for i in ids)
    assert "apply: [" in terminal.getvalue() and "created 2500 of 2500" in terminal.getvalue()
    assert "applied: 2500 created" in result.out

    monkeypatch.setattr(sys, "stderr", Terminal())
    again = cli(*tenant, "--json", "apply", "-f", str(path), "--yes", "--batch-size", "700")
    assert again.code == 0 and json.loads(again.out)["counts"]["create"] == 2500
    assert sys.stderr.getvalue() == ""  # no progress line beside --json
    later = [item.request_id for r in fake.requests("BatchCreateJobs")[3:] for item in r.items]
    assert later == ids and [len(r.items) for r in fake.requests("BatchCreateJobs")[3:]] == [700, 700, 700, 400]


def test_a_create_the_server_refuses_stops_the_updates_and_deletes(cli, fake, tenant, store, tmp_path) -> None:
    fake.reply("ListJobs", scheduler_pb2.ListJobsResponse(jobs=[_stored("edited", "job_e"), _stored("stray", "job_s")]))
    fake.reply("UpdateJob", scheduler_pb2.UpdateJobResponse(run_diff=scheduler_pb2.RunDiff(added_count=1)))
    store.refuse.add("refused")
    path = tmp_path / "jobs.toml"
    path.write_text('[[jobs]]\nname = "edited"\ncron = "0 3 * * *"\nhandler = "h"\n'
                    '[[jobs]]\nname = "refused"\ncron = "0 3 * * *"\nurl = "http://10.0.0.1/x"\n')
    result = cli(*tenant, "--json", "apply", "-f", str(path), "--yes", "--prune")
    assert result.code == 1
    steps = {s["name"]: (s["action"], s["outcome"]) for s in json.loads(result.out)["steps"]}
    assert steps == {"edited": ("update", "skipped"), "refused": ("create", "failed"), "stray": ("delete", "skipped")}
    assert fake.requests("BatchUpdateJobs") == [] and fake.requests("BatchDeleteJobs") == []
    (preview,) = fake.requests("UpdateJob")
    assert preview.validate_only and list(preview.update_mask.paths) == ["schedule"]
    assert (preview.job.id, preview.job.version) == ("job_e", 4)


def test_a_create_whose_first_request_id_was_deleted_goes_again_under_the_next(
    cli, fake, tenant, store, tmp_path
) -> None:
    path = _toml(tmp_path, "again")
    (entry,) = applyfile.read(path.read_bytes(), "toml")
    store.deleted.add(applyplan.request_id(entry))
    result = cli(*tenant, "--json", "apply", "-f", str(path), "--yes")
    assert result.code == 0, result.err
    sent = [item.request_id for r in fake.requests("BatchCreateJobs") for item in r.items]
    assert sent == [applyplan.request_id(entry), applyplan.request_id(entry) + "-2"]
    assert json.loads(result.out)["steps"][0]["outcome"] == "created"


def test_an_update_the_server_refuses_is_an_invalid_file_and_nothing_is_written(
    cli, fake, tenant, store, tmp_path
) -> None:
    fake.reply("ListJobs", scheduler_pb2.ListJobsResponse(jobs=[_stored("hook", "job_h")]))
    fake.reply("UpdateJob", failure(grpc.StatusCode.INVALID_ARGUMENT, "invalid",
                                    [("job.target.http.url", "10.0.0.1 is a private address")]))  # fmt: skip
    path = tmp_path / "jobs.toml"
    path.write_text('[[jobs]]\nname = "hook"\ncron = "0 2 * * *"\nurl = "http://10.0.0.1/x"\n'
                    '[[jobs]]\nname = "new"\ncron = "0 2 * * *"\nhandler = "h"\n')
    result = cli(*tenant, "apply", "-f", str(path), "--yes")
    assert result.code == 2
    assert f'{path}:4: jobs[0] "hook": url: 10.0.0.1 is a private address (job.target.http.url)' in result.err
    assert fake.requests("BatchCreateJobs") == [] and fake.requests("BatchUpdateJobs") == []


def test_a_conflict_found_while_planning_writes_nothing(cli, fake, tenant, store, tmp_path) -> None:
    fake.reply("ListJobs", scheduler_pb2.ListJobsResponse(jobs=[_stored("pinned", "job_p")]))
    path = tmp_path / "jobs.toml"
    path.write_text('[[jobs]]\nname = "pinned"\ncron = "0 3 * * *"\nhandler = "h"\nversion = 3\n'
                    '[[jobs]]\nname = "new"\ncron = "0 2 * * *"\nhandler = "h"\n')
    result = cli(*tenant, "apply", "-f", str(path), "--yes")
    assert result.code == 3
    assert "! conflict  pinned (job_p, version 4): changed since the file's version 3" in result.out
    assert fake.requests("BatchCreateJobs") == [] and fake.requests("UpdateJob") == []


def test_updates_refused_over_the_request_rate_are_sent_again_after_the_wait(cli, fake, tenant, store, tmp_path) -> None:
    """A schedule change of a paused job counts its paused span against the
    tenant's rate: BatchUpdateJobs applies the first item and refuses the
    next alone with a retry delay; apply sends it again after the delay,
    and both are reported updated."""
    from tests.unit.cli.test_cli_jobbulk import _over_rate

    fake.reply("ListJobs", scheduler_pb2.ListJobsResponse(jobs=[_stored("one", "job_1"), _stored("two", "job_2")]))
    fake.reply("UpdateJob", scheduler_pb2.UpdateJobResponse(run_diff=scheduler_pb2.RunDiff(added_count=1)))

    def first_only(request, _context=None):
        response = scheduler_pb2.BatchUpdateJobsResponse()
        for n, item in enumerate(request.items):
            if n == 0:
                response.results.add(job=scheduler_pb2.UpdateJobResponse(job=job_pb2.Job(id=item.job.id, version=5)))
            else:
                response.results.add(error=_over_rate())
        return response

    fake.reply("BatchUpdateJobs", first_only)
    result = cli(*tenant, "--json", "apply", "-f", str(_toml(tmp_path, "one", "two", cron="0 3 * * *")), "--yes")
    assert result.code == 0, result.err
    steps = {s["name"]: (s["action"], s["outcome"]) for s in json.loads(result.out)["steps"]}
    assert steps == {"one": ("update", "updated"), "two": ("update", "updated")}
    sent = [[item.job.id for item in call.items] for call in fake.requests("BatchUpdateJobs")]
    assert sent == [["job_1", "job_2"], ["job_2"]]


def test_a_device_without_end_or_a_fifo_is_read_to_the_bound_only(cli, fake, tenant, store, tmp_path) -> None:
    """Guard (red team, round 4): ``-f /dev/zero`` reports a size of 0 and
    has no end; it is read to the file bound and refused, nothing sent. A
    FIFO is read as the file it streams."""
    import os
    import threading

    result = cli(*tenant, "apply", "-f", "/dev/zero", "--format", "toml")
    assert result.code == 2 and "at most" in result.err, result.err
    assert fake.calls == []

    fifo = tmp_path / "jobs.toml"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text('[[jobs]]\nname = "a"\ncron = "0 2 * * *"\nhandler = "h"'))
    writer.start()
    result = cli(*tenant, "apply", "-f", str(fifo), "--yes")
    writer.join()
    assert result.code == 0, result.err + result.out
    assert [job.name for job in store.jobs.values()] == ["a"]
