from django.urls import path

from tenancy.account_views import (
    CurrentTokenView,
    MemberDetailView,
    MemberListView,
    TokenDetailView,
    TokenListView,
)
from tenancy.views import MeView, TenantView, UsageView

urlpatterns = [
    path("me", MeView.as_view(), name="me"),
    path("tenant", TenantView.as_view(), name="tenant"),
    path("usage", UsageView.as_view(), name="usage"),
]

# --- Members and tokens --------------------------------------------------------------------
urlpatterns += [
    path("members", MemberListView.as_view(), name="members"),
    path("members/<str:pk>", MemberDetailView.as_view(), name="member"),
    path("tokens", TokenListView.as_view(), name="tokens"),
    # Before tokens/<pk>: "current" is the calling token, never an id.
    path("tokens/current", CurrentTokenView.as_view(), name="token-current"),
    path("tokens/<str:pk>", TokenDetailView.as_view(), name="token"),
]
