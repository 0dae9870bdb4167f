"""The connections outbound exchanges run on: kept alive per origin and vetted address for
as long as their owner (one tick) lives, nothing taken from the environment, TLS bound to
the hostname of a URL pinned to a vetted address, and every connection watched by the
deadline of the exchange using it.

An origin is (scheme, host, port, address connected to, CA bundle) and has a pool of its
own: a connection made to one vetted address of one host is never used for another host or
another address, so address pinning and the SSRF guard hold for every request on a reused
connection. A connection the receiver closed (idle timeout, `Connection: close`) is noticed
when it is taken and replaced by a new one.
"""

import os
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import certifi
from requests import PreparedRequest
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool

from .deadline import WatchedHTTPPool, WatchedHTTPSPool


class Origin(NamedTuple):
    """Where a pool's connections go. `address` is the vetted IP connected to, or None when
    the host is resolved at connect time (vetting off)."""

    scheme: str
    host: str
    port: int
    address: str | None
    ca_bundle: str | None


class OriginAdapter(HTTPAdapter):
    """requests' transport adapter over the one pool of an origin: every request it sends
    goes to that origin's address, whatever its URL says, with the origin's TLS trust."""

    def __init__(self, origin: Origin, *, keep: int) -> None:
        super().__init__(max_retries=0)
        self.origin = origin
        self.pool = _new_pool(origin, keep=keep)

    def get_connection_with_tls_context(
        self, request: PreparedRequest, verify: Any, proxies: Any = None, cert: Any = None
    ) -> HTTPConnectionPool:
        return self.pool

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        pass  # the pool's trust was fixed from the origin when it was made

    def close(self) -> None:
        self.pool.close()  # a connection in use is closed when it comes back
        super().close()


class Connections:
    """Thread-safe connection pools: at most `per_origin` idle connections kept per origin
    and at most `origins` origins (the least recently used one is closed beyond that).
    Close it when its owner ends; once closed it has no adapter to hand out."""

    def __init__(self, *, per_origin: int = 4, origins: int = 64) -> None:
        self._per_origin, self._origins = per_origin, origins
        self._adapters: OrderedDict[Origin, OriginAdapter] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False

    def adapter(self, origin: Origin) -> OriginAdapter | None:
        """The adapter of `origin`, made on first use; None once closed."""
        evicted = None
        with self._lock:
            if self._closed:
                return None
            adapter = self._adapters.get(origin)
            if adapter is not None:
                self._adapters.move_to_end(origin)
                return adapter
            adapter = OriginAdapter(origin, keep=self._per_origin)
            self._adapters[origin] = adapter
            if len(self._adapters) > self._origins:
                evicted = self._adapters.popitem(last=False)[1]
        if evicted is not None:
            evicted.close()
        return adapter

    def close(self) -> None:
        with self._lock:
            self._closed = True
            adapters, self._adapters = list(self._adapters.values()), OrderedDict()
        for adapter in adapters:
            adapter.close()

    def __enter__(self) -> "Connections":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _new_pool(origin: Origin, *, keep: int) -> HTTPConnectionPool:
    # block=False: a pool never makes an exchange wait; beyond `keep` connections in use,
    # the extra ones are closed when they come back.
    common: dict[str, Any] = {"port": origin.port, "maxsize": keep, "block": False}
    connect_to = origin.address or origin.host
    if origin.scheme == "http":
        return WatchedHTTPPool(connect_to, **common)
    bundle = origin.ca_bundle or certifi.where()
    trust: dict[str, Any] = (
        {"ca_cert_dir": bundle} if os.path.isdir(bundle) else {"ca_certs": bundle}
    )
    if origin.address:
        # Pinned to a vetted IP: the hostname still goes out as SNI and the certificate is
        # checked against it.
        trust |= {"server_hostname": origin.host, "assert_hostname": origin.host}
    return WatchedHTTPSPool(connect_to, cert_reqs="CERT_REQUIRED", **trust, **common)
