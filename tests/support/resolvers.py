"""A stand-in for the resolver: host names answered from a table, no DNS."""

import contextlib
import ipaddress
import socket


def fake_resolver(table: dict[str, list[str]]):
    """A getaddrinfo that answers from `table` (and IP literals as themselves, like the real
    one) and fails for any other name."""

    def getaddrinfo(host, port, *args, **kwargs):
        with contextlib.suppress(ValueError):
            return [_address_info(str(ipaddress.ip_address(host)), port)]
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [_address_info(ip, port) for ip in table[host]]

    return getaddrinfo


def _address_info(ip, port):
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    sockaddr = (ip, port, 0, 0) if ":" in ip else (ip, port)
    return (family, socket.SOCK_STREAM, 6, "", sockaddr)
