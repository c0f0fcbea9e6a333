"""The web console in headless Chromium, against a real server with a real
worker, on the embedded stores and on PostgreSQL + etcd.

Jobs are created through the gRPC API and run by a worker over the Pull
stream; the test then signs in on the page and reads what it shows, and
checks it against what the gRPC API says: the job's name (which holds
markup, shown as text), its history rows, the lateness chart's bars (one
count per bucket, equal to the buckets of the attempts' recorded
lateness), a skip range, a dead letter, and for the operator the servers,
partitions per owner and queue depths. Screenshots are kept under the
test's tmp_path (their paths are printed).

Browser: Debian's chromium driven through Debian's chromedriver by
selenium (scripts/install.sh installs all three): the driver comes from the
browser's own source package, so their versions always match, and nothing
downloads a browser of its own.

The server serves the console on ``http_listen`` (``--http-listen``).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from google.protobuf import duration_pb2
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait
from tickwheel.v1 import admin_pb2, admin_pb2_grpc, job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_deadletters_api import eventually
from tests.integration.test_server_api import bearer
from tests.support.server import Running, running_server
from tests.support.workers import running_worker
from tickwheel_server.web.http import CONTENT_SECURITY_POLICY
from tickwheel_server.web.lateness import histogram
from tickwheel_worker import HandlerRegistry, PermanentError

WAIT = 20.0
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAKY, BROKEN, HOLD, NOBODY = "console.flaky", "console.broken", "console.hold", "nobody.home"
MARKUP_NAME = '<img src=x onerror="window.pwned=1"> nightly & "totals"'


class Handlers:
    """The worker's handlers: FLAKY fails every first attempt and succeeds on
    the retry, BROKEN fails permanently, HOLD runs until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def flaky(self, ctx) -> bytes:
        if ctx.attempt == 1:
            raise RuntimeError("first attempts fail")
        return b"ok"

    async def broken(self, ctx) -> bytes:
        raise PermanentError("card declined\nby the bank")  # two lines, stored as one (escaped)

    async def hold(self, ctx) -> bytes:
        await self.release.wait()
        return b"released"


@dataclass
class Cluster:
    running: Running
    scheduler: scheduler_pb2_grpc.SchedulerServiceStub
    admin: admin_pb2_grpc.AdminServiceStub
    acme: str
    globex: str
    worker_credential: str
    handlers: Handlers
    url: str


@pytest.fixture
async def cluster(store_and_etcd) -> AsyncIterator[Cluster]:
    store, etcd = store_and_etcd
    async with running_server(store, etcd, http_listen="127.0.0.1:0") as running:
        acme, globex = await running.create_tenant("acme"), await running.create_tenant("globex")
        url = running.server.http.url
        credential = await running.issue_worker_credential(["acme"], handlers=[FLAKY, BROKEN, HOLD])
        handlers = Handlers()
        registry = HandlerRegistry()
        registry.register(FLAKY, handlers.flaky)
        registry.register(BROKEN, handlers.broken)
        registry.register(HOLD, handlers.hold)
        async with (
            grpc.aio.insecure_channel(running.address) as channel,
            running_worker(running.address, credential, registry, worker_id="console-w1", http=False, slots=8),
        ):
            try:
                yield Cluster(running, scheduler_pb2_grpc.SchedulerServiceStub(channel),
                              admin_pb2_grpc.AdminServiceStub(channel), acme, globex, credential, handlers, url)
            finally:
                handlers.release.set()


def start_browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
        "--disable-breakpad", "--disable-crash-reporter",
        "--window-size=1280,1400", f"--user-data-dir={tempfile.mkdtemp(prefix='tickwheel-chromium-')}",
    ):  # fmt: skip
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver and browser run in a session of their own: Chromium's helper
    # processes outlive quit() briefly as zombies of init, which test.sh would
    # otherwise report as left running. A browser that really is left running
    # still carries the run's TICKWHEEL_TEST_RUN_ID, by which test.sh stops it.
    service = Service(CHROMEDRIVER, popen_kw={"start_new_session": True})
    return webdriver.Chrome(service=service, options=options)


@pytest.fixture
async def browser():
    """Headless Chromium, started and stopped in a thread: the server in this
    event loop keeps serving (and renewing its session) meanwhile."""
    driver = await asyncio.to_thread(start_browser)
    try:
        yield driver
    finally:
        await asyncio.to_thread(driver.quit)


# -- the gRPC side --------------------------------------------------------------------------


def handler_job(name: str, handler: str, **fields) -> job_pb2.Job:
    """A daily cron job (03:00 London, so nothing runs on its own in a test) with a fast retry policy."""
    job = job_pb2.Job(
        name=name,
        schedule=job_pb2.Schedule(cron=job_pb2.CronSchedule(expression="0 3 * * *", time_zone="Europe/London")),
        target=job_pb2.Target(handler=job_pb2.HandlerTarget(name=handler)),
        retry_policy=job_pb2.RetryPolicy(
            max_attempts=3,
            initial_backoff=duration_pb2.Duration(nanos=100_000_000),
            max_backoff=duration_pb2.Duration(nanos=200_000_000),
        ),
        **fields,
    )
    return job


async def create(cluster: Cluster, job: job_pb2.Job, key: str | None = None) -> str:
    reply = await cluster.scheduler.CreateJob(
        scheduler_pb2.CreateJobRequest(job=job, request_id=f"create-{uuid.uuid4().hex}"), metadata=bearer(key or cluster.acme)
    )
    return reply.job.id


async def trigger(cluster: Cluster, job_id: str, request_id: str) -> str:
    reply = await cluster.scheduler.TriggerJob(
        scheduler_pb2.TriggerJobRequest(id=job_id, request_id=request_id), metadata=bearer(cluster.acme)
    )
    return reply.execution.id


async def history(cluster: Cluster, job_id: str) -> scheduler_pb2.ListExecutionsResponse:
    return await cluster.scheduler.ListExecutions(
        scheduler_pb2.ListExecutionsRequest(job_id=job_id, page_size=100), metadata=bearer(cluster.acme)
    )


@dataclass
class Scene:
    """What the test made happen, as the gRPC API reports it."""

    main_id: str
    missed_id: str
    broken_id: str
    job_names: dict[str, str]
    main_history: scheduler_pb2.ListExecutionsResponse
    dead_letter_id: str


async def make_scene(cluster: Cluster) -> Scene:
    """Acme: a job run three times by triggers (each fails once, then
    succeeds on its retry), a past one-off skipped as a misfire, a job whose
    only run dead-letters, two executions no worker can take, and one held
    running. Globex: one job of its own."""
    main_id = await create(cluster, handler_job(MARKUP_NAME, FLAKY))
    past = handler_job("missed-once", FLAKY, misfire_policy=job_pb2.MISFIRE_POLICY_SKIP)
    past.schedule.Clear()
    past.schedule.once_at.FromDatetime(datetime.now(timezone.utc) - timedelta(minutes=10))
    missed_id = await create(cluster, past)
    broken_id = await create(cluster, handler_job("card-charge", BROKEN))
    stuck_id = await create(cluster, handler_job("waits-for-nobody", NOBODY))
    hold_id = await create(cluster, handler_job("long-running", HOLD))
    await create(cluster, handler_job("globex-only", FLAKY), key=cluster.globex)

    for n in range(3):
        await trigger(cluster, main_id, f"main-{n}")
    await trigger(cluster, broken_id, "broken-0")
    for n in range(2):
        await trigger(cluster, stuck_id, f"stuck-{n}")
    held = await trigger(cluster, hold_id, "hold-0")

    succeeded = job_pb2.EXECUTION_STATUS_SUCCEEDED
    main_history = await eventually(
        lambda: history(cluster, main_id),
        lambda r: len(r.executions) == 3 and all(e.status == succeeded for e in r.executions),
        "the three triggered runs did not all succeed",
    )
    await eventually(lambda: history(cluster, missed_id), lambda r: len(r.skips) == 1, "no misfire skip range")
    dead = await eventually(
        lambda: cluster.scheduler.ListDeadLetters(scheduler_pb2.ListDeadLettersRequest(), metadata=bearer(cluster.acme)),
        lambda r: len(r.executions) == 1, "no dead letter",
    )
    await eventually(
        lambda: cluster.scheduler.GetExecution(scheduler_pb2.GetExecutionRequest(id=held), metadata=bearer(cluster.acme)),
        lambda r: r.execution.status == job_pb2.EXECUTION_STATUS_RUNNING, "the held execution is not running",
    )
    names = {main_id: MARKUP_NAME, missed_id: "missed-once", broken_id: "card-charge",
             stuck_id: "waits-for-nobody", hold_id: "long-running"}  # fmt: skip
    return Scene(main_id, missed_id, broken_id, names, main_history, dead.executions[0].id)


# -- the browser side (blocking: run in a thread while the server serves) -------------------


def wait(driver, condition, timeout: float = WAIT):
    return WebDriverWait(driver, timeout).until(condition)


def rows_of(driver, selector: str, count: int) -> list:
    """The elements matching ``selector`` once there are exactly ``count`` of them."""
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, selector)) == count)
    return driver.find_elements(By.CSS_SELECTOR, selector)


def sign_in(driver, credential: str) -> None:
    wait(driver, EC.visibility_of_element_located((By.ID, "credential")))
    field = driver.find_element(By.ID, "credential")
    field.clear()
    field.send_keys(credential)
    driver.find_element(By.ID, "sign-in").click()


def cells(row) -> list[str]:
    return [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]


def screenshot(driver, path: Path) -> Path:
    driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"console screenshot: {path}")
    return path


def _bound(text: str) -> float | str:
    return text if text == "+Inf" else float(text)


def check_wrong_key(driver, url: str) -> None:
    driver.get(url)
    sign_in(driver, "twk_nosuchkey_" + "x" * 43)
    error = wait(driver, EC.visibility_of_element_located((By.ID, "login-error")))
    assert "not accepted" in error.text
    assert driver.execute_script("return sessionStorage.length") == 0
    assert not driver.find_element(By.ID, "view").is_displayed()


def check_tenant_views(driver, url: str, key: str, scene: Scene, tmp_path: Path) -> dict[str, int]:
    driver.get(url)
    sign_in(driver, key)
    jobs = rows_of(driver, "#jobs tr.job", len(scene.job_names))
    shown = {row.get_attribute("data-job-id"): row.find_element(By.CSS_SELECTOR, "td.name").text for row in jobs}
    assert shown == scene.job_names  # acme's five, and not globex's
    assert driver.find_element(By.ID, "who").text == "tenant acme"
    main_row = driver.find_element(By.CSS_SELECTOR, f'#jobs tr.job[data-job-id="{scene.main_id}"]')
    assert cells(main_row)[1:3] == ["0 3 * * * (Europe/London)", "active"]
    assert cells(main_row)[4].startswith("succeeded")
    # The name's markup is text: no element was made from it, no handler ran.
    assert driver.find_elements(By.CSS_SELECTOR, "#view img") == []
    assert driver.execute_script("return window.pwned") is None
    # The policy's Trusted Types requirement is in force: markup from a string is refused outright.
    refused = "try { document.createElement('div').innerHTML = '<b>x</b>'; return 'allowed'; } catch (e) { return e.name; }"
    assert driver.execute_script(refused) == "TypeError"

    main_row.find_element(By.CSS_SELECTOR, "a.job-link").click()
    title = wait(driver, EC.visibility_of_element_located((By.ID, "job-title")))
    assert title.text == MARKUP_NAME
    executions = rows_of(driver, "#history tr.execution", 3)
    expected = {e.id: e for e in scene.main_history.executions}
    assert {row.get_attribute("data-execution-id") for row in executions} == set(expected)
    for row in executions:
        assert cells(row)[2:4] == ["succeeded", "2"]
        attempts = driver.find_elements(
            By.CSS_SELECTOR, f'#history tr.attempt[data-execution-id="{row.get_attribute("data-execution-id")}"]'
        )
        assert [cells(a)[2] for a in attempts] == ["failed", "succeeded"]
        assert cells(attempts[0])[7] == "RuntimeError: first attempts fail"
    assert len(driver.find_elements(By.CSS_SELECTOR, "#next-runs tr.next-run")) == 10

    # The chart: one bar per bucket, each carrying the count of the attempts
    # whose recorded lateness falls in it; bars with observations have height.
    lateness = [a.lateness.ToTimedelta().total_seconds() for e in scene.main_history.executions for a in e.attempts]
    assert len(lateness) == 6
    want = {("+Inf" if b.le is None else b.le): b.count for b in histogram(lateness).buckets}
    bars = rows_of(driver, "#lateness-chart rect.bar", len(want))
    drawn = {_bound(bar.get_attribute("data-le")): int(bar.get_attribute("data-count")) for bar in bars}
    assert drawn == want and sum(drawn.values()) == 6
    for bar in bars:
        height = float(bar.get_attribute("height"))
        assert (height > 0) == (int(bar.get_attribute("data-count")) > 0)
    summary = driver.find_element(By.ID, "lateness-summary").text
    assert summary.startswith("6 attempts of the last 3 executions")
    screenshot(driver, tmp_path / "console-job.png")

    # A schedule change previewed: daily at 03:00 to weekdays only. Any 14
    # days hold each weekday twice, so 4 weekend runs go and 10 stay.
    form = driver.find_element(By.ID, "preview-form")
    assert driver.find_element(By.ID, "preview-cron").get_attribute("value") == "0 3 * * *"
    assert driver.find_element(By.ID, "preview-zone").get_attribute("value") == "Europe/London"
    for field, value in (("preview-cron", "0 3 * * 1-5"), ("preview-days", "14")):
        driver.find_element(By.ID, field).clear()
        driver.find_element(By.ID, field).send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button").click()
    summary = wait(driver, EC.visibility_of_element_located((By.ID, "preview-summary"))).text
    assert summary.endswith("0 added, 4 removed, 0 moved, 10 unchanged."), summary
    removed = rows_of(driver, "#preview-removed tr.removed", 4)
    weekdays = {datetime.fromisoformat(cells(row)[1]).strftime("%a") for row in removed}
    assert weekdays == {"Sat", "Sun"}, [cells(row) for row in removed]
    screenshot(driver, tmp_path / "console-preview.png")
    driver.find_element(By.ID, "preview-cron").clear()
    driver.find_element(By.ID, "preview-cron").send_keys("61 3 * * *")
    form.find_element(By.CSS_SELECTOR, "button").click()
    error = wait(driver, EC.visibility_of_element_located((By.ID, "preview-error")))
    assert "job.schedule.cron.expression" in error.text

    driver.get(f"{url}#/jobs/{scene.missed_id}")
    wait(driver, EC.text_to_be_present_in_element((By.ID, "job-title"), "missed-once"))
    [skip] = rows_of(driver, "#skips tr.skip", 1)
    assert cells(skip)[2:] == ["1", "misfire"]
    assert driver.find_elements(By.CSS_SELECTOR, "#history tr.execution") == []

    driver.find_element(By.CSS_SELECTOR, '#nav a[data-route="#/deadletters"]').click()
    [letter] = rows_of(driver, "#dead-letters tr.dead-letter", 1)
    assert letter.get_attribute("data-execution-id") == scene.dead_letter_id
    assert cells(letter)[1] == scene.broken_id
    assert cells(letter)[4:] == ["failed permanently", "card declined\nby the bank", "1"], "a line break shown as one"

    # A tenant key does not open the cluster view.
    driver.get(f"{url}#/cluster")
    error = wait(driver, EC.visibility_of_element_located((By.ID, "view-error")))
    assert error.text == "the cluster view needs the admin token"

    driver.find_element(By.ID, "sign-out").click()
    wait(driver, EC.visibility_of_element_located((By.ID, "login-view")))
    assert driver.execute_script("return sessionStorage.length") == 0
    return drawn


def check_admin_view(driver, url: str, token: str, server_id: str, status: admin_pb2.ClusterStatusResponse,
                     tmp_path: Path) -> None:
    """The page against ClusterStatus as gRPC answered it just before."""
    driver.get(url)
    sign_in(driver, token)
    [server] = rows_of(driver, "#servers tr.server", 1)
    [expected] = status.servers
    assert server.get_attribute("data-server-id") == expected.server_id == server_id
    assert cells(server)[4:6] == [str(expected.workers), str(expected.partitions_owned)]
    assert cells(server)[8] == "serving"
    [owner] = rows_of(driver, "#owners tr.owner", 1)
    assert {p.server_id for p in status.partitions} == {server_id}
    assert cells(owner) == [server_id, str(status.partition_count), "live"]
    [queue] = rows_of(driver, "#queues tr.queue", 1)
    assert queue.get_attribute("data-tenant") == "acme"
    assert cells(queue)[1:3] == ["2", "1"]  # two nobody can take, one held running
    assert [(q.tenant, q.ready, q.running) for q in status.queues] == [("acme", 2, 1)]
    assert driver.find_element(By.ID, "who").text == "operator (admin token)"
    screenshot(driver, tmp_path / "console-cluster.png")


async def in_browser(driver, tmp_path: Path, check, *args):
    """Run ``check(driver, *args)`` in a thread; when it fails, keep what the
    page showed (screenshot, text, the browser's console) beside the test."""
    try:
        return await asyncio.to_thread(check, driver, *args)
    except Exception:
        failed = tmp_path / f"failed-{check.__name__}"
        with contextlib.suppress(Exception):
            driver.save_screenshot(f"{failed}.png")
            text = driver.find_element(By.TAG_NAME, "body").text
            logs = "\n".join(f"{e['level']} {e['message']}" for e in driver.get_log("browser"))
            Path(f"{failed}.txt").write_text(f"{driver.current_url}\n\n{text}\n\nconsole:\n{logs}\n")
            print(f"console failure: {failed}.png, {failed}.txt\n{text}\nconsole:\n{logs}")
        raise


async def test_the_console_shows_jobs_history_lateness_dead_letters_and_the_cluster(cluster, browser, tmp_path) -> None:
    scene = await make_scene(cluster)
    server = cluster.running.server

    async def owned() -> int:
        return server.info.partitions_owned()

    await eventually(owned, lambda n: n == server.info.partition_count, "the server does not own every partition")
    status = await cluster.admin.ClusterStatus(
        admin_pb2.ClusterStatusRequest(), metadata=cluster.running.admin_metadata()
    )
    await in_browser(browser, tmp_path, check_wrong_key, cluster.url)
    await in_browser(browser, tmp_path, check_tenant_views, cluster.url, cluster.acme, scene, tmp_path)
    await in_browser(
        browser, tmp_path, check_admin_view, cluster.url, cluster.running.admin_token, server.server_id, status,
        tmp_path,
    )  # fmt: skip


# -- the JSON API without a browser ----------------------------------------------------------


async def test_a_previewed_schedule_change_is_checked_as_update_job_checks_it_and_writes_nothing(cluster) -> None:
    url, acme, globex = cluster.url, cluster.acme, cluster.globex
    job_id = await create(cluster, handler_job("preview-me", FLAKY))
    before = await cluster.scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(acme))

    # The zone alone changes: every run keeps its wall time, so each one moves.
    # The week's window starts now: between 03:00 and 08:00 UTC today's
    # 03:00 in New York (08:00 UTC) is still ahead while today's 03:00 UTC is
    # past, so one run is added at the window's start and one removed at its
    # end; at any other hour all seven move.
    path = f"/api/jobs/{job_id}/preview?time_zone=America/New_York&days=7"
    status, headers, body = await get(url, path, acme)
    assert status == 200 and headers["cache-control"] == "no-store", body
    answer = json.loads(body)
    diff = answer["runDiff"]
    assert answer["job"]["schedule"]["cron"] == {"expression": "0 3 * * *", "timeZone": "America/New_York"}
    assert "payload" not in answer["job"] and answer["job"]["version"] == str(before.job.version)
    added, removed = int(diff.get("addedCount", 0)), int(diff.get("removedCount", 0))
    assert int(diff["movedCount"]) >= 6 and added == removed <= 1 and "unchangedCount" not in diff, diff
    for moved in diff["moved"]:
        assert moved["before"]["localTime"][11:19] == moved["after"]["localTime"][11:19] == "03:00:00"
    for run in diff.get("added", []):
        assert run["localTime"][11:19] == "03:00:00" and run["nominalAt"][11:19] == "08:00:00", diff
    for run in diff.get("removed", []):
        assert run["localTime"][11:19] == "03:00:00" and run["nominalAt"][11:19] == "03:00:00", diff

    # Bad input names its field, as UpdateJob would; a hostile byte is refused, not stored.
    for query, field in (
        ("cron=61%203%20*%20*%20*", "job.schedule.cron.expression"),
        ("cron=0%003%20*%20*%20*", "job.schedule.cron.expression"),
        ("cron=" + "1" * 600, "job.schedule.cron.expression"),
        ("time_zone=Mars/Olympus_Mons", "job.schedule.cron.time_zone"),
        ("days=0", "days"), ("days=367", "days"), ("days=x", "days"),
    ):  # fmt: skip
        status, _, body = await get(url, f"/api/jobs/{job_id}/preview?{query}", acme)
        assert status == 400, (query, body)
        assert [f["field"] for f in json.loads(body)["error"]["fields"]] == [field], (query, body)
    status, _, _ = await get(url, f"/api/jobs/{job_id}/preview?cron=a&cron=b", acme)
    assert status == 400

    # Another tenant's job is "not found", exactly as a missing one.
    missing = "job_" + "0" * 26
    status, _, body = await get(url, f"/api/jobs/{job_id}/preview?cron=0%204%20*%20*%20*", globex)
    missing_status, _, missing_body = await get(url, f"/api/jobs/{missing}/preview?cron=0%204%20*%20*%20*", globex)
    assert (status, missing_status) == (404, 404)
    assert body.replace(job_id.encode(), b"ID") == missing_body.replace(missing.encode(), b"ID")
    status, _, _ = await get(url, f"/api/jobs/{job_id}/preview", cluster.running.admin_token)
    assert status == 403

    after = await cluster.scheduler.GetJob(scheduler_pb2.GetJobRequest(id=job_id), metadata=bearer(acme))
    assert after.job == before.job, "a preview wrote nothing"


def fetch(url: str, path: str, credential: str | None = None, method: str = "GET", headers: dict | None = None):
    """(status, headers with lower-case names, body) of one request."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=WAIT)
    try:
        sent = dict(headers or {})
        if credential is not None:
            sent["Authorization"] = f"Bearer {credential}"
        connection.request(method, path, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


async def get(url: str, path: str, credential: str | None = None, **kwargs):
    return await asyncio.to_thread(fetch, url, path, credential, **kwargs)


async def test_the_api_is_scoped_and_authenticated_like_the_grpc_api(cluster) -> None:
    url, acme, globex = cluster.url, cluster.acme, cluster.globex
    job_id = await create(cluster, handler_job("acme-private", BROKEN))
    await trigger(cluster, job_id, "private-0")
    await eventually(
        lambda: cluster.scheduler.ListDeadLetters(scheduler_pb2.ListDeadLettersRequest(), metadata=bearer(acme)),
        lambda r: len(r.executions) == 1, "no dead letter",
    )

    status, headers, body = await get(url, "/api/jobs", acme)
    assert status == 200 and headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store" and headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    [listed] = json.loads(body)["jobs"]
    assert (listed["id"], listed["name"], listed["lastRun"]["status"]) == (job_id, "acme-private", "EXECUTION_STATUS_DEAD")
    assert listed["lastRun"]["error"] == "card declined\\nby the bank", "stored and answered escaped, one line"

    # Another tenant's job is "not found", exactly as a job that does not exist.
    missing = "job_" + "0" * 26
    for suffix in ("", "/executions", "/lateness"):
        status, headers, body = await get(url, f"/api/jobs/{job_id}{suffix}", globex)
        missing_status, _, missing_body = await get(url, f"/api/jobs/{missing}{suffix}", globex)
        assert (status, missing_status) == (404, 404), suffix
        assert body.replace(job_id.encode(), b"ID") == missing_body.replace(missing.encode(), b"ID")
        assert b"acme" not in body and headers["cache-control"] == "no-store"
    status, _, body = await get(url, f"/api/deadletters?job_id={job_id}", globex)
    assert status == 200 and json.loads(body).get("executions", []) == []
    status, _, body = await get(url, "/api/jobs", globex)
    assert status == 200 and "jobs" not in json.loads(body)

    # Credentials: none or unknown 401 (with a challenge), the wrong kind 403.
    for credential in (None, "twk_unknown_" + "y" * 43, "not-a-credential"):
        status, headers, body = await get(url, "/api/jobs", credential)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer"), credential
        assert json.loads(body)["error"]["code"] == 401
    status, _, body = await get(url, "/api/jobs", headers={"Authorization": "Basic YWNtZTp4"})
    assert status == 401
    for path, credential, message in (
        ("/api/cluster", acme, "the cluster view needs the admin token"),
        ("/api/cluster", cluster.worker_credential, "the cluster view needs the admin token"),
        ("/api/jobs", cluster.running.admin_token, "the tenant views need a tenant API key"),
        ("/api/session", cluster.worker_credential, None),
    ):
        status, _, body = await get(url, path, credential)
        assert status == 403, path
        if message:
            assert json.loads(body)["error"]["message"] == message
    status, _, body = await get(url, "/api/cluster", cluster.running.admin_token)
    assert status == 200 and json.loads(body)["answeredBy"] == cluster.running.server.server_id
    assert json.loads((await get(url, "/api/session", acme))[2]) == {"kind": "tenant", "tenant": "acme"}
    assert json.loads((await get(url, "/api/session", cluster.running.admin_token))[2]) == {"kind": "admin"}

    # Bad parameters name themselves; nothing but GET and HEAD.
    for path, field in (("/api/jobs?page_size=0", "page_size"), ("/api/jobs?page_size=9999", "page_size"),
                        (f"/api/jobs/{job_id}/executions?page_token=nope", "page_token"),
                        ("/api/cluster?top=101", "top")):  # fmt: skip
        status, _, body = await get(url, path, cluster.running.admin_token if "cluster" in path else acme)
        assert status == 400, path
        assert [f["field"] for f in json.loads(body)["error"]["fields"]] == [field]
    status, headers, _ = await get(url, "/api/jobs", acme, method="DELETE")
    assert status == 405 and headers["allow"] == "GET, HEAD"

    # The page and its files: their types, the policy, revalidation by ETag.
    for path, content_type in (("/", "text/html; charset=utf-8"), ("/console.js", "text/javascript; charset=utf-8"),
                               ("/console.css", "text/css; charset=utf-8"), ("/favicon.svg", "image/svg+xml")):  # fmt: skip
        status, headers, body = await get(url, path)
        assert (status, headers["content-type"]) == (200, content_type), path
        assert headers["x-content-type-options"] == "nosniff" and headers["cache-control"] == "no-cache"
        status, _, again = await get(url, path, headers={"If-None-Match": headers["etag"]})
        assert (status, again) == (304, b"")


async def test_the_console_shows_the_runs_a_calendar_moves_as_get_job_does(cluster) -> None:
    """A job on a calendar whose every day is a holiday but Sundays: the
    console's next runs are GetJob's, moved to the next Sunday with a note."""
    from tickwheel.v1 import calendar_pb2

    await cluster.scheduler.CreateCalendar(calendar_pb2.CreateCalendarRequest(
        calendar=calendar_pb2.Calendar(name="sundays", time_zone="Europe/London", business_days=[7]),
        request_id="console-cal",
    ), metadata=bearer(cluster.acme))  # fmt: skip
    job = handler_job("weekly", FLAKY, calendar=job_pb2.JobCalendar(name="sundays", rule=job_pb2.CALENDAR_RULE_SKIP))
    job.schedule.cron.expression = "0 3 * * 6,7"  # Saturdays (skipped) and Sundays
    job_id = await create(cluster, job)
    status, _, body = await get(cluster.url, f"/api/jobs/{job_id}", cluster.acme)
    assert status == 200
    shown = json.loads(body)["nextRuns"]
    expected = await cluster.scheduler.GetJob(
        scheduler_pb2.GetJobRequest(id=job_id, next_runs=len(shown)), metadata=bearer(cluster.acme)
    )
    assert [bool(run.get("skipped")) for run in shown] == [run.skipped for run in expected.next_runs]
    assert any(run.skipped for run in expected.next_runs) and not all(run.skipped for run in expected.next_runs)
    assert all("not a business day of calendar sundays" in run["note"] for run in shown if run.get("skipped"))
