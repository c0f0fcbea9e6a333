"""Where HTTP targets may point: the address policy against server-side
request forgery.

A job's HTTP target is called by a worker inside the operator's network, so
a URL naming an internal address would let a tenant reach what it must not:
the cloud metadata service at 169.254.169.254, admin ports on loopback, the
private network. :class:`TargetPolicy` refuses loopback, link-local,
private, unspecified, shared (CGNAT), multicast and reserved addresses, in
IPv4 and IPv6, and IPv6 addresses that carry one of those IPv4 addresses
(IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible, NAT64 ``64:ff9b::/96``,
6to4 ``2002::/16``), unless the operator allow-lists a network that holds
it (``--allow-target-network CIDR``). An allow-listed network wins over
every refused range.

The policy is applied twice:

* when a job is written (CreateJob, UpdateJob), to the URL alone
  (:meth:`TargetPolicy.url_refusal`): an IP literal, in every spelling the
  resolver accepts (``127.1``, ``2130706433``, ``0x7f000001``,
  ``[::ffff:127.0.0.1]``), and the names ``localhost`` and ``*.localhost``,
  which always mean loopback (RFC 6761). Other host names are not resolved
  then: the answer at write time says nothing about the address called later
  (records change; DNS rebinding changes them on purpose; the server's
  resolver need not be the worker's), and a lookup would make every write
  wait on DNS. Pure: nothing here blocks.
* when the target is called, by the worker, to every address the host name
  resolved to, before connecting to it (``tickwheel_worker.http_target``
  connects to the checked address and never resolves again). This is the
  check that holds; the first only refuses early what is certain.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union
from urllib.parse import urlsplit

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

LOOPBACK_NETWORKS = ("127.0.0.0/8", "::1/128")
"""What ``tickwheel dev`` allow-lists, so targets on the laptop work."""

ALLOW_FLAG = "--allow-target-network"

# (network, rule). Most specific first where ranges nest, so the rule named
# is the narrowest that applies.
_REFUSED_RANGES = (
    ("0.0.0.0/8", "unspecified (this network)"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata lives here)"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("192.0.2.0/24", "reserved (documentation)"),
    ("192.88.99.0/24", "reserved (6to4 relay anycast)"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
    ("198.51.100.0/24", "reserved (documentation)"),
    ("203.0.113.0/24", "reserved (documentation)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved (including broadcast)"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "private (local-use NAT64)"),
    ("100::/64", "reserved (discard-only)"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
    ("2001:db8::/32", "reserved (documentation)"),
    ("3fff::/20", "reserved (documentation)"),
    ("fc00::/7", "private (unique local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private (site-local)"),
    ("ff00::/8", "multicast"),
)
REFUSED: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(network), rule) for network, rule in _REFUSED_RANGES
)
"""The ranges refused unless allow-listed, each with the rule it breaks.
IPv6 outside global unicast (``2000::/3``) is refused too, unless it carries
an IPv4 address, which then decides."""

_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# The spellings inet_aton accepts (dotted with 1 to 4 parts, decimal, octal,
# hex); checked first because inet_aton also accepts trailing garbage.
_IPV4_SPELLING = re.compile(r"^[0-9a-fA-FxX.]+\Z")


def parse_networks(values: Iterable[str], origin: str = "allow_target_networks") -> tuple[IPNetwork, ...]:
    """CIDRs (``10.0.0.0/8``, ``fd00::/8``; a bare address is its /32 or
    /128) as networks. Host bits are ignored (``10.1.2.3/8`` is
    ``10.0.0.0/8``). ValueError naming ``origin`` and the bad value."""
    networks = []
    for value in values:
        text = str(value).strip()
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError as error:
            raise ValueError(f"{origin}: {value!r} is not a CIDR network: {error}") from None
    return tuple(networks)


def _refused_rule(address: IPAddress, carries_ipv4: bool = False) -> str | None:
    """``rule (network)`` for an unscoped address in a refused range, or None."""
    for network, rule in REFUSED:
        if network.version == address.version and address in network:
            return f"{rule} ({network})"
    if address.version == 6 and not carries_ipv4 and address not in _GLOBAL_UNICAST:
        return f"reserved (outside global unicast {_GLOBAL_UNICAST})"
    return None


def _shown(address: IPAddress) -> str:
    """An address as people write it: IPv4-mapped in its dotted form."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        scope = getattr(address, "scope_id", None)
        return f"::ffff:{mapped}" + (f"%{scope}" if scope else "")
    return str(address)


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and leads to, or None:
    IPv4-mapped, IPv4-compatible (not ``::`` or ``::1``), NAT64 and 6to4."""
    if address.version != 6:
        return None
    assert isinstance(address, ipaddress.IPv6Address)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    plain = ipaddress.IPv6Address(int(address))  # without a scope id
    if plain in _NAT64 or (plain in _IPV4_COMPATIBLE and int(plain) > 1):
        return ipaddress.IPv4Address(int(plain) & 0xFFFF_FFFF)
    return address.sixtofour


def host_address(host: str) -> IPAddress | None:
    """The address a URL's host names without DNS: an IPv6 literal (brackets
    already removed, as ``urlsplit().hostname`` gives it) or an IPv4 address
    in any spelling the resolver accepts. None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _IPV4_SPELLING.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


@dataclass(frozen=True)
class TargetPolicy:
    """Which addresses HTTP targets may reach: everything but :data:`REFUSED`,
    plus the ``allowed`` networks. The default policy allows nothing extra.

    Also an ``AddressPolicy`` of the worker (``policy(host, address) ->
    allowed``), whose refusals :meth:`refusal` explains.
    """

    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, networks: Iterable[str], origin: str = "allow_target_networks") -> TargetPolicy:
        """A policy allow-listing these CIDRs. ValueError naming a bad one."""
        return cls(parse_networks(networks, origin))

    def refusal(self, address: IPAddress) -> str | None:
        """None when ``address`` may be called; otherwise which rule refuses
        it, e.g. ``169.254.169.254 is link-local (…) (169.254.0.0/16)``.

        Allowed when the address, or the IPv4 address it carries, is in an
        allow-listed network; else refused when either is in a refused range.
        """
        plain = ipaddress.ip_address(int(address)) if address.version == 4 else ipaddress.IPv6Address(int(address))
        inner = embedded_ipv4(plain)
        forms = [plain] if inner is None else [plain, inner]
        for form in forms:
            if any(form in network for network in self.allowed if network.version == form.version):
                return None
        rule = _refused_rule(plain, carries_ipv4=inner is not None)
        if rule is not None:
            return f"{_shown(address)} is {rule}"
        rule = None if inner is None else _refused_rule(inner)
        if rule is not None:
            return f"{_shown(address)} carries {inner}, which is {rule}"
        return None

    def __call__(self, host: str, address: IPAddress) -> bool:
        return self.refusal(address) is None

    def url_refusal(self, url: str) -> str | None:
        """Why a target URL is refused before any DNS lookup, or None. Only an
        IP literal and ``localhost``/``*.localhost`` are judged here (see the
        module docstring); a URL that does not parse is left to the caller."""
        try:
            host = urlsplit(url).hostname
        except ValueError:
            return None
        if not host:
            return None
        name = host.rstrip(".")
        if name == "localhost" or name.endswith(".localhost"):
            # RFC 6761: the resolver answers loopback for these without asking DNS.
            # Refused only when no address it may resolve to could be called.
            reasons = [self.refusal(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
            if any(reason is None for reason in reasons):
                return None
            return f"{host} always resolves to loopback: {'; '.join(str(r) for r in reasons)}"
        address = host_address(host)
        return None if address is None else self.refusal(address)

    def describe(self) -> str:
        """The allow-list, for logs."""
        return ", ".join(str(network) for network in self.allowed) or "none"


DEFAULT_POLICY = TargetPolicy()
"""Refuse every range in :data:`REFUSED`: what ``tickwheel server`` and
``tickwheel worker`` enforce unless told otherwise."""

__all__ = [
    "ALLOW_FLAG",
    "DEFAULT_POLICY",
    "LOOPBACK_NETWORKS",
    "REFUSED",
    "IPAddress",
    "IPNetwork",
    "TargetPolicy",
    "embedded_ipv4",
    "host_address",
    "parse_networks",
]
