"""GET /v1/me."""

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.models import Membership
from tenancy.serializers import MeSerializer


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
