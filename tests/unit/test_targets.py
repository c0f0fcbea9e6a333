"""The HTTP target address policy: refused ranges with the rule they break,
allow-lists, IPv6 forms that carry an IPv4 address, the write-time URL check
(IP literals in every spelling, localhost) and where servers read the
allow-list from."""

from __future__ import annotations

import argparse
import ipaddress
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tickwheel.v1 import job_pb2

from tickwheel_server.api.validate import normalise_job
from tickwheel_server.config import ConfigError, add_server_arguments, load_server_config
from tickwheel_server.errors import InvalidArgument
from tickwheel.shared.targets import (
    DEFAULT_POLICY,
    LOOPBACK_NETWORKS,
    TargetPolicy,
    embedded_ipv4,
    host_address,
    parse_networks,
)

ip = ipaddress.ip_address


@pytest.mark.parametrize(
    ("address", "rule", "network"),
    [
        ("127.0.0.1", "loopback", "127.0.0.0/8"),
        ("127.255.0.9", "loopback", "127.0.0.0/8"),
        ("::1", "loopback", "::1/128"),
        ("169.254.169.254", "link-local", "169.254.0.0/16"),
        ("fe80::1", "link-local", "fe80::/10"),
        ("10.1.2.3", "private", "10.0.0.0/8"),
        ("172.16.0.1", "private", "172.16.0.0/12"),
        ("172.31.255.255", "private", "172.16.0.0/12"),
        ("192.168.1.1", "private", "192.168.0.0/16"),
        ("fc00::1", "private", "fc00::/7"),
        ("fd12:3456::1", "private", "fc00::/7"),
        ("0.0.0.0", "unspecified", "0.0.0.0/8"),
        ("::", "unspecified", "::/128"),
        ("100.64.0.1", "CGNAT", "100.64.0.0/10"),
        ("224.0.0.251", "multicast", "224.0.0.0/4"),
        ("ff02::1", "multicast", "ff00::/8"),
        ("255.255.255.255", "broadcast", "240.0.0.0/4"),
        ("198.18.0.1", "benchmarking", "198.18.0.0/15"),
        ("2001:db8::1", "documentation", "2001:db8::/32"),
        ("3fff::1", "documentation", "3fff::/20"),
        ("4000::1", "reserved", "outside global unicast 2000::/3"),
    ],
)
def test_the_default_policy_refuses_internal_ranges_naming_the_rule(address: str, rule: str, network: str) -> None:
    reason = DEFAULT_POLICY.refusal(ip(address))
    assert reason is not None and reason.startswith(f"{address} is ")
    assert rule in reason and f"({network})" in reason
    assert DEFAULT_POLICY("example.com", ip(address)) is False


@pytest.mark.parametrize(
    ("address", "inner", "rule"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "10.0.0.1", "private"),
        ("::ffff:0.0.0.0", "0.0.0.0", "unspecified"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254", "link-local"),  # NAT64
        ("2002:c0a8:0101::1", "192.168.1.1", "private"),  # 6to4
        ("::7f00:1", "127.0.0.1", "loopback"),  # IPv4-compatible
    ],
)
def test_ipv6_forms_carrying_a_refused_ipv4_address_are_refused(address: str, inner: str, rule: str) -> None:
    assert embedded_ipv4(ip(address)) == ip(inner)
    reason = DEFAULT_POLICY.refusal(ip(address))
    assert reason is not None and f"carries {inner}, which is {rule}" in reason


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "192.169.0.1",
     "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"],
)  # fmt: skip
def test_public_addresses_are_allowed(address: str) -> None:
    assert DEFAULT_POLICY.refusal(ip(address)) is None
    assert DEFAULT_POLICY("example.com", ip(address)) is True


def test_a_scoped_link_local_address_is_refused() -> None:
    assert "link-local" in DEFAULT_POLICY.refusal(ip("fe80::1%eth0"))


def test_an_allow_list_opens_only_its_networks() -> None:
    policy = TargetPolicy.allowing(["10.0.0.0/8", "127.0.0.1"])
    assert policy.refusal(ip("10.200.0.7")) is None
    assert policy.refusal(ip("::ffff:10.200.0.7")) is None  # the IPv4 address it carries is allowed
    assert policy.refusal(ip("127.0.0.1")) is None
    assert "loopback" in policy.refusal(ip("127.0.0.2"))  # a bare address is its /32
    assert "private" in policy.refusal(ip("192.168.0.1"))
    assert "link-local" in policy.refusal(ip("169.254.169.254"))


def test_loopback_networks_are_what_dev_allows() -> None:
    policy = TargetPolicy.allowing(LOOPBACK_NETWORKS)
    for allowed in ("127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"):
        assert policy.refusal(ip(allowed)) is None, allowed
    for refused in ("169.254.169.254", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1", "0.0.0.0"):
        assert policy.refusal(ip(refused)) is not None, refused


def test_networks_are_parsed_with_their_origin_named() -> None:
    assert parse_networks(["10.1.2.3/8", " fd00::/8 ", "192.0.2.7"]) == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("192.0.2.7/32"),
    )
    with pytest.raises(ValueError, match=r"--allow-target-network: '10.0.0.0/33' is not a CIDR"):
        parse_networks(["10.0.0.0/33"], origin="--allow-target-network")
    with pytest.raises(ValueError, match="'intranet'"):
        TargetPolicy.allowing(["intranet"])


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_ipv4_address_and_its_mapped_form_get_the_same_verdict(value: int) -> None:
    v4 = ipaddress.IPv4Address(value)
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    assert (DEFAULT_POLICY.refusal(v4) is None) == (DEFAULT_POLICY.refusal(mapped) is None)


@given(st.ip_addresses())
def test_every_address_the_standard_library_calls_internal_is_refused(address) -> None:
    inner = embedded_ipv4(address)
    if inner is not None:
        # IPv4-mapped, -compatible, NAT64 and 6to4 forms are judged by the IPv4 address they carry.
        assert (DEFAULT_POLICY.refusal(address) is None) == (DEFAULT_POLICY.refusal(inner) is None)
        return
    internal = (
        address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
        or address.is_unspecified or address.is_reserved or address.is_site_local
        if address.version == 6 else
        address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
        or address.is_unspecified or address.is_reserved or address in ipaddress.ip_network("100.64.0.0/10")
    )  # fmt: skip
    if internal:
        assert DEFAULT_POLICY.refusal(address) is not None


@pytest.mark.parametrize(
    ("host", "address"),
    [("127.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
     ("0177.0.0.1", "127.0.0.1"), ("0", "0.0.0.0"), ("::ffff:127.0.0.1", "::ffff:127.0.0.1"),
     ("example.com", None), ("deadbeef", None), ("127.0.0.1 x", None), ("cafe.be", None)],
)  # fmt: skip
def test_host_address_reads_every_literal_spelling_the_resolver_accepts(host: str, address: str | None) -> None:
    assert host_address(host) == (None if address is None else ip(address))


@pytest.mark.parametrize(
    ("url", "mentions"),
    [
        ("http://127.0.0.1:8080/hook", "127.0.0.1 is loopback"),
        ("http://[::1]/hook", "::1 is loopback"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is link-local"),
        ("http://10.0.0.5/", "10.0.0.5 is private"),
        ("https://192.168.0.1/", "192.168.0.1 is private"),
        ("http://2130706433/", "127.0.0.1 is loopback"),
        ("http://0x7f.1/", "127.0.0.1 is loopback"),
        ("http://[::ffff:169.254.169.254]/", "carries 169.254.169.254"),
        ("http://[fe80::1%25eth0]/", "link-local"),
        ("http://0.0.0.0:9000/", "0.0.0.0 is unspecified"),
        ("http://localhost:8080/", "localhost always resolves to loopback"),
        ("http://LOCALHOST./", "loopback"),
        ("http://api.localhost/", "api.localhost always resolves to loopback"),
    ],
)
def test_urls_naming_refused_addresses_are_refused_without_dns(url: str, mentions: str) -> None:
    reason = DEFAULT_POLICY.url_refusal(url)
    assert reason is not None and mentions in reason


@pytest.mark.parametrize(
    "url",
    ["https://example.com/hook", "http://8.8.8.8/", "http://[2606:4700:4700::1111]:8443/", "http://localhost.example/"],
)
def test_public_urls_and_host_names_pass_the_write_time_check(url: str) -> None:
    assert DEFAULT_POLICY.url_refusal(url) is None


def test_localhost_passes_when_one_of_its_addresses_is_allowed() -> None:
    assert TargetPolicy.allowing(["127.0.0.0/8"]).url_refusal("http://localhost/") is None
    assert TargetPolicy.allowing(["::1/128"]).url_refusal("http://localhost/") is None


NOW = datetime(2027, 1, 1, tzinfo=timezone.utc)


def http_job(url: str) -> job_pb2.Job:
    job = job_pb2.Job(name="hook", target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
    job.schedule.once_at.FromDatetime(NOW + timedelta(hours=1))
    return job


def test_writing_a_job_checks_its_url_against_the_servers_policy() -> None:
    with pytest.raises(InvalidArgument) as refused:
        normalise_job(http_job("http://169.254.169.254/latest/meta-data/"), NOW)
    (violation,) = refused.value.violations
    assert violation.field == "job.target.http.url"
    assert "169.254.169.254 is link-local" in violation.description
    assert "--allow-target-network" in violation.description

    allowed = TargetPolicy.allowing(["169.254.0.0/16"])
    assert normalise_job(http_job("http://169.254.169.254/"), NOW, target_policy=allowed).target.http.url
    assert normalise_job(http_job("https://example.com/hook"), NOW).target.http.url == "https://example.com/hook"


@pytest.mark.parametrize("url", ["http://[::1/", "http://example.com:99999/", "ftp://example.com/"])
def test_malformed_urls_are_one_violation_not_an_error(url: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        normalise_job(http_job(url), NOW)
    assert [v.field for v in refused.value.violations] == ["job.target.http.url"]
    assert "absolute http or https URL" in refused.value.violations[0].description


def server_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(["--store", "sqlite://", "--etcd", "memory", *argv])


ENV = {"TICKWHEEL_ADMIN_TOKEN": "t" * 20}


def test_server_allow_list_from_flags_environment_and_file(tmp_path) -> None:
    assert load_server_config(server_args(), ENV).allow_target_networks == ()
    assert load_server_config(server_args(), ENV).target_policy == DEFAULT_POLICY
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text('allow_target_networks = ["10.0.0.0/8", "fd00::/8"]\n')
    from_file = load_server_config(server_args("--config", str(config_file)), ENV)
    assert from_file.allow_target_networks == ("10.0.0.0/8", "fd00::/8")
    assert from_file.target_policy.refusal(ip("10.1.1.1")) is None
    env = {**ENV, "TICKWHEEL_ALLOW_TARGET_NETWORKS": "192.168.0.0/16, 172.16.0.0/12"}
    from_env = load_server_config(server_args("--config", str(config_file)), env)
    assert from_env.allow_target_networks == ("192.168.0.0/16", "172.16.0.0/12")
    from_flags = load_server_config(
        server_args("--config", str(config_file), "--allow-target-network", "127.0.0.0/8",
                    "--allow-target-network", "::1/128"),
        env,
    )  # fmt: skip
    assert from_flags.allow_target_networks == ("127.0.0.0/8", "::1/128")


def test_a_bad_allow_list_stops_the_server_naming_the_setting(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"allow_target_networks: '10\.0\.0\.0/40' is not a CIDR"):
        load_server_config(server_args("--allow-target-network", "10.0.0.0/40"), ENV)
    config_file = tmp_path / "tickwheel.toml"
    config_file.write_text('allow_target_networks = "10.0.0.0/8"\n')
    with pytest.raises(ConfigError, match="allow_target_networks: a list of CIDR strings"):
        load_server_config(server_args("--config", str(config_file)), ENV)


def worker_config(*argv: str):
    from tickwheel_worker.cli import build_parser, config_from_args

    return config_from_args(build_parser().parse_args(["--address", "127.0.0.1:1", "--credential", "c", *argv]))


def test_tickwheel_worker_enforces_its_own_allow_list(tmp_path, monkeypatch) -> None:
    from tickwheel_worker.cli import UsageError

    monkeypatch.delenv("TICKWHEEL_ALLOW_TARGET_NETWORKS", raising=False)
    assert worker_config().address_policy == DEFAULT_POLICY
    policy = worker_config("--allow-target-network", "10.0.0.0/8", "--allow-target-network", "fd00::/8").address_policy
    assert policy.refusal(ip("10.9.9.9")) is None and policy.refusal(ip("fd00::5")) is None
    assert "loopback" in policy.refusal(ip("127.0.0.1"))
    monkeypatch.setenv("TICKWHEEL_ALLOW_TARGET_NETWORKS", "192.168.0.0/16,172.16.0.0/12")
    policy = worker_config().address_policy
    assert policy.refusal(ip("192.168.3.3")) is None and policy.refusal(ip("172.20.0.1")) is None
    monkeypatch.delenv("TICKWHEEL_ALLOW_TARGET_NETWORKS")
    with pytest.raises(UsageError, match=r"--allow-target-network: 'lan' is not a CIDR"):
        worker_config("--allow-target-network", "lan")
    # --dev DIR is the laptop setup: loopback is allowed, as in `tickwheel dev`.
    (tmp_path / "dev-credentials.json").write_text('{"address": "127.0.0.1:1", "worker_credential": "c"}')
    policy = worker_config("--dev", str(tmp_path)).address_policy
    assert policy.refusal(ip("127.0.0.1")) is None and policy.refusal(ip("::1")) is None
    assert "link-local" in policy.refusal(ip("169.254.169.254"))
