"""The recipients API, their preferences, and the public one-click unsubscribe: thin views
over people.recipients and people.unsubscribe. Every query is scoped to
`tenant_of(request)`; another tenant's recipient answers 404 like a missing one."""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.template.loader import render_to_string
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
from people.unsubscribe import recipient_unsubscribe, verified, verify
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import tenant_of
from tenancy.api.schema import location_header
from tenancy.link_tokens import InvalidToken
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


_TOKEN = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, description="The token of the email's link."
)


class UnsubscribeView(APIView):
    """Public: the token is the credential (a wrong Authorization header is still 401).
    GET shows a page that confirms with a POST (a link scanner's GET changes nothing);
    POST is RFC 8058's one-click unsubscribe."""

    permission_classes = [AllowAny]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # A browser may accept HTML alone: the page is HTML whatever DRF negotiates, and a
        # problem falls back to JSON rather than a 406.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        operation_id="unsubscribe_page",
        parameters=[_TOKEN],
        responses={
            (200, "text/html"): OpenApiResponse(description="A page that confirms with a POST."),
        },
        description="The page an email's unsubscribe link opens: it names what the link "
        "turns off and confirms with a POST to the same URL. Changes nothing itself. A token "
        "this server did not make: 400 `invalid-token`, as a page to a client that accepts "
        "HTML.",
    )
    def get(self, request: Request, id: str) -> HttpResponse:
        found = verify(id, secret=settings.SECRET_KEY)
        if found is None:
            if not _wants_html(request):
                raise InvalidToken
            return _page("invalid", status=status.HTTP_400_BAD_REQUEST)
        return _page("confirm", category=found.category)

    @extend_schema(
        operation_id="unsubscribe",
        request=None,
        parameters=[_TOKEN],
        responses={
            204: OpenApiResponse(description="Unsubscribed (again: still 204)."),
            (200, "text/html"): OpenApiResponse(
                description="Unsubscribed, to a client that accepts HTML (the page's form)."
            ),
        },
        description="RFC 8058 one-click unsubscribe, with the token of an email's "
        "`List-Unsubscribe` link: mutes the email's category (all email when it had none) "
        "for its recipient, from the next tick on. A recipient deleted since (or deleted and "
        "created again under the same id: another person) is muted no more: still 204. A "
        "token this server did not make: 400 `invalid-token`.",
    )
    def post(self, request: Request, id: str) -> HttpResponse:
        # Mail clients post `List-Unsubscribe=One-Click` as a form: the body is not read.

        def mute() -> Answer:
            recipient_unsubscribe(token=id, now=timezone.now())
            return Answer.of(status.HTTP_204_NO_CONTENT, None, resource="unsubscribe")

        # A key of this request is kept with the token's digest, never the token itself.
        answer = answer_once(request, mute, scope=f"unsubscribe:{token_digest(id)[:40]}")
        if answer.status_code == status.HTTP_204_NO_CONTENT and _wants_html(request):
            return _page("done", category=verified(id).category)
        return answer


_TITLES = {
    "confirm": "Unsubscribe",
    "done": "You are unsubscribed",
    "invalid": "Invalid link",
}
# The page holds the token in its URL: no referrer, no cache, no frame, no script.
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Robots-Tag": "noindex",
}


def _page(state: str, *, category: str = "", status: int = status.HTTP_200_OK) -> HttpResponse:
    context = {"state": state, "title": _TITLES[state], "category": category}
    response = HttpResponse(render_to_string("people/unsubscribe.html", context), status=status)
    for name, value in _PAGE_HEADERS.items():
        response[name] = value
    return response


def _wants_html(request: Request) -> bool:
    return "text/html" in request.META.get("HTTP_ACCEPT", "")
