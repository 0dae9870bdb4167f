"""Every problem type the API answers, with its one title (RFC 9457 §3.1.3: the title of a
type does not change from one occurrence to the next).

A problem's title is looked up here by its type when the document is built
(`web.problems.problem_body`), never written where the error is raised: a type cannot have
two titles. A new `kind` gets its line here; tests/web/test_problem_types.py fails on a kind
of the code this table does not hold, and on a type docs/api.md does not list.
"""

TITLES: dict[str, str] = {
    # What the HTTP status alone names (web.problems: DRF's and Django's errors).
    "bad-request": "Bad request",
    "unauthorized": "Authentication required",
    "forbidden": "Forbidden",
    "not-found": "Not found",
    "method-not-allowed": "Method not allowed",
    "not-acceptable": "Not acceptable",
    "conflict": "Conflict with the current state",
    "request-too-large": "Request body too large",
    "unsupported-media-type": "Unsupported media type",
    "unprocessable": "Unprocessable request",
    "throttled": "Too many requests",
    "internal-error": "Internal server error",
    "unavailable": "Service unavailable",
    # The families of web.errors.
    "domain-error": "Request refused",
    "validation-error": "Invalid request fields",
    "exhausted": "Allowance used up",
    # Requests and their headers.
    "idempotency-key": "Missing or invalid Idempotency-Key",
    "idempotency-key-reused": "Idempotency-Key reused with another request",
    "idempotency-key-secret-not-replayed": "Created already; its secret is not shown again",
    "repeated-header": "Header sent more than once",
    "bad-routing-header": "Invalid consistency header",
    # Identities, tenants and plans.
    "token-expired": "Token expired",
    "token-not-revocable": "Token not revocable here",
    "invalid-token": "Invalid or expired token",
    "identity-provider-unavailable": "Identity provider unavailable",
    "tenant-selection": "No tenant selected",
    "already-member": "Already a member",
    "invitation-accepted": "Invitation already accepted",
    "last-owner": "Last owner of the tenant",
    "quota-exceeded": "Plan quota used up",
    "plan-limit": "Plan limit reached",
    "captcha-failed": "CAPTCHA check failed",
    "captcha-unavailable": "CAPTCHA check unavailable",
    # Jobs, notifications and their schedules.
    "job-not-retryable": "Job not retryable",
    "rrule-too-costly": "Recurrence rule too costly",
    "notification-claimed": "Notification being delivered",
    "notification-not-retryable": "Notification not retryable",
    "notification-completed": "Notification finished",
    "schedule-finished": "Schedule finished",
    # Webhooks: endpoints, event types, messages, applications, the portal.
    "webhook-endpoint-deleted": "Webhook endpoint deleted",
    "webhook-endpoint-disabled": "Webhook endpoint disabled",
    "message-delivery": "A message's delivery",
    "payload-too-large": "Payload too large",
    "product-event-type-reserved": "Reserved for the product's own events",
    "event-type-exists": "Event type exists",
    "product-event-type": "Product event type",
    "application-exists": "Application exists",
    "application-deleted": "Application deleted",
    "portal-scope": "Outside the portal's scope",
    "capability-required": "Capability required",
}

# The title of a type this table does not hold (a test keeps the code's kinds in it).
UNLISTED_TITLE = "Error"


def problem_title(kind: str) -> str:
    """The one title of the problem type `kind`."""
    return TITLES.get(kind, UNLISTED_TITLE)
