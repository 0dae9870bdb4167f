"""GET /v1/me, and the cursor pagination every tenant list endpoint shares."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.models import Membership
from tenancy.serializers import MeSerializer


class NewestFirstCursorPagination(CursorPagination):
    """`{results, next, previous}`, newest first; `limit` picks the page size (max 100).

    The ordering matches the (tenant, -created_at, -id) indexes, so a page is an index
    range scan whatever its depth. A cursor that does not decode is a 400, not a 404.
    """

    ordering = ("-created_at", "-id")
    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError({"cursor": ["Invalid cursor."]}) from None


class MeView(APIView):
    """Who the token belongs to and the tenants they may select; no tenant is needed."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: MeSerializer}, operation_id="me_retrieve")
    def get(self, request: Request) -> Response:
        memberships = (
            Membership.objects.filter(user=request.user)
            .select_related("tenant")
            .order_by("tenant__name", "tenant_id")
        )
        return Response(MeSerializer({"user": request.user, "memberships": memberships}).data)
