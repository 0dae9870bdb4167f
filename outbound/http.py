"""THE one module that makes outbound HTTP calls; every channel goes through `post`, and
the identity provider's discovery document and keys are read with `get`.

Guarantees: an explicit timeout that bounds the whole exchange (not just each socket read),
no redirects, a capped response body, no proxies or credentials picked up from the
environment, and, when asked, SSRF vetting of the address actually connected to. The
watchdog behind the timeout lives in `outbound.deadline`, the connections every exchange
runs on (kept alive per host and vetted address by their owner) in `outbound.connections`.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPException
from urllib.parse import SplitResult, urlsplit

import requests
import urllib3

# certifi's where(), which requests.certs re-exports; types-requests omits it.
from requests.certs import where as default_ca_bundle  # type: ignore[attr-defined]
from requests.structures import CaseInsensitiveDict

from .categories import ErrorCategory
from .connections import Connections, Origin, OriginAdapter
from .deadline import Deadline, active_deadline
from .ssrf import is_public_address, resolve_addresses

USER_AGENT = "Tickwork/1.0"
_CHUNK_BYTES = 1024


@dataclass(frozen=True)
class HttpResponse:
    """A received response; `headers` is case-insensitive and `body` holds at most the
    `max_body` first bytes (the rest was never read)."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class HttpError(Exception):
    """No HTTP response was obtained. `category` is one of timeout, connection, ssrf_blocked,
    invalid_request; str(exc) is safe to store (scheme and host only, no query, no headers)."""

    def __init__(self, message: str, *, category: ErrorCategory) -> None:
        super().__init__(message)
        self.category = category


@dataclass(frozen=True)
class _Target:
    parts: SplitResult
    host: str  # as in the URL, brackets stripped from an IPv6 literal
    port: int

    @property
    def origin(self) -> str:
        """scheme://host[:port]: the only part of a URL that may appear in messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        explicit_port = f":{self.parts.port}" if self.parts.port else ""
        return f"{self.parts.scheme}://{host}{explicit_port}"

    def pinned_to(self, address: str) -> str:
        """The same URL with the host replaced by a vetted IP address."""
        host = f"[{address}]" if ":" in address else address
        return self.parts._replace(netloc=f"{host}:{self.port}").geturl()


def post(
    url: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    timeout: float,
    vet_addresses: bool,
    max_body: int = 4096,
    ca_bundle: str | None = None,
    connections: Connections | None = None,
) -> HttpResponse:
    """POST `body` to `url` and return the response (any status, 3xx included: redirects are
    never followed). `timeout` bounds connecting and the whole exchange. With
    `vet_addresses`, the host is resolved once, every address must pass
    ssrf.is_public_address, and the connection goes to the vetted address while the Host
    header, TLS SNI and certificate check stay bound to the hostname. `ca_bundle` replaces
    the default trusted CAs (private CAs, tests). With `connections`, the connection is
    kept alive there for the next exchange with the same host and vetted address; without,
    it is closed after this one. Raises HttpError."""
    exchange = _Exchange(method="POST", body=body, max_body=max_body, ca_bundle=ca_bundle)
    return exchange.run(url, headers, timeout, vet_addresses, connections)


def get(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    vet_addresses: bool,
    max_body: int = 4096,
    ca_bundle: str | None = None,
    connections: Connections | None = None,
) -> HttpResponse:
    """GET `url`, with `post`'s guarantees and arguments. Raises HttpError."""
    exchange = _Exchange(method="GET", body=None, max_body=max_body, ca_bundle=ca_bundle)
    return exchange.run(url, headers, timeout, vet_addresses, connections)


@dataclass(frozen=True)
class _Exchange:
    method: str
    body: bytes | None
    max_body: int
    ca_bundle: str | None

    def run(
        self,
        url: str,
        headers: Mapping[str, str],
        timeout: float,
        vet_addresses: bool,
        connections: Connections | None,
    ) -> HttpResponse:
        target = _parse(url)
        address = _vetted_address(target) if vet_addresses else None
        origin = Origin(target.parts.scheme, target.host, target.port, address, self.ca_bundle)
        request = self._prepared(url, target, headers, address)
        adapter = connections.adapter(origin) if connections is not None else None
        if adapter is not None:
            return self._bounded(request, adapter, target, timeout)
        own = OriginAdapter(origin, keep=1)  # this exchange's alone: closed after it
        try:
            return self._bounded(request, own, target, timeout)
        finally:
            own.close()

    def _prepared(
        self, url: str, target: _Target, headers: Mapping[str, str], address: str | None
    ) -> requests.PreparedRequest:
        request_url, request_headers = _prepare(url, target, headers, address)
        request = requests.PreparedRequest()
        request.prepare_method(self.method)
        request.prepare_url(request_url, None)
        request.prepare_headers(request_headers)
        request.prepare_body(self.body, None)
        return request

    def _bounded(
        self,
        request: requests.PreparedRequest,
        adapter: OriginAdapter,
        target: _Target,
        timeout: float,
    ) -> HttpResponse:
        """The request sent under one deadline. A kept-alive connection that the receiver
        closed before answering is dropped and the request sent again, within the same
        deadline (what browsers do; the webhook-id lets a receiver drop a repeat). The pool
        may hold several such connections (a receiver closes every idle one): each failure
        on a reused connection discards it, so the attempts end with a new connection,
        whose failure is the answer, or with the deadline."""
        deadline = Deadline(timeout)
        token = active_deadline.set(deadline)
        try:
            while True:
                try:
                    return self._send(request, adapter, timeout, deadline)
                except requests.ConnectionError as exc:
                    stale = deadline.reused and not isinstance(exc, requests.Timeout)
                    if not stale or deadline.expired:
                        raise
                deadline.reused = False
        except _FAILURES as exc:
            raise _classify(exc, target=target, timeout=timeout, deadline=deadline) from None
        finally:
            deadline.cancel()
            active_deadline.reset(token)

    def _send(
        self,
        request: requests.PreparedRequest,
        adapter: OriginAdapter,
        timeout: float,
        deadline: Deadline,
    ) -> HttpResponse:
        response = adapter.send(
            request,
            stream=True,
            timeout=(timeout, timeout),
            verify=self.ca_bundle or default_ca_bundle(),
            proxies={},
        )
        received = _received(response, self.max_body, deadline)
        if deadline.expired:
            raise TimeoutError  # the watchdog cut the connection: the body may be truncated
        return HttpResponse(
            status=response.status_code,
            headers=CaseInsensitiveDict(response.headers),
            body=received,
        )


_FAILURES = (requests.RequestException, urllib3.exceptions.HTTPError, HTTPException, OSError)


def _received(response: requests.Response, max_body: int, deadline: Deadline) -> bytes:
    """The response's body (at most `max_body` bytes), its connection back in its pool:
    kept alive when the body was read to its end, closed otherwise (the rest unread, or
    cut by the deadline)."""
    try:
        return _read_capped(response, max_body)
    finally:
        if not response.raw.closed or deadline.expired:
            response.raw.close()
        response.raw.release_conn()


def _prepare(
    url: str, target: _Target, headers: Mapping[str, str], address: str | None
) -> tuple[str, CaseInsensitiveDict]:
    """The URL to request and its headers: defaults first, the caller's on top and, when
    pinned to a vetted address, the Host header the URL no longer carries."""
    request_headers = CaseInsensitiveDict({"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
    request_headers.update(headers)
    if address is None:
        return url, request_headers
    request_headers["Host"] = target.origin.split("://", 1)[1]
    return target.pinned_to(address), request_headers


def _read_capped(response: requests.Response, max_body: int) -> bytes:
    """Read at most `max_body` raw bytes; the connection is closed on the rest."""
    chunks: list[bytes] = []
    size = 0
    while size < max_body:
        chunk = response.raw.read(min(_CHUNK_BYTES, max_body - size), decode_content=False)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _parse(url: str) -> _Target:
    try:
        parts = urlsplit(url)
        explicit_port = parts.port
    except (ValueError, AttributeError):
        raise HttpError("invalid URL", category=ErrorCategory.INVALID_REQUEST) from None
    if parts.scheme not in ("http", "https"):
        raise HttpError(
            "invalid URL: only http and https are supported", category=ErrorCategory.INVALID_REQUEST
        )
    if not parts.hostname:
        raise HttpError("invalid URL: a host is required", category=ErrorCategory.INVALID_REQUEST)
    if parts.username is not None or parts.password is not None:
        raise HttpError(
            "invalid URL: credentials in URLs are not accepted",
            category=ErrorCategory.INVALID_REQUEST,
        )
    port = explicit_port or (443 if parts.scheme == "https" else 80)
    return _Target(parts=parts, host=parts.hostname, port=port)


def _vetted_address(target: _Target) -> str:
    """Resolve once and vet every address; the first one is the one connected to."""
    try:
        addresses = resolve_addresses(target.host, target.port)
    except (OSError, UnicodeError):
        addresses = []
    if not addresses:
        raise HttpError(f"could not resolve {target.origin}", category=ErrorCategory.CONNECTION)
    if not all(is_public_address(address) for address in addresses):
        raise HttpError(
            f"{target.origin} resolves to a private, loopback or reserved address",
            category=ErrorCategory.SSRF_BLOCKED,
        )
    return addresses[0]


def _classify(
    exc: BaseException, *, target: _Target, timeout: float, deadline: Deadline
) -> HttpError:
    # Library messages embed the full URL (query string included), so none is passed on.
    if deadline.expired or isinstance(
        exc, requests.Timeout | urllib3.exceptions.TimeoutError | TimeoutError
    ):
        message = f"timed out after {timeout:g}s contacting {target.origin}"
        return HttpError(message, category=ErrorCategory.TIMEOUT)
    if isinstance(exc, requests.exceptions.InvalidURL | requests.exceptions.InvalidSchema):
        return HttpError("invalid URL", category=ErrorCategory.INVALID_REQUEST)
    if isinstance(exc, requests.exceptions.SSLError | urllib3.exceptions.SSLError):
        return HttpError(
            f"TLS handshake or certificate verification failed for {target.origin}",
            category=ErrorCategory.CONNECTION,
        )
    return HttpError(f"connection to {target.origin} failed", category=ErrorCategory.CONNECTION)
