"""A real server counts the skips its dispatcher's claims record in
``tickwheel_skipped_occurrences_total`` (the stores' ``on_skipped`` hooks
wired to its metrics in ``app.py``): a job created with its cursor ten
minutes back is claimed at once, its missed occurrences skipped by the
misfire policy, and the scrape shows as many as the ``skips`` rows count."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import sqlalchemy as sa

from tickwheel.shared.ids import new_job_id
from tickwheel_server.store.jobrecords import NewJob
from tickwheel_server.store.tables import skips
from tickwheel_server.telemetry.prometheus import parse_samples

from tests.conformance.test_dispatch_claim import cron_job
from tests.support.server import running_server

MISFIRE = ("tickwheel_skipped_occurrences_total", (("reason", "misfire"),))


async def test_a_servers_claims_count_their_misfire_skips_on_metrics(tmp_path) -> None:
    async with running_server(f"sqlite:///{tmp_path / 'store.db'}") as running:
        server = running.server
        await running.create_tenant("acme")
        assert parse_samples(await server.metrics.scrape())[MISFIRE] == 0
        job = cron_job()
        back = server.clock.now().replace(second=0, microsecond=0) - timedelta(minutes=10)
        ident = new_job_id(server.clock.now())
        await server.stores.jobs.create(NewJob(
            id=ident, tenant="acme", name=job.name, spec=job.SerializeToString(), time_zone="UTC",
            next_run_at=back, next_due_at=back, tzdata_version="2026a", payload_size=len(job.payload),
        ), f"req-{ident}")  # fmt: skip

        def recorded() -> int:
            with server.engine.connect() as conn:
                return int(conn.execute(
                    sa.select(sa.func.coalesce(sa.func.sum(skips.c.count), 0)).where(skips.c.reason == "misfire")
                ).scalar_one())  # fmt: skip

        async def counted() -> float:
            return parse_samples(await server.metrics.scrape())[MISFIRE]

        # The rows commit before the claim's coroutine hears of it: wait for both, then compare.
        async with asyncio.timeout(120):
            while recorded() == 0 or await counted() != recorded():
                await asyncio.sleep(0.05)
        assert await counted() == recorded() >= 8
