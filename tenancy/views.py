"""GET/PATCH /v1/me and PATCH /v1/tenant: thin views over tenancy.me."""

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy.api.permissions import bound_tenant_of, tenant_of, user_of
from tenancy.me import me_of, tenant_rename, user_rename
from tenancy.quotas import usage_report
from tenancy.serializers import (
    MePatchSerializer,
    MeSerializer,
    TenantPatchSerializer,
    TenantSerializer,
    UsageSerializer,
)


class MeView(APIView):
    """Who the token belongs to and the tenants they may select; no tenant is needed."""

    permission_classes = [IsAuthenticated]

    def _me(self, request: Request) -> Response:
        me = me_of(user_of(request), bound_tenant_id=bound_tenant_of(request))
        return Response(MeSerializer(me).data)

    @extend_schema(responses={200: MeSerializer}, operation_id="me_retrieve")
    def get(self, request: Request) -> Response:
        return self._me(request)

    @extend_schema(
        request=MePatchSerializer,
        responses={200: MeSerializer},
        operation_id="me_partial_update",
        description="Sets the name you go by (up to 150 characters; blank clears it).",
    )
    def patch(self, request: Request) -> Response:
        serializer = MePatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user_rename(user=user_of(request), name=serializer.validated_data["name"])
        return self._me(request)


class TenantView(APIView):
    """The selected tenant (X-Tenant-ID, or the caller's only one)."""

    owner_methods = ("PATCH",)

    @extend_schema(
        request=TenantPatchSerializer,
        responses={200: TenantSerializer},
        operation_id="tenant_partial_update",
        description="Renames the selected tenant (owners only; a member is 403).",
    )
    def patch(self, request: Request) -> Response:
        serializer = TenantPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = tenant_rename(tenant=tenant_of(request), name=serializer.validated_data["name"])
        return Response(TenantSerializer(tenant).data)


class UsageView(APIView):
    """The selected tenant's plan and its use this period (owners and members)."""

    @extend_schema(
        responses={200: UsageSerializer},
        operation_id="usage_retrieve",
        description=(
            "The tenant's plan, the current period (a calendar month, UTC) and each limit "
            "with its use: `notifications_per_month` and `messages_per_month` count this "
            "period, `webhook_endpoints` and `members` what the tenant has now; rates and "
            "retention have no use (null). A null limit is unlimited."
        ),
    )
    def get(self, request: Request) -> Response:
        return Response(UsageSerializer(usage_report(tenant_of(request))).data)
