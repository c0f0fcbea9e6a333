"""`deploy/` holds what operators plug in: Prometheus alerting rules, a
Grafana dashboard and systemd units. Each is checked by the tool that reads
it (promtool, systemd-analyze), and every metric they name is one a live
server exports: a rule over a renamed metric would never fire, and nothing
else would say so."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest
import yaml
from tickwheel.v1 import job_pb2, scheduler_pb2, scheduler_pb2_grpc

from tests.integration.test_server_api import bearer
from tests.support.polling import eventually
from tests.support.server import running_server
from tests.support.workers import builtin_handlers, running_worker
from tickwheel_server.telemetry.prometheus import parse_samples

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus" / "tickwheel-rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "tickwheel-rules.test.yml"
DASHBOARD = DEPLOY / "grafana" / "tickwheel.json"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
OPERATIONS = REPO / "docs" / "operations.md"
VENV = REPO / ".venv"
METRIC = re.compile(r"\btickwheel_[a-z0-9_]+\b")
PROMETHEUS_OWN = {"up"}
"""Series Prometheus writes itself for every target (the rules' server-down alerts read them)."""


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def _rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _dashboard_queries() -> list[str]:
    return [target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"]]


def _metric_names(expressions: list[str]) -> set[str]:
    return {name for expression in expressions for name in METRIC.findall(expression)}


def test_the_rules_load_in_prometheus() -> None:
    checked = _promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_alert_fires_on_its_condition_and_only_then() -> None:
    # promtool runs the unit tests beside the rules: each alert fires on the
    # series that should raise it and stays quiet below its threshold.
    tested = _promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    named = {test["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for test in case.get("alert_rule_test", [])}  # fmt: skip
    assert named == {rule["alert"] for rule in _rules()}, "every alert has a unit test"


def test_each_alert_links_a_runbook_section_that_exists() -> None:
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("#")
    }
    for rule in _rules():
        page, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, f"{rule['alert']}: no section #{anchor}"
        assert rule["labels"]["severity"] in {"page", "warning"}


def test_the_dashboard_queries_are_valid_promql(tmp_path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "tickwheel" and dashboard["panels"]
    queries = _dashboard_queries()
    # promtool checks PromQL inside rule files only: each query becomes a recording rule.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"tickwheel:dashboard_query:{index}", "expr": query} for index, query in enumerate(queries)
    ]}]}  # fmt: skip
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    checked = _promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(queries)} rules found" in checked.stdout
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_a_broken_query_is_caught(tmp_path) -> None:
    # The check above can fail: promtool refuses PromQL that does not parse.
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "tickwheel:broken", "expr": "sum by (le (rate(tickwheel_start_lateness_seconds_bucket[5m]))"},
    ]}]}))  # fmt: skip
    assert _promtool("check", "rules", str(path)).returncode != 0


def _get(url: str, token: str) -> str:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


async def test_every_metric_the_rules_and_dashboard_name_is_exported(store_and_etcd) -> None:
    """A server that ran one execution, compared its clock with the store's
    and holds its partitions exports every series the rules and the
    dashboard read."""
    wanted = _metric_names([rule["expr"] for rule in _rules()] + _dashboard_queries())
    assert {"tickwheel_start_lateness_seconds_bucket", "tickwheel_alerts_open", "tickwheel_clock_skew_seconds"} <= wanted
    store, etcd = store_and_etcd
    async with (
        running_server(store, etcd, http_listen="127.0.0.1:0") as running,
        grpc.aio.insecure_channel(running.address) as channel,
    ):
        url = running.server.http.url.rstrip("/") + "/metrics"
        acme = await running.create_tenant("acme")
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        job = job_pb2.Job(name="deployed", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="echo")))
        job.schedule.cron.expression = "0 0 1 1 *"
        created = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=job, request_id="d1"),
                                           metadata=bearer(acme))  # fmt: skip
        # One execution no worker may run: the ready queue has a depth to show.
        waiting = job_pb2.Job(name="unserved", target=job_pb2.Target(handler=job_pb2.HandlerTarget(name="none")))
        waiting.schedule.cron.expression = "0 0 1 1 *"
        unserved = await scheduler.CreateJob(scheduler_pb2.CreateJobRequest(job=waiting, request_id="d2"),
                                            metadata=bearer(acme))  # fmt: skip
        await scheduler.TriggerJob(scheduler_pb2.TriggerJobRequest(id=unserved.job.id, request_id="t2"),
                                   metadata=bearer(acme))  # fmt: skip
        credential = await running.issue_worker_credential(["acme"], handlers=["echo"])
        async with running_worker(running.address, credential, builtin_handlers(), worker_id="deploy-worker",
                                  http=False):  # fmt: skip
            await scheduler.TriggerJob(
                scheduler_pb2.TriggerJobRequest(id=created.job.id, request_id="t1"), metadata=bearer(acme)
            )
            partitions = running.server.config.partition_count

            async def everything_exported():
                samples = parse_samples(await asyncio.to_thread(_get, url, running.admin_token))
                names = {name for name, _ in samples}
                done = samples.get(("tickwheel_partitions_owned", ())) == partitions and wanted <= names
                return samples if done else None

            samples = await eventually(everything_exported, "every metric the rules and dashboard name")
        kinds = {dict(labels)["kind"] for name, labels in samples if name == "tickwheel_alerts_open"}
        assert {"late", "dead_letter", "poison", "partition_unowned", "clock_skew"} <= kinds
        assert samples[("tickwheel_alerts_open", (("kind", "partition_unowned"),))] == 0
        assert abs(samples[("tickwheel_clock_skew_seconds", ())]) < 0.25
        assert samples[("tickwheel_session_losses_total", ())] == 0
        assert samples[("tickwheel_requeues_total", (("cause", "worker"),))] == 0
        assert samples[("tickwheel_queue_depth", (("tenant", "acme"),))] >= 1


def _exec_start(unit: Path) -> list[str]:
    (line,) = [line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_the_systemd_unit_verifies(unit: Path, tmp_path) -> None:
    # The units name /opt/tickwheel/venv; verified here against this
    # checkout's venv, since systemd-analyze checks that the program exists.
    local = tmp_path / unit.name
    local.write_text(unit.read_text().replace("/opt/tickwheel/venv", str(VENV)))
    verified = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and not verified.stderr.strip(), verified.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_the_unit_passes_only_options_the_command_takes(unit: Path) -> None:
    # The server runs `tickwheel server` (tickwheel-server); the worker
    # `tickwheel-worker`, which the SDK distribution alone provides.
    program, *arguments = _exec_start(unit)
    command = {"/opt/tickwheel/venv/bin/tickwheel": [arguments.pop(0)],
               "/opt/tickwheel/venv/bin/tickwheel-worker": []}[program]  # fmt: skip
    assert command in (["server"], []), command
    usage = subprocess.run([str(VENV / "bin" / Path(program).name), *command, "--help"], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert usage.returncode == 0, usage.stderr
    options = {argument.split("=")[0] for argument in arguments if argument.startswith("--")}
    assert options and all(re.search(rf"(?m)^\s+{re.escape(option)}\b", usage.stdout) for option in options), (
        options, usage.stdout,
    )
    # Secrets reach the process as systemd credentials, never on the command line.
    assert not {"--credential", "--admin-token", "--api-key"} & options
    assert "LoadCredential=" in unit.read_text()


def test_a_unit_with_a_mistake_is_caught(tmp_path) -> None:
    # The check above can fail: systemd-analyze reports an unknown key.
    broken = tmp_path / "broken.service"
    broken.write_text(UNITS[0].read_text().replace("/opt/tickwheel/venv", str(VENV)).replace(
        "RestartSec=2", "RestartSecs=2"))  # fmt: skip
    verified = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60)
    assert "RestartSecs" in verified.stderr
