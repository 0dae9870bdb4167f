"""The webhooks API (applications, endpoints, event types, messages, recovery): thin views
that parse, call one service and render.

Every query filters on `tenant_of(request)` (set by IsTenantMember), so another tenant's row
answers 404 exactly like a missing one. A portal session (webhooks.portal.access) reaches
the operations a view opens in `portal_capabilities`, on its application's rows only: the
views confine lists to them and check an object is one before a service acts on it.
"""

import uuid
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from delivery.models import Delivery, WebhookEndpoint
from tenancy.api.idempotency import Answer, answer_once, created
from tenancy.api.permissions import tenant_of
from tenancy.api.schema import location_header
from web.errors import InvalidInput
from web.pagination import NewestFirstCursorPagination
from web.query import choice_query_param, datetime_query_param, single_query_param
from webhooks import applications, event_types, lifecycle, messages, recovery
from webhooks import endpoints as webhook_endpoints
from webhooks.models import Application, EventType, Message
from webhooks.models import PortalCapability as Can
from webhooks.portal.access import application_scope, may
from webhooks.serializers import (
    ApplicationSerializer,
    ApplicationWriteSerializer,
    EventTypePatchSerializer,
    EventTypeSerializer,
    EventTypeWriteSerializer,
    MessageAttemptSerializer,
    MessageEndpointSerializer,
    MessageResendSerializer,
    MessageSerializer,
    MessageWriteSerializer,
    RecoverAcceptedSerializer,
    WebhookEndpointCreateSerializer,
    WebhookEndpointRecoverSerializer,
    WebhookEndpointRotateSecretSerializer,
    WebhookEndpointSecretSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointSigningSecretSerializer,
    WebhookEndpointWriteSerializer,
)

_APPLICATION_KEY = OpenApiParameter(
    "id",
    str,
    OpenApiParameter.PATH,
    description="The application's id or its uid (`^[a-zA-Z0-9._-]{1,256}$`).",
)
_APPLICATION_FILTER = OpenApiParameter(
    "application",
    type=str,
    required=False,
    pattern=r"^[a-zA-Z0-9._-]{1,256}$",
    description="Only those of the application with this id or uid (a deleted one's, by its id).",
)


def _uid_query_param(request: Request, name: str) -> str | None:
    """The value of `name`, None when absent; InvalidInput unless it could be a uid or an
    id."""
    value = single_query_param(request, name)
    if value is not None and not applications.UID_PATTERN.fullmatch(value):
        raise InvalidInput({name: [applications.UID_RULE]})
    return value


class ApplicationListView(ListAPIView):
    owner_methods = ("POST",)
    pagination_class = NewestFirstCursorPagination
    serializer_class = ApplicationSerializer
    query_filters = (
        OpenApiParameter("uid", type=str, required=False, pattern=r"^[a-zA-Z0-9._-]{1,256}$"),
    )

    @extend_schema(
        operation_id="applications_list", responses={200: ApplicationSerializer(many=True)}
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[Application]:
        return applications.application_pages(
            tenant=tenant_of(self.request), uid=_uid_query_param(self.request, "uid")
        )

    @extend_schema(
        operation_id="applications_create",
        request=ApplicationWriteSerializer,
        parameters=[location_header("Path of the new application, `/v1/applications/{id}`.")],
        responses={201: ApplicationSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = ApplicationWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Answer:
            application = applications.application_create(
                tenant=tenant_of(request), **serializer.validated_data
            )
            data = ApplicationSerializer(application).data
            return created(data, f"/v1/applications/{application.id}")

        return answer_once(request, create, body=serializer.validated_data)


@extend_schema(parameters=[_APPLICATION_KEY])
class ApplicationDetailView(APIView):
    owner_methods = ("PATCH", "DELETE")
    extra_problem_statuses = {"PATCH": (409,)}

    @extend_schema(responses={200: ApplicationSerializer})
    def get(self, request: Request, key: str) -> Response:
        application = applications.application_get(tenant=tenant_of(request), key=key)
        return Response(ApplicationSerializer(application).data)

    @extend_schema(request=ApplicationWriteSerializer, responses={200: ApplicationSerializer})
    def patch(self, request: Request, key: str) -> Response:
        serializer = ApplicationWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        application = applications.application_update(
            tenant=tenant_of(request), key=key, changes=dict(serializer.validated_data)
        )
        return Response(ApplicationSerializer(application).data)

    @extend_schema(
        description="Deletes the application: its endpoints are disabled and their pending "
        "deliveries parked; its messages and their history stay until retention, and its uid "
        "is free again.",
        responses={204: None},
    )
    def delete(self, request: Request, key: str) -> Response:
        lifecycle.application_delete(tenant=tenant_of(request), key=key)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _endpoints(request: Request) -> QuerySet[WebhookEndpoint]:
    """The endpoints the caller reaches: the tenant's, or its portal session's
    application's."""
    endpoints = WebhookEndpoint.objects.filter(tenant=tenant_of(request))
    application_id = application_scope(request)
    return endpoints if application_id is None else endpoints.filter(application_id=application_id)


def _messages(request: Request) -> QuerySet[Message]:
    messages = Message.objects.filter(tenant=tenant_of(request))
    application_id = application_scope(request)
    return messages if application_id is None else messages.filter(application_id=application_id)


def _application_of_new_endpoint(request: Request, named: str | None) -> str | None:
    """The application a new endpoint belongs to: the one named, or a portal session's own
    (naming another answers 404, as its objects do)."""
    scope = application_scope(request)
    if scope is None:
        return named
    if (
        named is not None
        and applications.application_get(tenant=tenant_of(request), key=named).id != scope
    ):
        raise Application.DoesNotExist
    return str(scope)


def _reach_endpoint(request: Request, pk: uuid.UUID) -> None:
    """DoesNotExist (404) for an endpoint outside a portal session's application; the
    services look the tenant's endpoints up themselves."""
    if application_scope(request) is not None and not _endpoints(request).filter(pk=pk).exists():
        raise WebhookEndpoint.DoesNotExist


def _reach_message(request: Request, pk: uuid.UUID) -> None:
    if application_scope(request) is not None and not _messages(request).filter(pk=pk).exists():
        raise Message.DoesNotExist


def _with_secret(request: Request, endpoint: WebhookEndpoint) -> dict[str, Any]:
    """The endpoint as an answer that shows its secret, to a caller that may see it."""
    if may(request, Can.VIEW_SECRET):
        return dict(WebhookEndpointSecretSerializer(endpoint).data)
    return dict(WebhookEndpointSerializer(endpoint).data)


class WebhookEndpointListView(ListAPIView):
    owner_methods = ("*",)
    portal_capabilities = {"GET": Can.VIEW, "POST": Can.MANAGE_ENDPOINTS}
    pagination_class = NewestFirstCursorPagination
    serializer_class = WebhookEndpointSerializer
    query_filters = (_APPLICATION_FILTER,)

    @extend_schema(
        operation_id="webhook_endpoints_list",
        responses={200: WebhookEndpointSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[WebhookEndpoint]:
        endpoints = webhook_endpoints.endpoint_pages(
            tenant=tenant_of(self.request),
            application=_uid_query_param(self.request, "application"),
        )
        application_id = application_scope(self.request)
        return (
            endpoints if application_id is None else endpoints.filter(application_id=application_id)
        )

    @extend_schema(
        operation_id="webhook_endpoints_create",
        request=WebhookEndpointCreateSerializer,
        parameters=[location_header("Path of the new endpoint, `/v1/webhook-endpoints/{id}`.")],
        responses={201: WebhookEndpointSecretSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = WebhookEndpointCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Answer:
            endpoint = webhook_endpoints.webhook_endpoint_create(
                tenant=tenant_of(request),
                **{
                    **serializer.validated_data,
                    "application": _application_of_new_endpoint(
                        request, serializer.validated_data.get("application")
                    ),
                },
            )
            data = _with_secret(request, endpoint)
            path = f"/v1/webhook-endpoints/{endpoint.id}"
            return created(data, path, shows_secret="secret" in data)

        return answer_once(request, create, body=serializer.validated_data)


class WebhookEndpointDetailView(APIView):
    owner_methods = ("*",)
    extra_problem_statuses = {"PATCH": (409,)}
    portal_capabilities = {
        "GET": Can.VIEW,
        "PATCH": Can.MANAGE_ENDPOINTS,
        "DELETE": Can.MANAGE_ENDPOINTS,
    }

    @extend_schema(responses={200: WebhookEndpointSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        endpoint = _endpoints(request).get(pk=pk)
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(
        request=WebhookEndpointWriteSerializer,
        responses={200: WebhookEndpointSerializer},
    )
    def patch(self, request: Request, pk: uuid.UUID) -> Response:
        serializer = WebhookEndpointWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        _reach_endpoint(request, pk)
        endpoint = webhook_endpoints.webhook_endpoint_update(
            tenant=tenant_of(request), endpoint_id=pk, **serializer.validated_data
        )
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        _reach_endpoint(request, pk)
        webhook_endpoints.webhook_endpoint_delete(tenant=tenant_of(request), endpoint_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookEndpointRotateSecretView(APIView):
    """A new signing secret; the answer shows it to a caller that may view secrets (a
    portal session without `view_secret` rotates blind)."""

    owner_methods = ("*",)
    portal_capabilities = {"POST": Can.ROTATE_SECRET}

    @extend_schema(request=None, responses={200: WebhookEndpointSecretSerializer})
    def post(self, request: Request, pk: uuid.UUID) -> HttpResponse:
        WebhookEndpointRotateSecretSerializer(data=request.data).is_valid(raise_exception=True)
        _reach_endpoint(request, pk)

        def rotate() -> Answer:
            endpoint = webhook_endpoints.webhook_endpoint_rotate_secret(
                tenant=tenant_of(request), endpoint_id=pk
            )
            data = _with_secret(request, endpoint)
            resource = f"/v1/webhook-endpoints/{pk}"
            return Answer.of(
                status.HTTP_200_OK, data, resource=resource, shows_secret="secret" in data
            )

        return answer_once(request, rotate)


class WebhookEndpointSecretView(APIView):
    """The endpoint's current signing secret (the portal's "reveal")."""

    owner_methods = ("*",)
    portal_capabilities = {"GET": Can.VIEW_SECRET}

    @extend_schema(responses={200: WebhookEndpointSigningSecretSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        endpoint = _endpoints(request).only("secret").get(pk=pk)
        return Response(WebhookEndpointSigningSecretSerializer(endpoint).data)


class EventTypeListView(ListAPIView):
    owner_methods = ("POST",)
    portal_capabilities = {"GET": Can.VIEW}
    pagination_class = NewestFirstCursorPagination
    serializer_class = EventTypeSerializer
    query_filters = (
        OpenApiParameter(
            "archived",
            type=bool,
            required=False,
            description="Only archived (true) or only active (false) types.",
        ),
    )

    @extend_schema(
        operation_id="event_types_list",
        responses={200: EventTypeSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[EventType]:
        types = EventType.objects.filter(tenant=tenant_of(self.request))
        archived = choice_query_param(self.request, "archived", ["true", "false"])
        if archived is not None:
            types = types.filter(archived=archived == "true")
        return types

    @extend_schema(
        operation_id="event_types_create",
        request=EventTypeWriteSerializer,
        parameters=[location_header("Path of the new event type, `/v1/event-types/{id}`.")],
        responses={201: EventTypeSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = EventTypeWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Answer:
            event_type = event_types.event_type_create(
                tenant=tenant_of(request), **serializer.validated_data
            )
            data = EventTypeSerializer(event_type).data
            return created(data, f"/v1/event-types/{event_type.id}")

        return answer_once(request, create, body=serializer.validated_data)


class EventTypeDetailView(APIView):
    owner_methods = ("PATCH", "DELETE")
    portal_capabilities = {"GET": Can.VIEW}
    extra_problem_statuses = {"PATCH": (409,), "DELETE": (409,)}

    @extend_schema(responses={200: EventTypeSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        event_type = EventType.objects.get(pk=pk, tenant=tenant_of(request))
        return Response(EventTypeSerializer(event_type).data)

    @extend_schema(request=EventTypePatchSerializer, responses={200: EventTypeSerializer})
    def patch(self, request: Request, pk: uuid.UUID) -> Response:
        serializer = EventTypePatchSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        event_type = event_types.event_type_update(
            tenant=tenant_of(request), event_type_id=pk, changes=dict(serializer.validated_data)
        )
        return Response(EventTypeSerializer(event_type).data)

    @extend_schema(
        description="Archives the type: no new message or subscription may name it.",
        responses={200: EventTypeSerializer},
    )
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        event_type = event_types.event_type_archive(tenant=tenant_of(request), event_type_id=pk)
        return Response(EventTypeSerializer(event_type).data)


class MessageListView(ListAPIView):
    """Messages are published by the tenant: a portal session reads its application's."""

    portal_capabilities = {"GET": Can.VIEW}
    pagination_class = NewestFirstCursorPagination
    serializer_class = MessageSerializer
    idempotency_key_required = ("POST",)
    query_filters = (
        _APPLICATION_FILTER,
        OpenApiParameter("event_type", type=str, required=False),
        OpenApiParameter(
            "since",
            type=OpenApiTypes.DATETIME,
            required=False,
            description="Only messages created at or after this instant (ISO 8601; without "
            "an offset, UTC).",
        ),
    )

    @extend_schema(operation_id="messages_list", responses={200: MessageSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[Message]:
        pages = messages.message_pages(
            tenant=tenant_of(self.request),
            event_type=single_query_param(self.request, "event_type"),
            since=datetime_query_param(self.request, "since"),
            application=_uid_query_param(self.request, "application"),
        )
        application_id = application_scope(self.request)
        return pages if application_id is None else pages.filter(application_id=application_id)

    @extend_schema(
        operation_id="messages_create",
        request=MessageWriteSerializer,
        parameters=[location_header("Path of the message, `/v1/messages/{id}`.")],
        responses={202: MessageSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = MessageWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def publish() -> Answer:
            message = messages.publish_message(
                tenant=tenant_of(request), **serializer.validated_data
            )
            data = MessageSerializer(message).data
            return Answer.of(
                status.HTTP_202_ACCEPTED,
                data,
                resource=f"/v1/messages/{message.id}",
                location=True,
            )

        return answer_once(request, publish, body=serializer.validated_data, required=True)


class MessageDetailView(APIView):
    portal_capabilities = {"GET": Can.VIEW}

    @extend_schema(responses={200: MessageSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        message = _messages(request).get(pk=pk)
        return Response(MessageSerializer(message).data)


class MessageAttemptsView(ListAPIView):
    """The message's attempts, one row per request sent to an endpoint (resends included),
    newest first: why each failed one failed."""

    pagination_class = NewestFirstCursorPagination
    serializer_class = MessageAttemptSerializer
    portal_capabilities = {"GET": Can.VIEW}

    @extend_schema(
        operation_id="messages_attempts_list",
        responses={200: MessageAttemptSerializer(many=True)},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        _reach_message(request, pk)
        return self.list(request)

    def get_queryset(self) -> QuerySet[Delivery]:
        return messages.message_attempt_pages(
            tenant=tenant_of(self.request), message_id=self.kwargs["pk"]
        )


class MessageEndpointsView(ListAPIView):
    """The message's delivery to each endpoint it reached: status, attempts, last outcome;
    newest endpoint first."""

    pagination_class = NewestFirstCursorPagination
    serializer_class = MessageEndpointSerializer
    portal_capabilities = {"GET": Can.VIEW}

    @extend_schema(
        operation_id="messages_endpoints_list",
        responses={200: MessageEndpointSerializer(many=True)},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        _reach_message(request, pk)
        return self.list(request)

    def get_queryset(self) -> QuerySet[WebhookEndpoint]:
        return messages.message_endpoint_pages(
            tenant=tenant_of(self.request), message_id=self.kwargs["pk"]
        )

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        endpoints = self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        deliveries = messages.message_endpoint_deliveries(
            tenant=tenant_of(request),
            message_id=self.kwargs["pk"],
            endpoint_ids=[endpoint.id for endpoint in endpoints],
        )
        return self.get_paginated_response(self.get_serializer(deliveries, many=True).data)


class MessageResendView(APIView):
    """Send the message to one endpoint again: its delivery still on its way or given up is
    brought forward, a delivered one queued again; 409 while run_tick holds the delivery or
    for a disabled endpoint."""

    extra_problem_statuses = {"POST": (409,)}
    portal_capabilities = {"POST": Can.RESEND}

    @extend_schema(request=None, responses={202: MessageEndpointSerializer})
    def post(self, request: Request, pk: uuid.UUID, endpoint_id: uuid.UUID) -> HttpResponse:
        MessageResendSerializer(data=request.data).is_valid(raise_exception=True)
        _reach_message(request, pk)
        _reach_endpoint(request, endpoint_id)

        def resend() -> Answer:
            messages.message_resend(
                tenant=tenant_of(request), message_id=pk, endpoint_id=endpoint_id
            )
            [delivery] = messages.message_endpoint_deliveries(
                tenant=tenant_of(request), message_id=pk, endpoint_ids=[endpoint_id]
            )
            data = MessageEndpointSerializer(delivery).data
            return Answer.of(status.HTTP_202_ACCEPTED, data, resource=f"/v1/messages/{pk}")

        return answer_once(request, resend)


class WebhookEndpointRecoverView(APIView):
    """Queue again every delivery to the endpoint in a window that never succeeded, as a
    task (202 with its id; GET /v1/tasks/{id} follows it); 409 for a disabled endpoint."""

    owner_methods = ("*",)
    extra_problem_statuses = {"POST": (409,)}
    portal_capabilities = {"POST": Can.RESEND}

    @extend_schema(
        request=WebhookEndpointRecoverSerializer,
        parameters=[location_header("Path of the recovery task, `/v1/tasks/{id}`.", status=202)],
        responses={202: RecoverAcceptedSerializer},
    )
    def post(self, request: Request, pk: uuid.UUID) -> HttpResponse:
        serializer = WebhookEndpointRecoverSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        _reach_endpoint(request, pk)

        def recover() -> Answer:
            task = recovery.endpoint_recover(
                tenant=tenant_of(request), endpoint_id=pk, **serializer.validated_data
            )
            data = RecoverAcceptedSerializer({"task_id": task.id}).data
            return Answer.of(
                status.HTTP_202_ACCEPTED, data, resource=f"/v1/tasks/{task.id}", location=True
            )

        return answer_once(request, recover, body=serializer.validated_data)
