from django.urls import path

from tenancy.account_views import MemberDetailView, MemberListView, TokenDetailView, TokenListView
from tenancy.views import MeView

urlpatterns = [
    path("me", MeView.as_view(), name="me"),
]

# --- Members and tokens --------------------------------------------------------------------
urlpatterns += [
    path("members", MemberListView.as_view(), name="members"),
    path("members/<str:pk>", MemberDetailView.as_view(), name="member"),
    path("tokens", TokenListView.as_view(), name="tokens"),
    path("tokens/<str:pk>", TokenDetailView.as_view(), name="token"),
]
