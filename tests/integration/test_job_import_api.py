"""`tickwheel job import` through the real server on PostgreSQL + etcd: 2 500
lines imported with their failures listed by line and field, the same file
imported again creating nothing, the failures file fixed and imported
(and imported again, still nothing twice), and a line naming another
tenant's job creating in the caller's tenant only."""

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

LINES = 2500
BAD_CRON = {17, 900, 1801, 2500}
BAD_JSON = {5, 1200}
UNKNOWN_KEY = {333}


def _spec(i: int) -> dict:
    spec = {"name": f"import-{i}", "handler": "ledger", "labels": {"batch": "migration"}}
    if i % 3:
        spec.update(cron=f"{i % 60} {i % 24} * * *", tz="Europe/London", payload={"n": i})
    else:
        spec.update(at="2031-01-01T00:00:00Z", exact=True)
    return spec


def _line(i: int, victim_job: str) -> str:
    if i in BAD_JSON:
        return '{"name": "import-%d", "cron": ' % i
    spec = _spec(i)
    if i in BAD_CRON:
        spec.pop("at", None)
        spec.pop("exact", None)
        spec["cron"] = "61 * * * *"
    if i in UNKNOWN_KEY:
        spec["crno"] = "typo"
    if i == 42:  # another tenant's ids: ignored, the job is the caller's
        spec.update(id=victim_job, tenant="victim", version=3)
    return json.dumps(spec)


def _import(running: Running, key_file: Path, *args: str) -> tuple[int, dict]:
    done = subprocess.run(
        [TICKWHEEL, "--address", running.address, "--api-key-file", str(key_file), "--json", "--timeout", "60",
         "job", "import", *args],
        capture_output=True, text=True, timeout=300, env=os.environ,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


async def _jobs(running: Running, key: str) -> list:
    async with AsyncClient(running.address, key) as client:
        return [job async for job in client.iter_jobs(page_size=1000)]


async def test_an_import_runs_again_without_duplicates_and_its_failures_can_be_fixed(
    postgres_url: str, etcd_endpoint: str, tmp_path: Path
) -> None:
    async with running_server(postgres_url, etcd_endpoint) as running:
        key = await running.create_tenant("acme")
        victim_key = await running.create_tenant("victim")
        async with AsyncClient(running.address, victim_key) as victim:
            victim_job = (await victim.create_job(cron_job("theirs", "0 2 * * *", "UTC", handler="ledger"))).job
        key_file = tmp_path / "api-key"
        key_file.write_text(key + "\n")
        source = tmp_path / "jobs.jsonl"
        source.write_text("".join(_line(i, victim_job.id) + "\n" for i in range(1, LINES + 1)))
        failures = tmp_path / "failed.jsonl"

        code, first = await asyncio.to_thread(_import, running, key_file, str(source), "--failures", str(failures))
        bad = BAD_CRON | BAD_JSON | UNKNOWN_KEY
        assert code == 1
        assert (first["lines"], first["created"], first["existing"], first["failed"]) == (
            LINES, LINES - len(bad), 0, len(bad))
        by_line = {f["line"]: f for f in first["failures"]}
        assert set(by_line) == bad
        for line in BAD_CRON:
            assert by_line[line]["code"] == "INVALID_ARGUMENT"
            assert by_line[line]["field"].startswith("job.schedule.cron"), by_line[line]
        assert all(by_line[line]["field"] == "" and "JSON" in by_line[line]["reason"] for line in BAD_JSON)
        assert by_line[333]["field"] == "crno"

        jobs = await _jobs(running, key)
        assert len(jobs) == LINES - len(bad)
        assert {job.name for job in jobs} == {f"import-{i}" for i in range(1, LINES + 1) if i not in bad}
        mine = next(job for job in jobs if job.name == "import-42")
        assert mine.id != victim_job.id and mine.version == 1
        theirs = await _jobs(running, victim_key)
        assert [(j.id, j.name, j.version) for j in theirs] == [(victim_job.id, "theirs", victim_job.version)]

        code, again = await asyncio.to_thread(_import, running, key_file, str(source))
        assert code == 1
        assert (again["created"], again["existing"], again["failed"]) == (0, LINES - len(bad), len(bad))
        assert len(await _jobs(running, key)) == LINES - len(bad)

        fixed = []
        for text in failures.read_text().splitlines():
            try:
                row = json.loads(text)
            except ValueError:
                row = _spec(int(text.split('"import-')[1].split('"')[0]))
            row.pop("crno", None)
            if row.get("cron") == "61 * * * *":
                row["cron"] = "1 * * * *"
            fixed.append(json.dumps(row))
        assert len(fixed) == len(bad)
        failures.write_text("\n".join(fixed) + "\n")
        for expected_created in (len(bad), 0):
            code, repaired = await asyncio.to_thread(_import, running, key_file, str(failures))
            assert code == 0, repaired
            assert (repaired["created"], repaired["existing"], repaired["failed"]) == (
                expected_created, len(bad) - expected_created, 0)
        jobs = await _jobs(running, key)
        assert len(jobs) == LINES and len({job.name for job in jobs}) == LINES
