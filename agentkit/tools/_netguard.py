"""Which network addresses a tool may reach (private; the HTTP tools' policy, and the URL
and host forms the browser tools' origin check shares: ``check_http_url``,
``canonical_host``).

By default a tool driven by a model may reach public addresses only: loopback, private
(RFC 1918, unique local IPv6), link-local (where cloud metadata services such as
169.254.169.254 and fd00:ec2::254 answer), unspecified, multicast, carrier-grade NAT and
reserved addresses are refused, whichever way they are written (``2130706433``,
``0x7f.1``, ``0177.0.0.1``, ``::ffff:127.0.0.1``, ``0.0.0.0``) or whichever name resolves
to them. The check belongs on the address actually connected to: :func:`resolve_checked`
resolves a name once and returns only the addresses that pass, and the caller connects to
exactly those (so DNS rebinding between a check and a connect cannot bypass it).

* :class:`NetworkPolicy` holds the options (``allowed_hosts``, ``allow_private_networks``);
  ``check_url`` is the pure check of a URL's host before anything is sent, ``check_address``
  the check of one resolved address.
* :func:`address_refusal` is the pure classification of one IP address.
* :exc:`AddressRefused` is what a connection raises when every address is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union
from urllib.parse import urlsplit

from ..errors import ConfigurationError

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
_LINK_LOCAL = "a link-local address (cloud metadata services such as 169.254.169.254 answer there)"
_REFUSED_NETWORKS: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = (
    (_V4("0.0.0.0/8"), "an unspecified ('this network') address, which reaches this machine"),
    (_V4("10.0.0.0/8"), "a private (RFC 1918) address"),
    (_V4("100.64.0.0/10"), "a carrier-grade NAT (RFC 6598) address"),
    (_V4("127.0.0.0/8"), "a loopback address (this machine)"),
    (_V4("169.254.0.0/16"), _LINK_LOCAL),
    (_V4("172.16.0.0/12"), "a private (RFC 1918) address"),
    (_V4("192.0.0.0/24"), "a reserved (IETF protocol assignment) address"),
    (_V4("192.168.0.0/16"), "a private (RFC 1918) address"),
    (_V4("198.18.0.0/15"), "a private-use (benchmarking) address"),
    (_V4("224.0.0.0/4"), "a multicast address"),
    (_V4("240.0.0.0/4"), "a reserved or broadcast address"),
    (_V6("::/128"), "the unspecified address, which reaches this machine"),
    (_V6("::1/128"), "a loopback address (this machine)"),
    (_V6("64:ff9b:1::/48"), "a local-use NAT64 address"),
    (_V6("fc00::/7"), "a unique local (private) address (the cloud metadata service fd00:ec2::254 is one)"),
    (_V6("fe80::/10"), "a link-local address"),
    (_V6("fec0::/10"), "a site-local (private) address"),
    (_V6("ff00::/8"), "a multicast address"),
)
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class AddressRefused(Exception):
    """A request was refused because of where it would go. Deliberately not an OSError,
    so HTTP clients pass it through instead of retrying or wrapping it."""


def parse_ip(host: str) -> IPAddress | None:
    """The IP address ``host`` denotes as a URL host, or None for a name.

    Besides the standard forms this reads what ``inet_aton`` and browsers accept:
    ``2130706433`` (one number), ``0x7f.1`` and ``127.1`` (fewer parts), octal
    (``0177.0.0.1``) and hex (``0x7f.0.0.1``) parts; brackets and an IPv6 zone are ignored.
    """
    host = host.strip().strip("[]")
    if "%" in host:
        host = host.split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    return _loose_ipv4(host)


def _loose_ipv4(host: str) -> ipaddress.IPv4Address | None:
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":  # a trailing dot, as in "127.0.0.1."
        parts.pop()
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        low = part.lower()
        try:
            if low.startswith("0x"):
                numbers.append(int(low[2:] or "0", 16))
            elif len(low) > 1 and low.startswith("0"):
                numbers.append(int(low, 8))
            elif low.isdigit():
                numbers.append(int(low, 10))
            else:
                return None
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries and leads to: IPv4-mapped, IPv4-compatible,
    NAT64 (64:ff9b::/96) and 6to4 (2002::/16)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    packed = int(ip)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d (not :: or ::1)
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    if ip in _V6("64:ff9b::/96"):
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None


def address_refusal(ip: IPAddress | str) -> str | None:
    """Why ``ip`` is not a public address (e.g. ``"a loopback address (this machine)"``), or
    None when it is one."""
    if isinstance(ip, str):
        parsed = parse_ip(ip)
        if parsed is None:
            raise ValueError(f"not an IP address: {ip!r}")
        ip = parsed
    if ip in _METADATA:
        return "the cloud instance metadata address (link-local)"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_ipv4(ip)
        if inner is not None:
            why = address_refusal(inner)
            return None if why is None else f"an IPv6 form of {inner}, {why}"
    for network, why in _REFUSED_NETWORKS:
        if ip.version == network.version and ip in network:
            return why
    return None


@dataclass(frozen=True)
class _HostPattern:
    host: str  # lowercased; "*.example.com" globs keep the "*."; IPs in canonical form
    port: int | None

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def canonical_host(host: str) -> str:
    """Lower case, no brackets or trailing dot, IP addresses in standard form, and
    international names in their ASCII (punycode) form, as HTTP clients send them."""
    host = host.strip().strip("[]").lower().rstrip(".")
    ip = parse_ip(host)
    if ip is not None:
        return str(ip)
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            pass
    return host


def check_http_url(url: str) -> None:
    """Raise ConfigurationError unless ``url`` is an absolute http(s) URL whose host every
    parser reads the same way."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"invalid URL {url!r}: give an absolute http:// or https:// URL"
        )
    if any(c == "\\" or ord(c) <= 32 or c == "\x7f" for c in parts.netloc):
        # parsers disagree on these (a backslash ends the host for some), so the host
        # checked could differ from the host connected to
        raise ConfigurationError(
            f"invalid URL {url!r}: a backslash, space or control character before the path makes "
            f"the host ambiguous; percent-encode it"
        )


def _parse_pattern(text: Any, option: str) -> _HostPattern:
    bad = ConfigurationError(
        f"{option}: {text!r} is not a host pattern; give a host ('api.example.com'), a glob "
        f"('*.example.com'), an IP address ('10.0.0.5', '[fd00::1]'), each optionally with "
        f"':port' ('api.example.com:8443'); no scheme or path"
    )
    if not isinstance(text, str) or not text.strip() or any(c in text for c in "/@?#\\ "):
        raise bad
    host, port = text.strip(), None
    if host.startswith("["):
        inside, bracket, rest = host[1:].partition("]")
        if not bracket:
            raise bad
        host = inside
        if rest:
            if not rest.startswith(":"):
                raise bad
            port = rest[1:]
    elif host.count(":") == 1:
        host, port = host.split(":")
    try:
        port_number = None if port is None else int(port)
    except ValueError:
        raise bad from None
    if port_number is not None and not 0 < port_number < 65536:
        raise bad
    if "*" in host and (not host.startswith("*.") or "*" in host[2:] or len(host) < 3):
        raise bad
    if ":" in host and parse_ip(host) is None:
        raise bad
    return _HostPattern(canonical_host(host), port_number)


def _patterns(value: Any, option: str) -> tuple[_HostPattern, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"{option} must be a list of host patterns such as ['api.example.com', '*.example.org:443'], "
            f"got {value!r}"
        )
    return tuple(_parse_pattern(v, option) for v in value)


@dataclass(frozen=True)
class NetworkPolicy:
    """Where a tool may connect. Build it with :meth:`from_options`."""

    allowed_hosts: tuple[_HostPattern, ...] | None = None
    """None: any host; else only hosts matching one of these."""
    private_everywhere: bool = False
    private_hosts: tuple[_HostPattern, ...] = ()
    """Hosts that may resolve to non-public addresses (when not ``private_everywhere``)."""
    owner: str = "http_tools"

    @classmethod
    def from_options(cls, allowed_hosts: Any = None, allow_private_networks: Any = False, *,
                     owner: str = "http_tools") -> NetworkPolicy:
        """Validate the factory options (``ConfigurationError`` naming what is wrong)."""
        hosts = None if allowed_hosts is None else _patterns(allowed_hosts, "allowed_hosts")
        if isinstance(allow_private_networks, bool):
            return cls(hosts, allow_private_networks, (), owner)
        return cls(hosts, False, _patterns(allow_private_networks, "allow_private_networks"), owner)

    def _private_allowed(self, host: str, port: int) -> bool:
        return self.private_everywhere or any(p.matches(host, port) for p in self.private_hosts)

    def check_url(self, url: str) -> str | None:
        """Why a request to ``url`` is refused before resolving its host (a host outside
        ``allowed_hosts``, or an IP address in any notation that is not public), else None."""
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return f"{url!r} has an invalid port"
        host = canonical_host(parts.hostname or "")
        refused = self.check_host(host, port)
        if refused is not None:
            return refused
        ip = parse_ip(host)
        if ip is not None:
            return self.check_address(host, port, ip, written=parts.hostname)
        return None

    def check_host(self, host: str, port: int) -> str | None:
        """Why ``host:port`` is refused by ``allowed_hosts``, or None."""
        host = canonical_host(host)
        if self.allowed_hosts is None or any(p.matches(host, port) for p in self.allowed_hosts):
            return None
        listed = ", ".join(str(p) for p in self.allowed_hosts) or "nothing"
        return (f"{host}:{port} is not in allowed_hosts ({listed}); add it to "
                f"{self.owner}(allowed_hosts=[...]) to allow it")

    def check_address(self, host: str, port: int, ip: IPAddress | str, *,
                      written: str | None = None) -> str | None:
        """Why connecting to ``ip`` for ``host:port`` is refused, or None. ``written`` is
        how the URL spelled the host, when it is an IP address (named in the message)."""
        host = canonical_host(host)
        address = parse_ip(ip) if isinstance(ip, str) else ip
        if address is None:
            return f"{ip!r} is not an IP address"
        why = address_refusal(address)
        if why is None or self._private_allowed(host, port):
            return None
        if str(address) != host:
            shown = f"{host} resolves to {address}, which is"
        elif written and written.strip("[]").lower() != host:
            shown = f"{written} is {address},"
        else:
            shown = f"{host} is"
        pattern = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return (f"{shown} {why}. {self.owner} refuses loopback, private, link-local (cloud metadata), "
                f"unspecified, multicast and carrier-grade NAT addresses so that a model cannot reach "
                f"this machine or its network; to allow it pass allow_private_networks=True to "
                f"{self.owner}() (or allow_private_networks=[{pattern!r}] for this host only)")


def resolve_checked(host: str, port: int, policy: NetworkPolicy,
                    family: int = socket.AF_UNSPEC) -> list[tuple[Any, ...]]:
    """Resolve ``host`` once and return the ``getaddrinfo`` entries ``policy`` allows, in
    order; connect to one of these and nothing else. Raises :exc:`AddressRefused` (saying
    why) when the host is outside ``allowed_hosts`` or every address is refused,
    ``socket.gaierror`` when the name does not resolve."""
    refused = policy.check_host(host, port)  # again here, on the host the client parsed
    if refused is not None:
        raise AddressRefused(refused)
    infos = socket.getaddrinfo(host.strip("[]"), port, family, socket.SOCK_STREAM)
    allowed, refusals = [], []
    for info in infos:
        why = policy.check_address(host, port, str(info[4][0]))
        if why is None:
            allowed.append(info)
        else:
            refusals.append(why)
    if not allowed:
        raise AddressRefused(refusals[0] if refusals else f"{host} resolves to no address")
    return allowed
