"""Server-side request forgery defences for webhook targets (the README's "Configuration":
WEBHOOK_ALLOW_PRIVATE_TARGETS turns them off, for development only).

A webhook URL is tenant input: without these checks a tenant could make our workers POST to
the cloud metadata service, the database, or anything else on the internal network.
"""

import ipaddress
import socket
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import SplitResult, urlsplit

# NAT64 (RFC 6052 well-known prefix): the last 32 bits are the IPv4 address reached.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class UnsafeWebhookUrl(ValueError):
    """The URL may not be used as a webhook target; str(exc) is a clear, client-safe message."""


def is_public_address(address: str | IPv4Address | IPv6Address) -> bool:
    """True only for a globally routable unicast address. Anything unparseable, loopback,
    private, shared, link-local, unique-local, multicast, unspecified or reserved is False,
    including IPv6 forms that embed such an IPv4 address (mapped, NAT64, 6to4, Teredo)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public_address(ip.ipv4_mapped)
        if ip in _NAT64:
            # Python counts the whole ::/8 as reserved; a DNS64 network hands out these
            # addresses for IPv4-only hosts, so the IPv4 address decides.
            return is_public_address(IPv4Address(int(ip) & 0xFFFFFFFF))
        if not all(is_public_address(embedded) for embedded in _embedded_ipv4(ip)):
            return False
        if ip.is_site_local:
            return False
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def _embedded_ipv4(ip: IPv6Address) -> list[IPv4Address]:
    """IPv4 addresses an IPv6 address tunnels to: a router may deliver to those."""
    embedded: list[IPv4Address] = []
    if ip.sixtofour is not None:
        embedded.append(ip.sixtofour)
    if ip.teredo is not None:
        embedded.extend(ip.teredo)
    return embedded


def resolve_addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to for a TCP connection, in resolver order.
    Raises OSError (socket.gaierror) or UnicodeError when the name cannot be resolved."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass  # a name, not an address literal
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _type, _proto, _canonname, sockaddr in infos:
        # Zone ids (fe80::1%eth0) only ever appear on link-local addresses, rejected anyway.
        address = str(sockaddr[0]).split("%", 1)[0]
        if address not in addresses:
            addresses.append(address)
    return addresses


def validate_webhook_url(url: str, *, allow_private: bool) -> None:
    """Accept `url` as a webhook target or raise UnsafeWebhookUrl saying why.

    Requires https (http too when `allow_private`), a host, and no credentials in the URL;
    unless `allow_private`, the host must resolve and every address must be public. The
    check is repeated at delivery on the address actually connected to (see http.post)."""
    parts = _split(url)
    allowed_schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in allowed_schemes:
        raise UnsafeWebhookUrl("webhook URL must use https")
    if parts.username is not None or parts.password is not None:
        raise UnsafeWebhookUrl("webhook URL must not contain credentials (user:pass@)")
    host = parts.hostname
    if not host:
        raise UnsafeWebhookUrl("webhook URL must include a host")
    if allow_private:
        return
    try:
        addresses = resolve_addresses(host, _port(parts))
    except (OSError, UnicodeError):
        raise UnsafeWebhookUrl(f"webhook host {host!r} could not be resolved") from None
    if not addresses:
        raise UnsafeWebhookUrl(f"webhook host {host!r} could not be resolved")
    if not all(is_public_address(address) for address in addresses):
        raise UnsafeWebhookUrl(
            f"webhook host {host!r} resolves to a private, loopback or reserved address"
        )


def _split(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
    except (ValueError, AttributeError):
        raise UnsafeWebhookUrl("webhook URL is not a valid URL") from None
    try:
        port = parts.port  # raises ValueError when not digits or above 65535
    except ValueError:
        port = 0
    if port == 0 or parts.netloc.endswith(":"):
        raise UnsafeWebhookUrl("webhook URL port must be a number from 1 to 65535")
    return parts


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)
