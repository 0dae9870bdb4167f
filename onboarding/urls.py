from django.urls import path

from onboarding.views import (
    InvitationAcceptView,
    InvitationDetailView,
    InvitationListView,
    InvitationPreviewView,
    SigninVerifyView,
    SigninView,
    SignupVerifyView,
    SignupView,
)

urlpatterns = [
    path("signup", SignupView.as_view(), name="signup"),
    path("signup/verify", SignupVerifyView.as_view(), name="signup-verify"),
    path("invitations", InvitationListView.as_view(), name="invitation-list"),
    path("invitations/accept", InvitationAcceptView.as_view(), name="invitation-accept"),
    path("invitations/preview", InvitationPreviewView.as_view(), name="invitation-preview"),
    path("signin", SigninView.as_view(), name="signin"),
    path("signin/verify", SigninVerifyView.as_view(), name="signin-verify"),
    path("invitations/<uuid:id>", InvitationDetailView.as_view(), name="invitation-detail"),
]
