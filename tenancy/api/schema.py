"""OpenAPI (drf-spectacular) additions shared by every API view.

`TickworkAutoSchema` is the project's DEFAULT_SCHEMA_CLASS: it documents the bearer
scheme, the `X-Tenant-ID` header on tenant views, the `Idempotency-Key` header on every POST
(tenancy.api.idempotency; required on the methods a view lists in `idempotency_key_required`)
with its `Idempotent-Replayed` answer header and its 409/422 problems, and every RFC 9457
problem an operation can answer (`application/problem+json`), plus any
`extra_problem_statuses` a view declares; and on every operation the read-routing headers
(dbtools.bookmarks): `Tickwork-Bookmark` and `Tickwork-Consistency` asked, `Tickwork-Bookmark`
answered to authenticated callers (never on a public route).
"""

from typing import Any, Literal

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_override
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from dbtools.bookmarks import route_is_public
from tenancy.api.permissions import IsTenantMember
from web.problems import PROBLEM_CONTENT_TYPE
from web.query import query_filters

COMMON_PROBLEM_STATUSES = (400, 401, 403, 404, 405, 406, 413, 415, 429, 500, 503)

_PROBLEM_DESCRIPTIONS = {
    400: "Malformed request, invalid fields or X-Tenant-ID (see `errors`).",
    401: (
        "Missing, invalid, expired or revoked bearer token; a genuine token past its end "
        "has the type `token-expired` (sign in again)."
    ),
    403: "Not a member of the selected tenant, or the role may not do this.",
    404: "No such resource in the selected tenant.",
    405: "Method not allowed on this resource.",
    406: "The Accept header excludes JSON.",
    409: (
        "Conflict with the resource's current state; or this Idempotency-Key's request "
        "already succeeded and its answer held a secret shown once: the detail names the "
        "resource, the answer is not replayed."
    ),
    413: "Request body larger than MAX_REQUEST_BYTES.",
    415: "Request body is not application/json.",
    422: "The Idempotency-Key was already used with a different request.",
    429: "Throttled; retry after the number of seconds in Retry-After.",
    500: "Unexpected server error (no internals are disclosed).",
    503: "A service this request depends on cannot answer now; retry after Retry-After.",
}

_PROBLEM_HEADERS = {
    401: ("WWW-Authenticate", "Always `Bearer`."),
    405: ("Allow", "The methods this resource allows."),
    429: ("Retry-After", "Seconds to wait before retrying."),
    503: ("Retry-After", "Seconds to wait before retrying."),
}

TENANT_HEADER = OpenApiParameter(
    "X-Tenant-ID",
    OpenApiTypes.UUID,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "The tenant to act in. Optional when you belong to exactly one tenant; "
        "malformed → 400, not a member → 403."
    ),
)


def location_header(description: str, *, status: int = 201) -> OpenApiParameter:
    """The `Location` answer header of a create, documented on its `status`."""
    return OpenApiParameter(
        "Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[status],
        description=description,
    )  # fmt: skip


_REPLAYED_HEADER = {
    "schema": {"type": "string", "enum": ["true"]},
    "description": "Present (`true`) when this answer replays a stored outcome byte for byte.",
}
_IDEMPOTENT_PROBLEMS = (409, 422)

_LSN_SCHEMA = {"type": "string", "pattern": "^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"}
BOOKMARK_PARAMETER = OpenApiParameter(
    "Tickwork-Bookmark",
    _LSN_SCHEMA,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "The `Tickwork-Bookmark` of an earlier answer: this request reads data at least as "
        "fresh as that answer's (a read replica that has caught up with it, else the primary). "
        "Pass the bookmark of your last write to read your own writes; without one a read may "
        "be served by a replica a few moments behind. Malformed → 400."
    ),
)
CONSISTENCY_PARAMETER = OpenApiParameter(
    "Tickwork-Consistency",
    {"type": "string", "enum": ["primary"]},
    OpenApiParameter.HEADER,
    required=False,
    description="`primary`: read from the primary database, never a replica. Other values → 400.",
)
_BOOKMARK_HEADER = {
    "schema": _LSN_SCHEMA,
    # Absent when the caller was not authenticated (a 401, an anonymous 429).
    "required": False,
    "description": (
        "To an authenticated caller: a position in the database's log: after a write, where "
        "the write committed; after a read, a position the data read was at least as fresh "
        "as (`0/0` on SQLite). Send it back as `Tickwork-Bookmark` to read at least that "
        "fresh. Public routes never send one."
    ),
}


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details."""

    schema_description = "RFC 9457 problem details."

    type = serializers.URLField(help_text="Stable URI naming the problem kind.")
    title = serializers.CharField()
    status = serializers.IntegerField(help_text="Equal to the HTTP status.")
    detail = serializers.CharField()
    # The metaclass takes declared fields off the class, so this does not shadow
    # Serializer.errors as the stubs read it.
    errors = serializers.DictField(  # type: ignore[assignment]
        child=serializers.JSONField(), required=False, help_text="Field name → messages."
    )

    class Meta:
        ref_name = "Problem"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "tenancy.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (`tkw_…`, from `POST /v1/tokens`, `manage.py "
            "create_tenant` or `create_token`; the secret is shown once), a session token "
            "(`tkw_…` too, from signin, signup verify or an anonymous invitation accept; it "
            "ends at its `expires_at`) or, when an identity "
            "provider is configured, a JWT it issued (RS256 or ES256, with `exp`, `iss`, "
            "`aud`). A JWT grants no membership by itself.",
        }


_IDEMPOTENCY_KEY = '^(?:[\\x20-\\x2B\\x2D-\\x7E]+|"[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]*")$'


def idempotency_key_parameter(*, required: bool) -> OpenApiParameter:
    """The Idempotency-Key request header, with the expiry configured right now."""
    hours = settings.IDEMPOTENCY_KEY_TTL_SECONDS / 3600
    return OpenApiParameter(
        "Idempotency-Key",
        # Up to 255 characters, plus the quotes of the structured-field form; a comma only
        # inside them (web.headers: a bare comma is a repeated header).
        {"type": "string", "minLength": 1, "maxLength": 257, "pattern": _IDEMPOTENCY_KEY},
        OpenApiParameter.HEADER,
        required=required,
        description=(
            f"{'Required' if required else 'Optional'}: 1-255 printable ASCII characters, "
            'bare (`abc`) or as a structured-field string (`"abc"`); sent once, and a comma '
            "only inside the quotes (a repeated header arrives joined with commas: 400). "
            "Scoped to the tenant. A "
            "retry with the same key and request replays the first answer byte for byte "
            "(`Idempotent-Replayed: true`) and changes nothing; an answer that held a secret "
            "is not replayed (409 naming the resource); the same key with another request "
            "is a 422. A request refused with a 4xx stores nothing. Keys expire after "
            f"{hours:g} hours ({settings.IDEMPOTENCY_KEY_TTL_SECONDS} seconds), then the key "
            "may be reused."
        ),
    )


class TickworkAutoSchema(AutoSchema):
    def get_override_parameters(self) -> list[Any]:
        parameters = list(super().get_override_parameters())
        parameters += [BOOKMARK_PARAMETER, CONSISTENCY_PARAMETER]
        if any(isinstance(p, IsTenantMember) for p in self.view.get_permissions()):
            parameters.append(TENANT_HEADER)
        if self.method == "GET" and self._is_list_view():
            parameters += query_filters(self.view)
        if self.method == "POST":
            required = self.method in getattr(self.view, "idempotency_key_required", ())
            parameters.append(idempotency_key_parameter(required=required))
        return parameters

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        """A component's description is its serializer's `schema_description` (or an
        extend_schema_serializer override), never its docstring: a docstring is written
        for the code's readers and names internals a client has no use for."""
        schema = super()._map_basic_serializer(serializer, direction)
        public = get_override(serializer, "description", None) or getattr(
            type(serializer), "schema_description", None
        )
        if public:
            schema["description"] = public
        else:
            schema.pop("description", None)
        return schema

    def _get_response_bodies(
        self, direction: Literal["request", "response"] = "response"
    ) -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        extra = getattr(self.view, "extra_problem_statuses", {}).get(self.method, ())
        if self.method == "POST":
            for status, response in responses.items():
                if status.startswith("2"):
                    response.setdefault("headers", {})["Idempotent-Replayed"] = _REPLAYED_HEADER
            extra = (*extra, *_IDEMPOTENT_PROBLEMS)
        for status in (*COMMON_PROBLEM_STATUSES, *extra):
            responses.setdefault(str(status), self._problem_response(status, direction))
        if not route_is_public(self.view):
            for response in responses.values():
                response.setdefault("headers", {})["Tickwork-Bookmark"] = _BOOKMARK_HEADER
        return responses

    def _problem_response(self, status: int, direction: str) -> dict[str, Any]:
        response = self._get_response_for_code(
            ProblemSerializer, str(status), [PROBLEM_CONTENT_TYPE], direction
        )
        response["description"] = _PROBLEM_DESCRIPTIONS.get(status, "Problem details.")
        if status in _PROBLEM_HEADERS:
            name, description = _PROBLEM_HEADERS[status]
            response.setdefault("headers", {})[name] = {
                "schema": {"type": "string"},
                "description": description,
            }
        return response
