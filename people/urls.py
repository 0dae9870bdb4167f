from django.urls import path

from people import views

urlpatterns = [
    path("recipients", views.RecipientListView.as_view(), name="recipient-list"),
    path(
        "recipients/<str:id>",
        views.RecipientDetailView.as_view(),
        name="recipient-detail",
    ),
    path(
        "recipients/<str:id>/preferences",
        views.RecipientPreferencesView.as_view(),
        name="recipient-preferences",
    ),
    path("unsubscribe/<str:id>", views.UnsubscribeView.as_view(), name="unsubscribe"),
]
