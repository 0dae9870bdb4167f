from django.urls import path

from notifications import recipient_views, views

urlpatterns = [
    path("notifications", views.NotificationListView.as_view(), name="notification-list"),
    path(
        "notifications/<uuid:pk>",
        views.NotificationDetailView.as_view(),
        name="notification-detail",
    ),
    path(
        "notifications/<uuid:pk>/retry",
        views.NotificationRetryView.as_view(),
        name="notification-retry",
    ),
    path(
        "notifications/<uuid:pk>/deliveries",
        views.NotificationDeliveriesView.as_view(),
        name="notification-deliveries",
    ),
    path("deliveries", views.DeliveryListView.as_view(), name="delivery-list"),
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
        "messages/<uuid:pk>/endpoints/<uuid:endpoint_id>/resend",
        views.MessageResendView.as_view(),
        name="message-resend",
    ),
    path(
        "webhook-endpoints/<uuid:pk>/recover",
        views.WebhookEndpointRecoverView.as_view(),
        name="webhook-endpoint-recover",
    ),
    path("recipients", recipient_views.RecipientListView.as_view(), name="recipient-list"),
    path(
        "recipients/<str:id>",
        recipient_views.RecipientDetailView.as_view(),
        name="recipient-detail",
    ),
    path(
        "recipients/<str:id>/preferences",
        recipient_views.RecipientPreferencesView.as_view(),
        name="recipient-preferences",
    ),
    path("unsubscribe/<str:id>", recipient_views.UnsubscribeView.as_view(), name="unsubscribe"),
]
