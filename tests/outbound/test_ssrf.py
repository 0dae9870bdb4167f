"""SSRF defences: which addresses count as public, and which webhook URLs are accepted."""

import ipaddress
import socket

import pytest

from outbound.ssrf import UnsafeWebhookUrl, is_public_address, validate_webhook_url
from tests.support.resolvers import fake_resolver

NON_PUBLIC = [
    "127.0.0.1",
    "127.255.255.254",
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "100.127.255.254",
    "169.254.169.254",
    "169.254.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456:789a::1",
    "ff02::1",
    "fec0::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",
    "2002:7f00:1::",  # 6to4 for 127.0.0.1
    "2002:a00:1::",  # 6to4 for 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 for 169.254.169.254
    "64:ff9b::7f00:1",  # NAT64 for 127.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2001:db8::1",  # documentation
    "not an address",
    "",
]

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "172.32.0.1",  # just outside 172.16/12
    "100.128.0.1",  # just outside 100.64/10
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "::ffff:8.8.8.8",
    "2002:808:808::",  # 6to4 for 8.8.8.8
    "64:ff9b::808:808",  # NAT64 for 8.8.8.8
]


@pytest.mark.parametrize("address", NON_PUBLIC)
def test_non_public_addresses_are_rejected(address):
    assert is_public_address(address) is False


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_accepted(address):
    assert is_public_address(address) is True


def test_address_objects_are_accepted_too():
    assert is_public_address(ipaddress.ip_address("8.8.8.8")) is True
    assert is_public_address(ipaddress.ip_address("::ffff:192.168.0.1")) is False


@pytest.fixture
def dns(monkeypatch):
    table = {
        "hooks.example.com": ["93.184.216.34", "2606:4700:4700::1111"],
        "internal.example.com": ["10.1.2.3"],
        "mixed.example.com": ["93.184.216.34", "127.0.0.1"],
        "metadata.example.com": ["::ffff:169.254.169.254"],
    }
    monkeypatch.setattr(socket, "getaddrinfo", fake_resolver(table))
    return table


def test_public_https_url_is_accepted(dns):
    validate_webhook_url("https://hooks.example.com/path?x=1", allow_private=False)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.example.com/", "must use https"),
        ("ftp://hooks.example.com/", "must use https"),
        ("https://user:pass@hooks.example.com/", "must not contain credentials"),
        ("https://token@hooks.example.com/", "must not contain credentials"),
        ("https:///path-only", "must include a host"),
        ("https://hooks.example.com:99999/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:65536/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:0/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:00/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:+443/", "port must be a number from 1 to 65535"),
        ("https://hooks.example.com:x/", "port must be a number from 1 to 65535"),
        ("https://[::1]:0/", "port must be a number from 1 to 65535"),
        ("https://[::1/", "not a valid URL"),
        ("https://internal.example.com/", "private, loopback or reserved"),
        ("https://mixed.example.com/", "private, loopback or reserved"),
        ("https://metadata.example.com/", "private, loopback or reserved"),
        ("https://127.0.0.1/", "private, loopback or reserved"),
        ("https://[::1]/", "private, loopback or reserved"),
        ("https://169.254.169.254/latest/meta-data/", "private, loopback or reserved"),
        ("https://nowhere.example.com/", "could not be resolved"),
    ],
)
def test_unsafe_urls_are_refused_with_a_clear_message(dns, url, message):
    with pytest.raises(UnsafeWebhookUrl, match=message):
        validate_webhook_url(url, allow_private=False)


@pytest.mark.parametrize("allow_private", [False, True])
def test_port_zero_is_refused_even_where_private_targets_are_allowed(dns, allow_private):
    with pytest.raises(UnsafeWebhookUrl, match="port"):
        validate_webhook_url("https://hooks.example.com:0/", allow_private=allow_private)


@pytest.mark.parametrize("port", ["1", "443", "8443", "65535"])
def test_ports_from_1_to_65535_are_accepted(dns, port):
    validate_webhook_url(f"https://hooks.example.com:{port}/", allow_private=False)


def test_allow_private_permits_plain_http_and_private_hosts(dns):
    validate_webhook_url("http://internal.example.com/hook", allow_private=True)
    validate_webhook_url("http://127.0.0.1:8000/hook", allow_private=True)


def test_allow_private_still_requires_a_host_and_no_credentials(dns):
    with pytest.raises(UnsafeWebhookUrl, match="must use https"):
        validate_webhook_url("ftp://internal.example.com/", allow_private=True)
    with pytest.raises(UnsafeWebhookUrl, match="must not contain credentials"):
        validate_webhook_url("http://a:b@internal.example.com/", allow_private=True)
