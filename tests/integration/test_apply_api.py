"""`tickwheel apply -f` through the real server on PostgreSQL + etcd: the
plan writes nothing, --yes creates, applying again changes nothing (in
YAML too), an edited schedule is an update shown with its run diff, a job
changed since the file's version is a conflict (exit 3, nothing written),
a job deleted behind apply's back is created again, an invalid job stops
the whole file, and --prune deletes only the caller's jobs the file does
not name."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.server import TICKWHEEL, Running, running_server
from tickwheel import AsyncClient, cron_job

pytestmark = [pytest.mark.postgres, pytest.mark.etcd, pytest.mark.slow]

JOBS = """\
[[jobs]]
name = "nightly"
cron = "{nightly}"
tz = "Europe/London"
handler = "report"
payload = {{ day = "yesterday" }}
labels = {{ team = "data" }}
{version}
[[jobs]]
name = "hourly"
cron = "15 * * * *"
handler = "sweep"
overlap = "queue_one"

[[jobs]]
name = "launch"
at = 2031-01-01T00:00:00Z
handler = "launch"
exact = true
{extra}"""

YAML = """\
jobs:
  - name: nightly
    cron: "0 2 * * *"
    tz: Europe/London
    handler: report
    payload: {day: yesterday}
    labels: {team: data}
  - name: hourly
    cron: "15 * * * *"
    handler: sweep
    overlap: queue_one
  - name: launch
    at: "2031-01-01T00:00:00Z"
    handler: launch
    exact: true
"""


def _file(tmp_path: Path, name: str = "jobs.toml", *, nightly: str = "0 2 * * *", version: str = "",
          extra: str = "") -> Path:  # fmt: skip
    path = tmp_path / name
    path.write_text(JOBS.format(nightly=nightly, version=version, extra=extra))
    return path


def _apply(running: Running, key_file: Path, *args: str, json_out: bool = True) -> tuple[int, dict | str, str]:
    done = subprocess.run(
        [TICKWHEEL, "--address", running.address, "--api-key-file", str(key_file), *(["--json"] if json_out else []),
         "--timeout", "60", "apply", *args],
        capture_output=True, text=True, timeout=300, env=os.environ,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout) if json_out and done.stdout else done.stdout, done.stderr


async def _jobs(running: Running, key: str) -> dict:
    async with AsyncClient(running.address, key) as client:
        return {job.name: job async for job in client.iter_jobs(page_size=1000)}


async def test_apply_plans_creates_is_idempotent_updates_with_a_diff_conflicts_and_prunes(
    postgres_url: str, etcd_endpoint: str, tmp_path: Path
) -> None:
    async with running_server(postgres_url, etcd_endpoint) as running:
        key = await running.create_tenant("acme")
        victim_key = await running.create_tenant("victim")
        async with AsyncClient(running.address, victim_key) as victim:
            theirs = (await victim.create_job(cron_job("nightly", "0 9 * * *", "UTC", handler="other"))).job
        key_file = tmp_path / "api-key"
        key_file.write_text(key + "\n")
        path = _file(tmp_path)

        def apply(*args: str, json_out: bool = True) -> tuple[int, dict | str, str]:
            return _apply(running, key_file, *args, json_out=json_out)

        # The plan alone writes nothing.
        code, plan, _ = await asyncio.to_thread(apply, "-f", str(path))
        assert code == 0 and plan["applied"] is False, plan
        assert plan["counts"] == {"create": 3, "update": 0, "unchanged": 0, "delete": 0, "conflict": 0}
        assert [(s["action"], s["name"], s["line"]) for s in plan["steps"]] == [
            ("create", "nightly", 1), ("create", "hourly", 9), ("create", "launch", 15)]
        assert await _jobs(running, key) == {}

        code, done, _ = await asyncio.to_thread(apply, "-f", str(path), "--yes")
        assert code == 0 and done["applied"] is True, done
        assert [s["outcome"] for s in done["steps"]] == ["created"] * 3
        assert all(s["id"] and (s["version"], s["applied_version"]) == (None, 1) for s in done["steps"])
        jobs = await _jobs(running, key)
        assert set(jobs) == {"nightly", "hourly", "launch"}
        assert jobs["nightly"].schedule.cron.expression == "0 2 * * *" and jobs["nightly"].payload == b'{"day":"yesterday"}'
        assert jobs["hourly"].overlap_policy != 0 and jobs["launch"].jitter.exact
        assert all(job.version == 1 for job in jobs.values())

        # Applying again, from TOML or from the same jobs in YAML, changes nothing.
        yaml_path = tmp_path / "jobs.yaml"
        yaml_path.write_text(YAML)
        for again_path in (path, yaml_path):
            code, again, _ = await asyncio.to_thread(apply, "-f", str(again_path), "--yes")
            assert code == 0, again
            assert again["counts"] == {"create": 0, "update": 0, "unchanged": 3, "delete": 0, "conflict": 0}
        assert {n: j.version for n, j in (await _jobs(running, key)).items()} == {n: 1 for n in jobs}

        # An edited schedule is an update of that field, shown with its run diff.
        edited = _file(tmp_path, "edited.toml", nightly="0 3 * * *")
        code, plan, _ = await asyncio.to_thread(apply, "-f", str(edited))
        assert code == 0
        (update,) = [s for s in plan["steps"] if s["action"] != "unchanged"]
        assert (update["action"], update["name"], update["fields"], update["id"]) == (
            "update", "nightly", ["schedule"], jobs["nightly"].id)
        diff = update["run_diff"]
        assert int(diff.get("addedCount", 0)) >= 28 and int(diff.get("removedCount", 0)) >= 28, diff
        code, text, _ = await asyncio.to_thread(apply, "-f", str(edited), json_out=False)
        assert code == 0 and "~ update    nightly" in text and "added" in text and "removed" in text, text
        assert "nothing was written: run again with --yes" in text
        assert (await _jobs(running, key))["nightly"].version == 1
        code, done, _ = await asyncio.to_thread(apply, "-f", str(edited), "--yes")
        assert code == 0 and [s["outcome"] for s in done["steps"]][0] == "updated", done
        assert (done["steps"][0]["version"], done["steps"][0]["applied_version"]) == (1, 2)
        nightly = (await _jobs(running, key))["nightly"]
        assert (nightly.version, nightly.schedule.cron.expression) == (2, "0 3 * * *")

        # Written against version 2; someone changes the job: a conflict, and
        # nothing of the file is written (not even its new job).
        pinned = _file(tmp_path, "pinned.toml", nightly="0 4 * * *", version="version = 2",
                       extra='\n[[jobs]]\nname = "new"\ncron = "0 5 * * *"\nhandler = "h"\n')
        async with AsyncClient(running.address, key) as client:
            changed = nightly.__class__()
            changed.CopyFrom(nightly)
            changed.labels["team"] = "ops"
            await client.update_job(changed, update_mask=["labels"])
        code, conflict, _ = await asyncio.to_thread(apply, "-f", str(pinned), "--yes")
        assert code == 3, conflict
        assert conflict["applied"] is False and conflict["counts"]["conflict"] == 1
        (step,) = [s for s in conflict["steps"] if s["action"] == "conflict"]
        assert step["name"] == "nightly" and "version 2" in step["reason"] and "version 3" in step["reason"]
        after = await _jobs(running, key)
        assert "new" not in after and after["nightly"].version == 3 and after["nightly"].schedule.cron.expression == "0 3 * * *"
        code, text, _ = await asyncio.to_thread(apply, "-f", str(pinned), json_out=False)
        assert code == 3 and "! conflict  nightly" in text and "nothing was written" in text

        # An invalid job anywhere in the file: exit 2, the key named, nothing written.
        invalid = _file(tmp_path, "invalid.toml", extra='\n[[jobs]]\nname = "bad"\ncron = "61 * * * *"\nhandler = "h"\n')
        code, refused, _ = await asyncio.to_thread(apply, "-f", str(invalid), "--yes")
        assert code == 2 and refused["valid"] is False
        assert [(p["job"], p["field"], p["line"]) for p in refused["problems"]] == [('jobs[3] "bad"', "cron", 23)]
        assert "bad" not in await _jobs(running, key)

        # A job deleted behind apply's back is created again (its first
        # request id now answers NOT_FOUND: the next one is used).
        async with AsyncClient(running.address, key) as client:
            await client.delete_job((await _jobs(running, key))["launch"].id)
        code, done, _ = await asyncio.to_thread(apply, "-f", str(edited), "--yes")
        assert code == 0, done
        assert [(s["action"], s["fields"], s["outcome"]) for s in done["steps"]] == [
            ("update", ["labels"], "updated"), ("unchanged", [], "unchanged"), ("create", [], "created")]
        after = await _jobs(running, key)
        assert after["nightly"].labels["team"] == "data" and after["launch"].version == 1

        # Not named by the file: kept, or deleted with --prune (only the caller's).
        pruned_file = tmp_path / "pruned.toml"
        pruned_file.write_text(edited.read_text().split("[[jobs]]\nname = \"hourly\"")[0])
        code, kept, _ = await asyncio.to_thread(apply, "-f", str(pruned_file), "--yes")
        assert code == 0 and kept["not_in_file"] == 2 and kept["counts"]["delete"] == 0, kept
        assert set(await _jobs(running, key)) == {"nightly", "hourly", "launch"}
        code, plan, _ = await asyncio.to_thread(apply, "-f", str(pruned_file), "--prune")
        assert code == 0 and [(s["action"], s["name"]) for s in plan["steps"] if s["action"] == "delete"] == [
            ("delete", "hourly"), ("delete", "launch")]
        assert set(await _jobs(running, key)) == {"nightly", "hourly", "launch"}
        code, done, _ = await asyncio.to_thread(apply, "-f", str(pruned_file), "--prune", "--yes")
        assert code == 0 and [s["outcome"] for s in done["steps"]] == ["unchanged", "deleted", "deleted"], done
        assert set(await _jobs(running, key)) == {"nightly"}
        code, again, _ = await asyncio.to_thread(apply, "-f", str(pruned_file), "--prune", "--yes")
        assert code == 0 and again["counts"] == {"create": 0, "update": 0, "unchanged": 1, "delete": 0, "conflict": 0}
        async with AsyncClient(running.address, victim_key) as victim:
            assert [(j.id, j.version) async for j in victim.iter_jobs()] == [(theirs.id, theirs.version)]


async def test_a_job_changed_between_the_plan_and_the_write_is_a_conflict_that_stops_the_rest(
    postgres_url: str, etcd_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    from tickwheel import Client
    from tickwheel_server.cli import apply as apply_command
    from tickwheel_server.cli.main import main

    async with running_server(postgres_url, etcd_endpoint) as running:
        key = await running.create_tenant("acme")
        key_file = tmp_path / "api-key"
        key_file.write_text(key + "\n")
        code, done, _ = await asyncio.to_thread(_apply, running, key_file, "-f", str(_file(tmp_path)), "--yes")
        assert code == 0, done
        async with AsyncClient(running.address, key) as client:
            await client.create_job(cron_job("stray", "0 6 * * *", "UTC", handler="h"))
        nightly_id = (await _jobs(running, key))["nightly"].id
        edited = _file(tmp_path, "edited.toml", nightly="0 3 * * *",
                       extra='\n[[jobs]]\nname = "late"\ncron = "0 5 * * *"\nhandler = "h"\n')
        planned = apply_command._preview

        def plan_then_someone_changes_nightly(*args: object) -> list:
            problems = planned(*args)  # type: ignore[arg-type]
            with Client(running.address, key) as other:
                job = other.get_job(nightly_id).job
                job.labels["team"] = "ops"
                other.update_job(job, update_mask=["labels"])
            return problems

        monkeypatch.setattr(apply_command, "_preview", plan_then_someone_changes_nightly)
        argv = ["--address", running.address, "--api-key-file", str(key_file), "--json", "apply", "-f", str(edited),
                "--yes", "--prune"]  # fmt: skip
        code = await asyncio.to_thread(main, argv)
        document = json.loads(capsys.readouterr().out)
        assert code == 3 and document["exit_status"] == 3 and document["applied"] is True
        outcomes = {s["name"]: (s["action"], s["outcome"]) for s in document["steps"]}
        assert outcomes == {
            "nightly": ("update", "conflict"), "hourly": ("unchanged", "unchanged"),
            "launch": ("unchanged", "unchanged"), "late": ("create", "created"), "stray": ("delete", "skipped")}
        nightly_step = next(s for s in document["steps"] if s["name"] == "nightly")
        assert "FAILED_PRECONDITION" in nightly_step["error"]
        jobs = await _jobs(running, key)
        assert jobs["nightly"].schedule.cron.expression == "0 2 * * *" and jobs["nightly"].labels["team"] == "ops"
        assert "stray" in jobs and "late" in jobs
