"""Portal sessions through the API (create, revoke) and the portal page itself."""

import uuid

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_safe
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import membership_of, tenant_of, user_of
from tenancy.api.schema import location_header
from tenancy.models import Role
from webhooks.models import PortalCapability
from webhooks.portal.access import portal_credential
from webhooks.portal.sessions import (
    ALL_CAPABILITIES,
    portal_session_create,
    portal_session_revoke,
)
from webhooks.serializers import (
    PortalCallerSerializer,
    PortalSessionSerializer,
    PortalSessionWriteSerializer,
)


class PortalSessionCreateView(APIView):
    """A link for one application's customer to manage its endpoints in the portal page;
    its token is shown this once."""

    owner_methods = ("*",)

    @extend_schema(
        operation_id="portal_sessions_create",
        request=PortalSessionWriteSerializer,
        parameters=[location_header("Path of the session, `/v1/portal-sessions/{id}`.")],
        responses={201: PortalSessionSerializer},
    )
    def post(self, request: Request, pk: str) -> HttpResponse:
        serializer = PortalSessionWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Answer:
            session = portal_session_create(
                tenant=tenant_of(request),
                application=pk,
                created_by=user_of(request),
                now=timezone.now(),
                **serializer.validated_data,
            )
            data = PortalSessionSerializer(session).data
            return Answer.of(
                status.HTTP_201_CREATED,
                data,
                resource=f"/v1/portal-sessions/{session.id}",
                location=True,
                shows_secret=True,
            )

        return answer_once(request, create, body=serializer.validated_data)


class PortalSessionDetailView(APIView):
    owner_methods = ("*",)

    @extend_schema(
        operation_id="portal_sessions_revoke",
        description="Revokes the session: its token's next request is a 401.",
        responses={204: None},
    )
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        portal_session_revoke(tenant=tenant_of(request), session_id=pk, now=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class PortalCallerView(APIView):
    """What the caller may do in the portal page: a portal session's application and
    capabilities, or, for a member's token, the whole tenant (every capability for an
    owner, `view` for a member)."""

    portal_capabilities = {"GET": PortalCapability.VIEW}

    @extend_schema(operation_id="portal_sessions_current", responses={200: PortalCallerSerializer})
    def get(self, request: Request) -> Response:
        credential = portal_credential(request)
        if credential is not None:
            caller = {
                "application_id": credential.application_id,
                "capabilities": sorted(credential.capabilities, key=ALL_CAPABILITIES.index),
            }
        else:
            owner = membership_of(request).role == Role.OWNER
            caller = {
                "application_id": None,
                "capabilities": list(ALL_CAPABILITIES) if owner else [PortalCapability.VIEW],
            }
        return Response(PortalCallerSerializer(caller).data)


# The page loads its own script and style and talks to this origin's API only.
_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'self'"
)


@require_safe
@xframe_options_exempt
def portal_page(request: HttpRequest) -> HttpResponse:
    """The portal page (static: the session's token arrives in the URL's fragment, which no
    server sees). Embeddable by PORTAL_FRAME_ANCESTORS only."""
    response = render(request, "portal/index.html")
    response["Content-Security-Policy"] = (
        f"{_PAGE_POLICY}; frame-ancestors {settings.PORTAL_FRAME_ANCESTORS}"
    )
    response["Referrer-Policy"] = "no-referrer"
    response["Cache-Control"] = "no-store"
    return response
