"""``tickwheel admin alerts list|watch`` against the scripted server: the
requests the flags build, and what is printed."""

from __future__ import annotations

import json

from google.protobuf import timestamp_pb2

from tickwheel.v1 import admin_pb2
from tickwheel_server.cli.admin import ALERT_KINDS


def _alert(ident: str, **fields) -> admin_pb2.Alert:
    values = dict(id=ident, kind=admin_pb2.ALERT_KIND_DEAD_LETTER, severity=admin_pb2.ALERT_SEVERITY_WARNING,
                  tenant="acme", execution_id=f"job_a:{ident}", count=1, summary="is dead: card declined")  # fmt: skip
    alert = admin_pb2.Alert(**{**values, **fields})
    alert.raised_at.CopyFrom(timestamp_pb2.Timestamp(seconds=1_800_000_000))
    return alert


def test_the_kind_choices_are_the_contracts_kinds() -> None:
    from tickwheel_server.api import convert
    from tickwheel_server.alerts import catalogue

    names = [n[len("ALERT_KIND_"):].lower() for n in admin_pb2.AlertKind.keys() if not n.endswith("UNSPECIFIED")]
    assert list(ALERT_KINDS) == list(catalogue.ALERT_KINDS) == list(convert.ALERT_KIND_TO_PROTO) == names
    assert [convert.ALERT_KIND_TO_PROTO[k] for k in names] == [admin_pb2.AlertKind.Value(f"ALERT_KIND_{k.upper()}")
                                                               for k in names]  # fmt: skip


def test_alerts_list_builds_the_filters_and_prints_a_table(cli, fake, operator) -> None:
    resolved = _alert("a2")
    resolved.resolved_at.CopyFrom(timestamp_pb2.Timestamp(seconds=1_800_000_060))
    fake.script(
        "ListAlerts",
        admin_pb2.ListAlertsResponse(alerts=[_alert("a1")], next_page_token="t2"),
        admin_pb2.ListAlertsResponse(alerts=[resolved]),
    )
    result = cli(*operator, "admin", "alerts", "list", "--all", "--kind", "dead_letter", "poison", "--tenant", "acme")
    assert result.code == 0, result.err
    first, second = fake.requests("ListAlerts")
    assert first.include_resolved and first.tenant == "acme" and first.page_size == 100
    assert list(first.kinds) == [admin_pb2.ALERT_KIND_DEAD_LETTER, admin_pb2.ALERT_KIND_POISON]
    assert second.page_token == "t2"
    header, row1, row2 = result.out.splitlines()
    assert header.split()[:4] == ["ID", "KIND", "SEVERITY", "TENANT"]
    assert row1.split()[:6] == ["a1", "dead_letter", "warning", "acme", "job_a:a1", "1"] and " open " in row1
    assert "resolved 2027-01-15T08:01:00Z" in row2


def test_alerts_list_limit_and_json(cli, fake, operator) -> None:
    fake.reply("ListAlerts", admin_pb2.ListAlertsResponse(alerts=[_alert("a1"), _alert("a2")], next_page_token="x"))
    result = cli(*operator, "--json", "admin", "alerts", "list", "--limit", "1")
    assert [a["id"] for a in json.loads(result.out)["alerts"]] == ["a1"]
    assert len(fake.requests("ListAlerts")) == 1 and fake.requests("ListAlerts")[0].page_size == 1


def test_alerts_watch_prints_each_event_and_stops_at_the_limit(cli, fake, operator) -> None:
    events = [admin_pb2.WatchAlertsResponse(alert=_alert(f"a{n}", count=n)) for n in (1, 2, 3)]
    fake.reply("WatchAlerts", events)
    result = cli(*operator, "admin", "alerts", "watch", "--open", "--kind", "clock_skew", "--limit", "2")
    assert result.code == 0, result.err
    assert [line.split()[0] for line in result.out.splitlines()] == ["a1", "a2"]
    [request] = fake.requests("WatchAlerts")
    assert request.include_open and list(request.kinds) == [admin_pb2.ALERT_KIND_CLOCK_SKEW]


def test_alerts_watch_json_is_one_document_per_line_until_the_stream_ends(cli, fake, operator) -> None:
    fake.reply("WatchAlerts", [admin_pb2.WatchAlertsResponse(alert=_alert(f"a{n}")) for n in (1, 2)])
    result = cli(*operator, "--json", "admin", "alerts", "watch", "--tenant", "acme")
    assert result.code == 0, result.err
    assert [json.loads(line)["id"] for line in result.out.splitlines()] == ["a1", "a2"]
    assert fake.requests("WatchAlerts")[0].tenant == "acme"


def test_alerts_watch_refuses_a_negative_limit(cli, fake, operator) -> None:
    result = cli(*operator, "admin", "alerts", "watch", "--limit", "-1")
    assert result.code == 2 and "--limit" in result.err
    assert fake.requests("WatchAlerts") == []
