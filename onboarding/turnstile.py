"""Cloudflare Turnstile, checked server-side through siteverify (README: API overview).

The contract, from Cloudflare's "Validate the token" page
(developers.cloudflare.com/turnstile/get-started/server-side-validation/): POST
application/x-www-form-urlencoded (or JSON) fields `secret`, `response` (the widget's
token, at most 2048 characters, valid 300 s, single use), optional `remoteip` and
`idempotency_key` (a UUID: a retry of the same validation with the same key gets the same
outcome instead of `timeout-or-duplicate`). The JSON answer has `success`, `error-codes`
(missing-input-secret, invalid-input-secret, missing-input-response,
invalid-input-response, bad-request, timeout-or-duplicate, internal-error), and on success
`challenge_ts`, `hostname`, `action` and `cdata`. The docs' test secret keys
(developers.cloudflare.com/turnstile/troubleshooting/testing/):
`1x0000000000000000000000000000000AA` always passes, `2x0000000000000000000000000000000AA`
always fails, `3x0000000000000000000000000000000AA` answers a "token already spent" error
(`timeout-or-duplicate`).

Only `success: true` from a host we serve (ALLOWED_HOSTS or TURNSTILE_HOSTNAMES) for the
request's action (`signup` or `signin`, when the widget names one) lets it through. No
answer, a 5xx or `internal-error` is not a verdict: the request is refused with 503 and
Retry-After, never let through. A misconfigured secret is the operator's problem, logged
and answered 503. Neither the secret nor the token is ever logged.
"""

import json
import logging
import uuid
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.http.request import validate_host

from outbound.http import HttpError, post
from web.errors import DomainError, Unavailable

logger = logging.getLogger(__name__)

TOKEN_MAX_LENGTH = 2048
SIGNUP_ACTION = "signup"
SIGNIN_ACTION = "signin"
TIMEOUT_SECONDS = 5.0
RETRY_AFTER_SECONDS = 30
# Siteverify failing, or refusing our own configuration: no verdict on the visitor.
_NO_VERDICT_CODES = frozenset({"internal-error", "missing-input-secret", "invalid-input-secret"})


class CaptchaFailed(DomainError):
    kind = "captcha-failed"

    def __init__(self) -> None:
        super().__init__("The CAPTCHA check failed: solve the challenge again.")


class CaptchaUnavailable(Unavailable):
    kind = "captcha-unavailable"

    def __init__(self) -> None:
        super().__init__(
            "The CAPTCHA check cannot be made right now; retry later.",
            retry_after=RETRY_AFTER_SECONDS,
        )


def captcha_verify(token: str, *, remote_ip: str | None, action: str = SIGNUP_ACTION) -> None:
    """Pass, or raise CaptchaFailed (a verdict against the visitor) or CaptchaUnavailable
    (no verdict). Without TURNSTILE_SECRET_KEY (DEBUG only: settings refuse it otherwise)
    there is nothing to check. One transport failure or 5xx is retried with the same
    idempotency key, which siteverify answers like the first attempt. A widget that names
    its action must name `action` (a signup's token does not sign anyone in)."""
    if not settings.TURNSTILE_SECRET_KEY:
        return
    form = {
        "secret": settings.TURNSTILE_SECRET_KEY,
        "response": token,
        "idempotency_key": str(uuid.uuid4()),
    }
    if remote_ip:
        form["remoteip"] = remote_ip
    outcome = _siteverify(urlencode(form).encode()) or _siteverify(urlencode(form).encode())
    if outcome is None:
        raise CaptchaUnavailable
    _judge(outcome, action)


def _siteverify(body: bytes) -> dict[str, Any] | None:
    """Siteverify's JSON answer, or None when there is none to judge by."""
    try:
        response = post(
            settings.TURNSTILE_VERIFY_URL,
            body=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=TIMEOUT_SECONDS,
            vet_addresses=False,  # the operator's setting (a local stand-in in development)
        )
    except HttpError as exc:
        logger.warning("turnstile siteverify unreachable: %s", exc)
        return None
    if response.status != 200:
        logger.warning("turnstile siteverify answered HTTP %s", response.status)
        return None
    try:
        outcome = json.loads(response.body)
    except ValueError:
        outcome = None
    if not isinstance(outcome, dict):
        logger.warning("turnstile siteverify answered something other than a JSON object")
        return None
    return outcome


def _judge(outcome: dict[str, Any], expected_action: str) -> None:
    codes = outcome.get("error-codes")
    codes = [str(code) for code in codes] if isinstance(codes, list) else []
    if outcome.get("success") is not True:
        if _NO_VERDICT_CODES.intersection(codes):
            logger.error("turnstile siteverify gave no verdict: error-codes=%s", ",".join(codes))
            raise CaptchaUnavailable
        logger.info("turnstile check failed: error-codes=%s", ",".join(codes))
        raise CaptchaFailed
    hostname = outcome.get("hostname")
    allowed = [*settings.ALLOWED_HOSTS, *settings.TURNSTILE_HOSTNAMES]
    if not isinstance(hostname, str) or not validate_host(hostname, allowed):
        logger.info("turnstile check failed: the challenge was solved on another host")
        raise CaptchaFailed
    action = outcome.get("action")
    if action not in (None, "", expected_action):
        logger.info("turnstile check failed: the token is for another action")
        raise CaptchaFailed
