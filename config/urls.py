from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.health import healthz
from config.metrics import metrics

handler400 = "config.problems.bad_request"
handler403 = "config.problems.permission_denied"
handler404 = "config.problems.not_found"
handler500 = "config.problems.server_error"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("v1/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("v1/", include("tenancy.urls")),
    path("v1/", include("projects.urls")),
    path("v1/", include("jobs.urls")),
    path("v1/", include("notifications.urls")),
]
