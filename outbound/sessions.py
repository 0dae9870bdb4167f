"""The requests session each outbound exchange runs on: nothing taken from the
environment, TLS bound to the hostname of a URL pinned to a vetted address, and every
connection watched by the exchange's deadline."""

from typing import Any

import requests
from requests.adapters import HTTPAdapter

from .deadline import WatchedHTTPPool, WatchedHTTPSPool


class _Adapter(HTTPAdapter):
    """Registers every connection with the exchange's deadline and, for a URL pinned to a
    vetted IP, sends the original hostname as TLS SNI and checks the certificate against it."""

    def __init__(self, *, tls_hostname: str | None) -> None:
        self._tls_hostname = tls_hostname
        super().__init__(max_retries=0)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        if self._tls_hostname:
            pool_kwargs["server_hostname"] = self._tls_hostname
            pool_kwargs["assert_hostname"] = self._tls_hostname
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": WatchedHTTPPool,
            "https": WatchedHTTPSPool,
        }


def new_session(tls_hostname: str | None) -> requests.Session:
    """A session for one exchange; `tls_hostname` is the hostname of a pinned URL."""
    session = requests.Session()
    # No proxies, CA overrides or .netrc credentials from the environment: a proxy would
    # undo the address pinning and .netrc could hand credentials to a tenant's endpoint.
    session.trust_env = False
    session.headers.clear()
    adapter = _Adapter(tls_hostname=tls_hostname)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session
