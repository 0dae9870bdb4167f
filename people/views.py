"""The recipients API, their preferences, and the public one-click unsubscribe: thin views
over people.recipients and people.unsubscribe. Every query is scoped to
`tenant_of(request)`; another tenant's recipient answers 404 like a missing one."""

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.validation import KEY_RULE
from people import recipients
from people.models import Recipient
from people.serializers import PreferencesSerializer, RecipientSerializer, RecipientWriteSerializer
from people.unsubscribe import recipient_unsubscribe
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import tenant_of
from tenancy.api.schema import location_header
from tenancy.models import token_digest
from web.pagination import NewestFirstCursorPagination
from web.query import single_query_param

_ID = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, description=f"The tenant's own key: {KEY_RULE}."
)


def _recipient(request: Request, key: str) -> Recipient:
    return recipients.recipient_get(tenant=tenant_of(request), key=key)


class RecipientListView(ListAPIView):
    pagination_class = NewestFirstCursorPagination
    serializer_class = RecipientSerializer
    query_filters = (OpenApiParameter("email", str, required=False),)

    @extend_schema(operation_id="recipients_list", responses={200: RecipientSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[Recipient]:
        email = single_query_param(self.request, "email")
        return recipients.recipient_pages(tenant=tenant_of(self.request), email=email)


@extend_schema(parameters=[_ID])
class RecipientDetailView(APIView):
    owner_methods = ("DELETE",)

    @extend_schema(responses={200: RecipientSerializer})
    def get(self, request: Request, id: str) -> Response:
        return Response(RecipientSerializer(_recipient(request, id)).data)

    @extend_schema(
        operation_id="recipients_put",
        request=RecipientWriteSerializer,
        parameters=[location_header("Path of the new recipient, `/v1/recipients/{id}`.")],
        responses={200: RecipientSerializer, 201: RecipientSerializer},
        description="Creates the recipient (201) or replaces its profile (200); its "
        "preferences are kept.",
    )
    def put(self, request: Request, id: str) -> Response:
        serializer = RecipientWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        recipient, created = recipients.recipient_put(
            tenant=tenant_of(request), key=id, now=timezone.now(), **serializer.validated_data
        )
        data = RecipientSerializer(recipient).data
        if created:
            headers = {"Location": f"/v1/recipients/{recipient.key}"}
            return Response(data, status=status.HTTP_201_CREATED, headers=headers)
        return Response(data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, id: str) -> Response:
        recipients.recipient_delete(tenant=tenant_of(request), key=id)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[_ID])
class RecipientPreferencesView(APIView):
    @extend_schema(responses={200: PreferencesSerializer})
    def get(self, request: Request, id: str) -> Response:
        return Response(_preferences(_recipient(request, id)))

    @extend_schema(
        operation_id="recipients_preferences_put",
        request=PreferencesSerializer,
        responses={200: PreferencesSerializer},
    )
    def put(self, request: Request, id: str) -> Response:
        serializer = PreferencesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        recipient = recipients.preferences_put(
            tenant=tenant_of(request), key=id, preferences=serializer.stored(), now=timezone.now()
        )
        return Response(_preferences(recipient))


def _preferences(recipient: Recipient) -> dict[str, Any]:
    stored = recipient.preferences or {}
    return {"channels": stored.get("channels", {}), "categories": stored.get("categories", {})}


class UnsubscribeView(APIView):
    """Public: the token is the credential (a wrong Authorization header is still 401)."""

    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="unsubscribe",
        request=None,
        parameters=[
            OpenApiParameter(
                "id", str, OpenApiParameter.PATH, description="The token of the email's link."
            )
        ],
        responses={204: OpenApiResponse(description="Unsubscribed (again: still 204).")},
        description="RFC 8058 one-click unsubscribe, with the token of an email's "
        "`List-Unsubscribe` link: mutes the email's category (all email when it had none) "
        "for its recipient, from the next tick on. A token this server did not sign: 400 "
        "`invalid-token`.",
    )
    def post(self, request: Request, id: str) -> HttpResponse:
        # Mail clients post `List-Unsubscribe=One-Click` as a form: the body is not read.

        def mute() -> Answer:
            recipient_unsubscribe(token=id, now=timezone.now())
            return Answer.of(status.HTTP_204_NO_CONTENT, None, resource="unsubscribe")

        # A key of this request is kept with the token's digest, never the token itself.
        return answer_once(request, mute, scope=f"unsubscribe:{token_digest(id)[:40]}")
