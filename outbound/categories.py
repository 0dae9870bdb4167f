"""Why an attempt failed: the one vocabulary of both queues.

A job's `last_error_category` and a delivery's `error_category` take these values (the
delivery log also records why an occurrence was deferred or dead-lettered: see
delivery.scheduler.plan). The HTTP client produces most of them; the queues add
what only a queue can see (a handler that crashed its worker, a kind nobody handles).

A plain enum, not Django's TextChoices: the tick's sending process classifies its webhooks
with it and starts without Django. A model or serializer field takes ERROR_CATEGORY_CHOICES.
"""

from enum import StrEnum


class ErrorCategory(StrEnum):
    label: str

    def __new__(cls, value: str, label: str) -> "ErrorCategory":
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member

    TIMEOUT = "timeout", "Timeout"
    CONNECTION = "connection", "Connection"
    HTTP_3XX = "http_3xx", "HTTP 3xx (redirects are not followed)"
    HTTP_4XX = "http_4xx", "HTTP 4xx"
    HTTP_5XX = "http_5xx", "HTTP 5xx"
    RATE_LIMITED = "rate_limited", "Rate limited (429, 503 with Retry-After)"
    SSRF_BLOCKED = "ssrf_blocked", "Blocked address (not public, or not https)"
    # A request that cannot succeed as written: a malformed URL, no recipients, a
    # provider's validation error. Jobs stored this as "invalid_url" before (migrated).
    INVALID_REQUEST = "invalid_request", "Invalid request (configuration)"
    ENDPOINT_DISABLED = "endpoint_disabled", "Endpoint disabled"
    UNKNOWN_KIND = "unknown_kind", "Unknown kind"
    CRASHED = "crashed", "Crashed (lease expired without an outcome)"
    INTERNAL = "internal", "Internal"


# (value, label) pairs, as Django's `choices` takes them.
ERROR_CATEGORY_CHOICES: list[tuple[str, str]] = [
    (category.value, category.label) for category in ErrorCategory
]
