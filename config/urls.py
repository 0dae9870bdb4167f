from django.contrib import admin
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from operations.health import healthz
from operations.metrics import metrics
from web.problems import not_found
from webhooks.portal.views import portal_page

handler400 = "web.problems.bad_request"
handler403 = "web.problems.permission_denied"
handler404 = "web.problems.not_found"
handler500 = "web.problems.server_error"

# The product serves no page at "/": the admin's "View site" link led to a 404.
admin.site.site_url = None

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    # The customers' portal: a static page on the API below.
    path("portal/", portal_page, name="portal"),
    path("v1/schema", SpectacularAPIView.as_view(), name="schema"),
    path("v1/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("v1/", include("tenancy.urls")),
    path("v1/", include("projects.urls")),
    path("v1/", include("jobs.urls")),
    path("v1/", include("notifications.urls")),
    path("v1/", include("webhooks.urls")),
    path("v1/", include("people.urls")),
    # The front door: signup, verify, invitations and accept.
    path("v1/", include("onboarding.urls")),
    # Last: any other /v1/ path. With DEBUG on, Django answers a routing miss with its HTML
    # technical page and never calls handler404; an API client must get a problem document.
    # Exempt from CSRF as a missing route is: a POST to it is a 404, not a CSRF 403.
    re_path(r"^v1/", csrf_exempt(not_found)),
]
