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

from delivery.models import (
    Delivery,
    DeliveryOutcome,
    Notification,
    NotificationSource,
    NotificationState,
)
from notifications import services
from notifications.serializers import (
    NOTIFICATIONS,
    DeliverySerializer,
    NotificationPatchSerializer,
    NotificationRetrySerializer,
    NotificationSerializer,
    NotificationWriteSerializer,
)
from tenancy.api.idempotency import Answer, answer_once, created
from tenancy.api.permissions import tenant_of
from tenancy.api.schema import location_header
from web.pagination import NewestFirstCursorPagination
from web.query import choice_query_param, datetime_query_param, uuid_query_param
from web.representation import RepresentedListView


class DeliveryPagination(NewestFirstCursorPagination):
    ordering = ("-attempted_at", "-id")


def _notification(request: Request, pk: uuid.UUID) -> Notification:
    return Notification.objects.get(pk=pk, tenant=tenant_of(request))


class NotificationListView(RepresentedListView):
    pagination_class = NewestFirstCursorPagination
    serializer_class = NotificationSerializer
    representation = NOTIFICATIONS
    idempotency_key_required = ("POST",)
    # A webhook endpoint that is disabled: its deliveries could only fail.
    extra_problem_statuses = {"POST": (409,)}
    query_filters = (
        OpenApiParameter("state", enum=NotificationState.values, required=False),
        OpenApiParameter("source", enum=NotificationSource.values, required=False),
    )

    def get_queryset(self) -> Any:
        state = choice_query_param(self.request, "state", NotificationState.values)
        source = choice_query_param(self.request, "source", NotificationSource.values)
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
            return created(data, f"/v1/notifications/{notification.id}")

        return answer_once(request, create, body=arguments, required=True)


class NotificationDetailView(APIView):
    owner_methods = ("DELETE",)
    extra_problem_statuses = {"PATCH": (409,), "DELETE": (409,)}

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
        OpenApiParameter(
            "message_id",
            type=uuid.UUID,
            required=False,
            description="Only the log of that message's deliveries (resends included); "
            "a message that is not the tenant's has none.",
        ),
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
            message_id=uuid_query_param(self.request, "message_id"),
            outcome=choice_query_param(self.request, "outcome", DeliveryOutcome.values),
            since=datetime_query_param(self.request, "since"),
        )
