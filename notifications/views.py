"""The notifications API: thin views that parse, call one service and render.

Every query filters on `request.tenant` (set by IsTenantMember), so another tenant's row
answers 404 exactly like a missing one.
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notifications import services, webhook_endpoints
from notifications.models import Delivery, Notification, NotificationState, WebhookEndpoint
from notifications.serializers import (
    DeliverySerializer,
    NotificationPatchSerializer,
    NotificationSerializer,
    NotificationWriteSerializer,
    WebhookEndpointSecretSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointWriteSerializer,
)
from web.pagination import NewestFirstCursorPagination
from web.problems import ProblemError


class DeliveryPagination(NewestFirstCursorPagination):
    ordering = ("-attempted_at", "-id")


def _location(description: str) -> OpenApiParameter:
    return OpenApiParameter(
        "Location",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=[201],
        description=description,
    )


def _invalid(errors: dict[str, list[str]]) -> ProblemError:
    return ProblemError(
        400, "The request has invalid fields.", kind="validation-error", errors=errors
    )


@contextmanager
def domain_errors() -> Iterator[None]:
    """Map the services' domain errors to problem answers."""
    try:
        yield
    except ObjectDoesNotExist:
        raise NotFound() from None
    except services.InvalidInput as exc:
        raise _invalid(exc.errors) from None
    except services.NotificationClaimed:
        raise ProblemError(
            409,
            "The notification is being delivered right now; try again when the delivery ends.",
            kind="notification-claimed",
        ) from None


def _created(data: dict[str, Any], location: str) -> Response:
    return Response(data, status=status.HTTP_201_CREATED, headers={"Location": location})


def _notification(request: Request, pk: uuid.UUID) -> Notification:
    with domain_errors():
        return Notification.objects.get(pk=pk, tenant=request.tenant)


class NotificationListView(GenericAPIView):
    pagination_class = NewestFirstCursorPagination
    serializer_class = NotificationSerializer

    @extend_schema(
        operation_id="notifications_list",
        parameters=[OpenApiParameter("state", enum=NotificationState.values, required=False)],
        responses={200: NotificationSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        queryset = Notification.objects.filter(tenant=request.tenant)
        state = request.query_params.get("state")
        if state is not None:
            if state not in NotificationState.values:
                raise _invalid({"state": [f"Must be one of {NotificationState.values}."]})
            queryset = services.notifications_in_state(queryset, state)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(NotificationSerializer(page, many=True).data)

    @extend_schema(
        operation_id="notifications_create",
        request=NotificationWriteSerializer,
        parameters=[_location("Path of the new notification, `/v1/notifications/{id}`.")],
        responses={201: NotificationSerializer},
    )
    def post(self, request: Request) -> Response:
        serializer = NotificationWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with domain_errors():
            notification = services.notification_create(
                tenant=request.tenant, **serializer.service_arguments()
            )
        data = NotificationSerializer(notification).data
        return _created(data, f"/v1/notifications/{notification.id}")


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
        with domain_errors():
            notification = services.notification_update(
                tenant=request.tenant, notification_id=pk, changes=serializer.service_arguments()
            )
        return Response(NotificationSerializer(notification).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        with domain_errors():
            services.notification_delete(tenant=request.tenant, notification_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationRetryView(APIView):
    extra_problem_statuses = {"POST": (409,)}

    @extend_schema(request=None, responses={200: NotificationSerializer})
    def post(self, request: Request, pk: uuid.UUID) -> Response:
        with domain_errors():
            notification = services.notification_retry(tenant=request.tenant, notification_id=pk)
        return Response(NotificationSerializer(notification).data)


class NotificationDeliveriesView(GenericAPIView):
    pagination_class = DeliveryPagination
    serializer_class = DeliverySerializer

    @extend_schema(
        operation_id="notifications_deliveries_list",
        responses={200: DeliverySerializer(many=True)},
    )
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        if not Notification.objects.filter(pk=pk, tenant=request.tenant).exists():
            raise NotFound()
        deliveries = Delivery.objects.filter(tenant=request.tenant, notification_id=pk)
        page = self.paginate_queryset(deliveries)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)


class DeliveryListView(GenericAPIView):
    pagination_class = DeliveryPagination
    serializer_class = DeliverySerializer

    @extend_schema(
        operation_id="deliveries_list",
        parameters=[OpenApiParameter("notification_id", type=uuid.UUID, required=False)],
        responses={200: DeliverySerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        deliveries = Delivery.objects.filter(tenant=request.tenant)
        raw_id = request.query_params.get("notification_id")
        if raw_id is not None:
            try:
                notification_id = uuid.UUID(raw_id)
            except ValueError:
                raise _invalid({"notification_id": ["Must be a UUID."]}) from None
            deliveries = deliveries.filter(notification_id=notification_id)
        page = self.paginate_queryset(deliveries)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)


class WebhookEndpointListView(GenericAPIView):
    owner_methods = ("*",)
    pagination_class = NewestFirstCursorPagination
    serializer_class = WebhookEndpointSerializer

    @extend_schema(
        operation_id="webhook_endpoints_list",
        responses={200: WebhookEndpointSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(WebhookEndpoint.objects.filter(tenant=request.tenant))
        return self.get_paginated_response(WebhookEndpointSerializer(page, many=True).data)

    @extend_schema(
        operation_id="webhook_endpoints_create",
        request=WebhookEndpointWriteSerializer,
        parameters=[_location("Path of the new endpoint, `/v1/webhook-endpoints/{id}`.")],
        responses={201: WebhookEndpointSecretSerializer},
    )
    def post(self, request: Request) -> Response:
        serializer = WebhookEndpointWriteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with domain_errors():
            endpoint = webhook_endpoints.webhook_endpoint_create(
                tenant=request.tenant, **serializer.validated_data
            )
        data = WebhookEndpointSecretSerializer(endpoint).data
        return _created(data, f"/v1/webhook-endpoints/{endpoint.id}")


class WebhookEndpointDetailView(APIView):
    owner_methods = ("*",)

    @extend_schema(responses={200: WebhookEndpointSerializer})
    def get(self, request: Request, pk: uuid.UUID) -> Response:
        with domain_errors():
            endpoint = WebhookEndpoint.objects.get(pk=pk, tenant=request.tenant)
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(
        request=WebhookEndpointWriteSerializer,
        responses={200: WebhookEndpointSerializer},
    )
    def patch(self, request: Request, pk: uuid.UUID) -> Response:
        serializer = WebhookEndpointWriteSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with domain_errors():
            endpoint = webhook_endpoints.webhook_endpoint_update(
                tenant=request.tenant, endpoint_id=pk, **serializer.validated_data
            )
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: uuid.UUID) -> Response:
        with domain_errors():
            webhook_endpoints.webhook_endpoint_delete(tenant=request.tenant, endpoint_id=pk)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookEndpointRotateSecretView(APIView):
    owner_methods = ("*",)

    @extend_schema(request=None, responses={200: WebhookEndpointSecretSerializer})
    def post(self, request: Request, pk: uuid.UUID) -> Response:
        with domain_errors():
            endpoint = webhook_endpoints.webhook_endpoint_rotate_secret(
                tenant=request.tenant, endpoint_id=pk
            )
        return Response(WebhookEndpointSecretSerializer(endpoint).data)
