from django.urls import path

from webhooks import views
from webhooks.portal import views as portal

urlpatterns = [
    path("applications", views.ApplicationListView.as_view(), name="application-list"),
    path(
        "applications/<str:key>",
        views.ApplicationDetailView.as_view(),
        name="application-detail",
    ),
    path(
        "webhook-endpoints", views.WebhookEndpointListView.as_view(), name="webhook-endpoint-list"
    ),
    path(
        "webhook-endpoints/<uuid:pk>",
        views.WebhookEndpointDetailView.as_view(),
        name="webhook-endpoint-detail",
    ),
    path(
        "webhook-endpoints/<uuid:pk>/rotate-secret",
        views.WebhookEndpointRotateSecretView.as_view(),
        name="webhook-endpoint-rotate-secret",
    ),
    path(
        "webhook-endpoints/<uuid:pk>/secret",
        views.WebhookEndpointSecretView.as_view(),
        name="webhook-endpoint-secret",
    ),
    path("event-types", views.EventTypeListView.as_view(), name="event-type-list"),
    path("event-types/<uuid:pk>", views.EventTypeDetailView.as_view(), name="event-type-detail"),
    path("messages", views.MessageListView.as_view(), name="message-list"),
    path("messages/<uuid:pk>", views.MessageDetailView.as_view(), name="message-detail"),
    path(
        "messages/<uuid:pk>/attempts",
        views.MessageAttemptsView.as_view(),
        name="message-attempts",
    ),
    path(
        "messages/<uuid:pk>/endpoints",
        views.MessageEndpointsView.as_view(),
        name="message-endpoints",
    ),
    path(
        "messages/<uuid:pk>/endpoints/<uuid:endpoint_id>/resend",
        views.MessageResendView.as_view(),
        name="message-resend",
    ),
    path(
        "webhook-endpoints/<uuid:pk>/recover",
        views.WebhookEndpointRecoverView.as_view(),
        name="webhook-endpoint-recover",
    ),
    path(
        "applications/<str:pk>/portal-sessions",
        portal.PortalSessionCreateView.as_view(),
        name="portal-session-create",
    ),
    path("portal-sessions/current", portal.PortalCallerView.as_view(), name="portal-caller"),
    path(
        "portal-sessions/<uuid:pk>",
        portal.PortalSessionDetailView.as_view(),
        name="portal-session-detail",
    ),
]
