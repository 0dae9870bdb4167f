"""The portal session's bearer in the OpenAPI document (registered at start-up by
webhooks.apps: importing drf-spectacular's schema machinery while DRF loads its
authentication classes would be circular)."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema


class PortalTokenScheme(OpenApiAuthenticationExtension):
    """The portal session's bearer, declared on the operations open to it only."""

    target_class = "webhooks.portal.access.PortalTokenAuthentication"
    name = "portalSession"

    def get_security_requirement(
        self, auto_schema: AutoSchema
    ) -> dict[str, list[Any]] | list[dict[str, list[Any]]]:
        opened = getattr(auto_schema.view, "portal_capabilities", {})
        # No requirement at all (an empty list) on the operations closed to it.
        return {self.name: []} if auto_schema.method in opened else []

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A portal session's token (`tkp_…`, from `POST /v1/applications/"
            "{id}/portal-sessions`; shown once): its application's endpoints and messages "
            "only, with the session's capabilities.",
        }
