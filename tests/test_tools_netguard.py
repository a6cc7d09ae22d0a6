"""The pure address checks behind http_tools: every notation of a non-public address is
refused, public ones pass, host patterns match as documented."""

from __future__ import annotations

import ipaddress

import pytest

from agentkit import ConfigurationError
from agentkit.tools._netguard import AddressRefused, NetworkPolicy, address_refusal, parse_ip, resolve_checked

REFUSED = {
    # loopback, in every IPv4 notation inet_aton and browsers accept
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "2130706433": "loopback", "0x7f000001": "loopback",
    "0x7f.1": "loopback", "0x7F.0x0.0x0.0x1": "loopback", "0177.0.0.1": "loopback", "0177.1": "loopback",
    "127.1": "loopback", "127.0.1": "loopback", "017700000001": "loopback", "127.0.0.1.": "loopback",
    "::1": "loopback", "[::1]": "loopback",
    # unspecified
    "0.0.0.0": "unspecified", "0": "unspecified", "0x0": "unspecified", "::": "unspecified",
    # IPv6 forms that carry an IPv4 address
    "::ffff:127.0.0.1": "IPv6 form of 127.0.0.1", "::ffff:7f00:1": "IPv6 form of 127.0.0.1",
    "::ffff:169.254.169.254": "IPv6 form of 169.254.169.254", "::127.0.0.1": "IPv6 form of 127.0.0.1",
    "64:ff9b::a00:1": "IPv6 form of 10.0.0.1", "2002:7f00:1::": "IPv6 form of 127.0.0.1",
    "::ffff:0.0.0.0": "IPv6 form of 0.0.0.0",
    # private
    "10.0.0.1": "private", "10.255.255.255": "private", "172.16.0.1": "private", "172.31.255.1": "private",
    "192.168.1.1": "private", "3232235777": "private", "0xc0.0xa8.1.1": "private",
    "fc00::1": "unique local", "fd12:3456::1": "unique local", "fec0::1": "site-local",
    # link-local and cloud metadata
    "169.254.169.254": "cloud instance metadata", "2852039166": "cloud instance metadata",
    "0xa9.0xfe.0xa9.0xfe": "cloud instance metadata", "fd00:ec2::254": "cloud instance metadata",
    "169.254.1.1": "link-local", "fe80::1": "link-local", "fe80::1%eth0": "link-local",
    # carrier-grade NAT (Alibaba Cloud's metadata service is 100.100.100.200)
    "100.64.0.1": "carrier-grade NAT", "100.100.100.200": "carrier-grade NAT", "100.127.255.254": "carrier-grade NAT",
    # multicast, broadcast, reserved
    "224.0.0.1": "multicast", "239.255.255.250": "multicast", "ff02::1": "multicast",
    "255.255.255.255": "broadcast", "240.0.0.1": "reserved", "198.18.0.1": "private-use",
}

PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "100.128.0.1", "169.255.0.1", "11.0.0.1",
          "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::", "134744072"]


@pytest.mark.parametrize(("written", "reason"), sorted(REFUSED.items()))
def test_every_notation_of_a_non_public_address_is_refused(written, reason):
    ip = parse_ip(written)
    assert ip is not None, written
    why = address_refusal(ip)
    assert why is not None and reason in why, (written, why)
    policy = NetworkPolicy.from_options()
    assert reason in (policy.check_address("example.test", 80, ip) or "")
    host = f"[{written}]" if ":" in written and not written.startswith("[") else written
    refused = policy.check_url(f"http://{host.replace('%', '%25')}:8080/x")
    assert refused is not None and "allow_private_networks=True" in refused
    assert NetworkPolicy.from_options(allow_private_networks=True).check_url(f"http://{host}:8080/x") is None


@pytest.mark.parametrize("written", PUBLIC)
def test_public_addresses_pass(written):
    assert address_refusal(written) is None
    host = f"[{written}]" if ":" in written else written
    assert NetworkPolicy.from_options().check_url(f"http://{host}/x") is None


@pytest.mark.parametrize("name", ["localhost", "example.com", "127.0.0.1.nip.io", "1.2.3.4.5", "0x1g", "256.1.1.1.1",
                                  "08.0.0.1", "1.256.1.1", "127.0.0.1a", ""])
def test_names_are_not_read_as_addresses(name):
    # names are judged by the addresses they resolve to, on connect
    assert parse_ip(name) is None


def test_parsed_forms_are_the_addresses_inet_aton_reads():
    assert parse_ip("0x7f.1") == ipaddress.ip_address("127.0.0.1")
    assert parse_ip("10.1") == ipaddress.ip_address("10.0.0.1")
    assert parse_ip("10.1.258") == ipaddress.ip_address("10.1.1.2")
    assert parse_ip("4294967295") == ipaddress.ip_address("255.255.255.255")
    assert parse_ip("4294967296") is None


def test_a_literal_written_another_way_is_named_in_the_refusal():
    refused = NetworkPolicy.from_options().check_url("http://2130706433/")
    assert refused is not None and refused.startswith("2130706433 is 127.0.0.1, a loopback address")


def test_a_name_that_resolves_to_a_private_address_names_both():
    refused = NetworkPolicy.from_options().check_address("intranet.example.test", 443, "10.1.2.3")
    assert refused is not None and refused.startswith(
        "intranet.example.test resolves to 10.1.2.3, which is a private (RFC 1918) address")
    assert "allow_private_networks=['intranet.example.test:443']" in refused


def test_host_patterns_match_exact_hosts_globs_ports_and_addresses():
    policy = NetworkPolicy.from_options(
        allowed_hosts=["api.example.com", "*.example.org", "svc.example.net:8443", "[2606:4700::1]:443", "8.8.8.8"])
    allowed = ["https://api.example.com/", "http://API.example.com:8080/", "https://a.example.org/",
               "https://a.b.example.org/", "https://svc.example.net:8443/", "https://[2606:4700::1]/",
               "http://8.8.8.8/", "http://134744072/"]
    refused = ["https://example.org/", "https://xexample.org/", "https://api.example.com.evil.test/",
               "https://svc.example.net/", "http://[2606:4700::1]/", "https://8.8.4.4/",
               "https://example.org.attacker.test/"]
    for url in allowed:
        assert policy.check_url(url) is None, url
    for url in refused:
        why = policy.check_url(url)
        assert why is not None and "is not in allowed_hosts" in why, url


def test_private_opt_in_for_listed_hosts_only():
    policy = NetworkPolicy.from_options(allow_private_networks=["intranet.example.test", "10.0.0.5:8080"])
    assert policy.check_address("intranet.example.test", 80, "10.1.2.3") is None
    assert policy.check_url("http://10.0.0.5:8080/") is None
    assert policy.check_url("http://10.0.0.5:9090/") is not None
    assert policy.check_address("other.example.test", 80, "10.1.2.3") is not None
    assert policy.check_url("http://169.254.169.254/") is not None


@pytest.mark.parametrize("bad", ["x", 5, ["ok.example", "http://x"], ["[::1"], ["[::1]x"], ["fe80::1::2"], ["*"],
                                 ["*.*.example"], ["host:0"]])
def test_bad_patterns_are_refused_naming_the_option(bad):
    with pytest.raises(ConfigurationError, match="allowed_hosts"):
        NetworkPolicy.from_options(allowed_hosts=bad)
    with pytest.raises(ConfigurationError, match="allow_private_networks"):
        NetworkPolicy.from_options(allow_private_networks=bad)


def test_resolve_checked_returns_only_allowed_addresses_and_rechecks_the_host():
    with pytest.raises(AddressRefused, match="localhost resolves to 127.0.0.1, which is a loopback address"):
        resolve_checked("localhost", 80, NetworkPolicy.from_options())
    infos = resolve_checked("localhost", 80, NetworkPolicy.from_options(allow_private_networks=True))
    assert infos and all(address_refusal(info[4][0]) is not None for info in infos)
    # the host the HTTP client parsed is checked against allowed_hosts again at connect time
    narrowed = NetworkPolicy.from_options(allowed_hosts=["evil.example"], allow_private_networks=True)
    with pytest.raises(AddressRefused, match=r"localhost:80 is not in allowed_hosts \(evil.example\)"):
        resolve_checked("localhost", 80, narrowed)


def test_international_names_match_in_either_spelling():
    policy = NetworkPolicy.from_options(allowed_hosts=["bücher.example", "*.xn--caf-dma.example"])
    assert policy.check_url("https://bücher.example/") is None
    assert policy.check_host("xn--bcher-kva.example", 443) is None  # what the HTTP client connects to
    assert policy.check_url("https://menu.café.example/") is None
    assert policy.check_url("https://buecher.example/") is not None
