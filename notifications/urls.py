from django.urls import path

from notifications import views

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
]
