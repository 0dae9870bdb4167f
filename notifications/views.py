"""The notifications API: thin views that parse, call one service and render.

Every query filters on `tenant_of(request)` (set by IsTenantMember), so another tenant's row
answers 404 exactly like a missing one.
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

from notifications import event_types, messages, recovery, services, webhook_endpoints
from notifications.models import (
    Delivery,
    DeliveryOutcome,
    EventType,
    Message,
    Notification,
    NotificationSource,
    NotificationState,
    WebhookEndpoint,
)
from notifications.serializers import (
    NOTIFICATIONS,
    DeliverySerializer,
    EventTypePatchSerializer,
    EventTypeSerializer,
    EventTypeWriteSerializer,
    MessageAttemptSerializer,
    MessageResendSerializer,
    MessageSerializer,
    MessageWriteSerializer,
    NotificationPatchSerializer,
    NotificationRetrySerializer,
    NotificationSerializer,
    NotificationWriteSerializer,
    RecoverAcceptedSerializer,
    WebhookEndpointRecoverSerializer,
    WebhookEndpointRotateSecretSerializer,
    WebhookEndpointSecretSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointWriteSerializer,
)
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import tenant_of
from tenancy.api.schema import location_header
from web.errors import InvalidInput
from web.pagination import NewestFirstCursorPagination
from web.query import datetime_query_param, single_query_param, uuid_query_param
from web.representation import RepresentedListView


class DeliveryPagination(NewestFirstCursorPagination):
    ordering = ("-attempted_at", "-id")


def _created(data: dict[str, Any], location: str, *, shows_secret: bool = False) -> Answer:
    return Answer.of(
        status.HTTP_201_CREATED, data, resource=location, location=True, shows_secret=shows_secret
    )


def _notification(request: Request, pk: uuid.UUID) -> Notification:
    return Notification.objects.get(pk=pk, tenant=tenant_of(request))


def _choice_query_param(request: Request, name: str, choices: list[str]) -> str | None:
    value = single_query_param(request, name)
    if value is not None and value not in choices:
        raise InvalidInput({name: [f"Must be one of {choices}."]})
    return value


class NotificationListView(RepresentedListView):
    pagination_class = NewestFirstCursorPagination
    serializer_class = NotificationSerializer
    representation = NOTIFICATIONS
    idempotency_key_required = ("POST",)
    query_filters = (
        OpenApiParameter("state", enum=NotificationState.values, required=False),
        OpenApiParameter("source", enum=NotificationSource.values, required=False),
    )

    def get_queryset(self) -> Any:
        state = _choice_query_param(self.request, "state", NotificationState.values)
        source = _choice_query_param(self.request, "source", NotificationSource.values)
        return services.notification_pages(
            tenant=tenant_of(self.request),
            fields=self.representation.attributes,
            state=state,
            source=source,
        )

    @extend_schema(
        operation_id="notifications_list",
        responses={200: NotificationSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    @extend_schema(
        operation_id="notifications_create",
        request=NotificationWriteSerializer,
        parameters=[location_header("Path of the new notification, `/v1/notifications/{id}`.")],
        responses={201: NotificationSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = NotificationWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        arguments = serializer.service_arguments()

        def create() -> Answer:
            notification = services.notification_create(tenant=tenant_of(request), **arguments)
            data = NotificationSerializer(notification).data
            return _created(data, f"/v1/notifications/{notification.id}")

        return answer_once(request, create, body=arguments, required=True)


class NotificationDetailView(APIView):
    owner_methods = ("DELETE",)
    extra_problem_statuses = {"PATCH": (409,)}

    @extend_schema(responses={200: NotificationSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        return Response(NotificationSerializer(_notification(request, pk)).data)

    @extend_schema(
        request=NotificationPatchSerializer,
        responses={200: NotificationSerializer},
    )
    def patch(self, request: Request, pk: uuid.UUID) -> Response:
        serializer = NotificationPatchSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        notification = services.notification_update(
            tenant=tenant_of(request), notification_id=pk, changes=serializer.service_arguments()
        )
        return Response(NotificationSerializer(notification).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        services.notification_delete(tenant=tenant_of(request), notification_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationRetryView(APIView):
    extra_problem_statuses = {"POST": (409,)}

    @extend_schema(request=None, responses={200: NotificationSerializer})
    def post(self, request: Request, pk: uuid.UUID) -> HttpResponse:
        NotificationRetrySerializer(data=request.data).is_valid(raise_exception=True)

        def retry() -> Answer:
            notification = services.notification_retry(
                tenant=tenant_of(request), notification_id=pk
            )
            data = NotificationSerializer(notification).data
            return Answer.of(status.HTTP_200_OK, data, resource=f"/v1/notifications/{pk}")

        return answer_once(request, retry)


class NotificationDeliveriesView(ListAPIView):
    pagination_class = DeliveryPagination
    serializer_class = DeliverySerializer

    @extend_schema(
        operation_id="notifications_deliveries_list",
        responses={200: DeliverySerializer(many=True)},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[Delivery]:
        pk = self.kwargs["pk"]
        if not Notification.objects.filter(pk=pk, tenant=tenant_of(self.request)).exists():
            raise Notification.DoesNotExist
        return Delivery.objects.filter(tenant=tenant_of(self.request), notification_id=pk)


class DeliveryListView(ListAPIView):
    pagination_class = DeliveryPagination
    serializer_class = DeliverySerializer
    query_filters = (
        OpenApiParameter("notification_id", type=uuid.UUID, required=False),
        OpenApiParameter("endpoint_id", type=uuid.UUID, required=False),
        OpenApiParameter("outcome", enum=DeliveryOutcome.values, required=False),
        OpenApiParameter(
            "since",
            type=OpenApiTypes.DATETIME,
            required=False,
            description="Only rows attempted at or after this instant (ISO 8601; without "
            "an offset, UTC).",
        ),
    )

    @extend_schema(
        operation_id="deliveries_list",
        responses={200: DeliverySerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[Delivery]:
        return services.delivery_log(
            tenant=tenant_of(self.request),
            notification_id=uuid_query_param(self.request, "notification_id"),
            endpoint_id=uuid_query_param(self.request, "endpoint_id"),
            outcome=_choice_query_param(self.request, "outcome", DeliveryOutcome.values),
            since=datetime_query_param(self.request, "since"),
        )


class WebhookEndpointListView(ListAPIView):
    owner_methods = ("*",)
    pagination_class = NewestFirstCursorPagination
    serializer_class = WebhookEndpointSerializer

    @extend_schema(
        operation_id="webhook_endpoints_list",
        responses={200: WebhookEndpointSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        return self.list(request)

    def get_queryset(self) -> QuerySet[WebhookEndpoint]:
        return WebhookEndpoint.objects.filter(tenant=tenant_of(self.request))

    @extend_schema(
        operation_id="webhook_endpoints_create",
        request=WebhookEndpointWriteSerializer,
        parameters=[location_header("Path of the new endpoint, `/v1/webhook-endpoints/{id}`.")],
        responses={201: WebhookEndpointSecretSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = WebhookEndpointWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def create() -> Answer:
            endpoint = webhook_endpoints.webhook_endpoint_create(
                tenant=tenant_of(request), **serializer.validated_data
            )
            data = WebhookEndpointSecretSerializer(endpoint).data
            return _created(data, f"/v1/webhook-endpoints/{endpoint.id}", shows_secret=True)

        return answer_once(request, create, body=serializer.validated_data)


class WebhookEndpointDetailView(APIView):
    owner_methods = ("*",)

    @extend_schema(responses={200: WebhookEndpointSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        endpoint = WebhookEndpoint.objects.get(pk=pk, tenant=tenant_of(request))
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(
        request=WebhookEndpointWriteSerializer,
        responses={200: WebhookEndpointSerializer},
    )
    def patch(self, request: Request, pk: uuid.UUID) -> Response:
        serializer = WebhookEndpointWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        endpoint = webhook_endpoints.webhook_endpoint_update(
            tenant=tenant_of(request), endpoint_id=pk, **serializer.validated_data
        )
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        webhook_endpoints.webhook_endpoint_delete(tenant=tenant_of(request), endpoint_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookEndpointRotateSecretView(APIView):
    owner_methods = ("*",)

    @extend_schema(request=None, responses={200: WebhookEndpointSecretSerializer})
    def post(self, request: Request, pk: uuid.UUID) -> HttpResponse:
        WebhookEndpointRotateSecretSerializer(data=request.data).is_valid(raise_exception=True)

        def rotate() -> Answer:
            endpoint = webhook_endpoints.webhook_endpoint_rotate_secret(
                tenant=tenant_of(request), endpoint_id=pk
            )
            data = WebhookEndpointSecretSerializer(endpoint).data
            resource = f"/v1/webhook-endpoints/{pk}"
            return Answer.of(status.HTTP_200_OK, data, resource=resource, shows_secret=True)

        return answer_once(request, rotate)


class EventTypeListView(ListAPIView):
    owner_methods = ("POST",)
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
        archived = _choice_query_param(self.request, "archived", ["true", "false"])
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
            return _created(data, f"/v1/event-types/{event_type.id}")

        return answer_once(request, create, body=serializer.validated_data)


class EventTypeDetailView(APIView):
    owner_methods = ("PATCH", "DELETE")
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
    pagination_class = NewestFirstCursorPagination
    serializer_class = MessageSerializer
    idempotency_key_required = ("POST",)
    query_filters = (
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
        return messages.message_pages(
            tenant=tenant_of(self.request),
            event_type=single_query_param(self.request, "event_type"),
            since=datetime_query_param(self.request, "since"),
        )

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
    @extend_schema(responses={200: MessageSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        message = Message.objects.get(pk=pk, tenant=tenant_of(request))
        return Response(MessageSerializer(message).data)


class MessageAttemptsView(APIView):
    @extend_schema(
        operation_id="messages_attempts_list",
        responses={200: MessageAttemptSerializer(many=True)},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        attempts = messages.message_attempts(tenant=tenant_of(request), message_id=pk)
        return Response(MessageAttemptSerializer(attempts, many=True).data)


class MessageResendView(APIView):
    @extend_schema(request=None, responses={202: MessageAttemptSerializer})
    def post(self, request: Request, pk: uuid.UUID, endpoint_id: uuid.UUID) -> HttpResponse:
        MessageResendSerializer(data=request.data).is_valid(raise_exception=True)

        def resend() -> Answer:
            messages.message_resend(
                tenant=tenant_of(request), message_id=pk, endpoint_id=endpoint_id
            )
            attempts = messages.message_attempts(tenant=tenant_of(request), message_id=pk)
            entry = next(entry for entry in attempts if entry.endpoint_id == endpoint_id)
            data = MessageAttemptSerializer(entry).data
            return Answer.of(status.HTTP_202_ACCEPTED, data, resource=f"/v1/messages/{pk}")

        return answer_once(request, resend)


class WebhookEndpointRecoverView(APIView):
    """Queue again every delivery to the endpoint in a window that never succeeded, as a
    task (202 with its id; GET /v1/tasks/{id} follows it); 409 for a disabled endpoint."""

    owner_methods = ("*",)
    extra_problem_statuses = {"POST": (409,)}

    @extend_schema(
        request=WebhookEndpointRecoverSerializer,
        parameters=[location_header("Path of the recovery task, `/v1/tasks/{id}`.", status=202)],
        responses={202: RecoverAcceptedSerializer},
    )
    def post(self, request: Request, pk: uuid.UUID) -> HttpResponse:
        serializer = WebhookEndpointRecoverSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def recover() -> Answer:
            task = recovery.endpoint_recover(
                tenant=tenant_of(request), endpoint_id=pk, **serializer.validated_data
            )
            data = RecoverAcceptedSerializer({"task_id": task.id}).data
            return Answer.of(
                status.HTTP_202_ACCEPTED, data, resource=f"/v1/tasks/{task.id}", location=True
            )

        return answer_once(request, recover, body=serializer.validated_data)
