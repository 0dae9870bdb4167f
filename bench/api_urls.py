"""The production URLconf plus POST /bench/bare-insert: one INSERT, no auth, no throttle."""

from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as production_urlpatterns
from tenancy.models import Tenant


class BareInsertView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    def post(self, request: Request) -> Response:
        tenant = Tenant.objects.create(name="bare")
        return Response({"id": str(tenant.id)}, status=201)


urlpatterns = [
    *production_urlpatterns,
    path("bench/bare-insert", BareInsertView.as_view()),
]
