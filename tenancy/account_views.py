"""The members and tokens API: thin views over tenancy.members and tenancy.tokens.

Member routes act in the selected tenant (IsTenantMember); token routes act on the caller's
own tokens and need no tenant, like GET /v1/me. Ids in their paths are matched as text and
read here, so a malformed id answers 404 after authentication, like a missing one.
"""

from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tenancy import members, tokens
from tenancy.account_serializers import (
    MemberPatchSerializer,
    MemberSerializer,
    TokenCreateSerializer,
    TokenSecretSerializer,
    TokenSerializer,
)
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import bound_tenant_of, membership_of, tenant_of, user_of
from tenancy.api.schema import location_header
from tenancy.models import ApiToken, Membership
from web.pagination import NewestFirstCursorPagination

_MAX_ID_DIGITS = 18  # a bigint


def _path_id(raw: str) -> int:
    # isdigit() alone admits other scripts' digits, which int() would read.
    if not (raw.isascii() and raw.isdigit() and len(raw) <= _MAX_ID_DIGITS):
        raise Http404("No resource matches this URL.")
    return int(raw)


def _id_parameter(description: str) -> OpenApiParameter:
    return OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description=description)


_MEMBER_ID = _id_parameter("The member's user id (`user_id`).")
_TOKEN_ID = _id_parameter("The token's id.")


class MemberListView(ListAPIView):
    pagination_class = NewestFirstCursorPagination
    serializer_class = MemberSerializer

    def get_queryset(self) -> QuerySet[Membership]:
        return members.members_of(tenant_of(self.request))

    @extend_schema(operation_id="members_list", responses={200: MemberSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return self.list(request)


class MemberDetailView(APIView):
    owner_methods = ("PATCH",)  # DELETE: owners, and a member removing themself (leave)
    extra_problem_statuses = {"PATCH": (409,), "DELETE": (409,)}

    @extend_schema(
        operation_id="members_partial_update",
        parameters=[_MEMBER_ID],
        request=MemberPatchSerializer,
        responses={200: MemberSerializer},
    )
    def patch(self, request: Request, pk: str) -> Response:
        serializer = MemberPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        member = members.member_set_role(
            actor=membership_of(request),
            user_id=_path_id(pk),
            role=serializer.validated_data["role"],
        )
        return Response(MemberSerializer(member).data)

    @extend_schema(operation_id="members_destroy", parameters=[_MEMBER_ID], responses={204: None})
    def delete(self, request: Request, pk: str) -> Response:
        removing_self = pk == str(membership_of(request).user_id)
        members.member_removal_allowed(actor=membership_of(request), removing_self=removing_self)
        members.member_remove(actor=membership_of(request), user_id=_path_id(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenListView(ListAPIView):
    permission_classes = [IsAuthenticated]
    pagination_class = NewestFirstCursorPagination
    serializer_class = TokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return tokens.tokens_of(
            user_of(self.request), now=timezone.now(), bound_to=bound_tenant_of(self.request)
        )

    @extend_schema(operation_id="tokens_list", responses={200: TokenSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return self.list(request)

    @extend_schema(
        operation_id="tokens_create",
        request=TokenCreateSerializer,
        description="A long-lived API token, optionally ending after `expires_in_days` and "
        "bound to one tenant (`tenant_id`, 403 if you are not a member of it). A token that "
        "is itself bound makes only tokens bound to its tenant.",
        parameters=[
            location_header("Path of the new token, `/v1/tokens/{id}` (DELETE revokes it).")
        ],
        responses={201: TokenSecretSerializer},
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = TokenCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def issue() -> Answer:
            token = tokens.token_issue(
                user=user_of(request),
                name=serializer.validated_data["name"],
                expires_in_days=serializer.validated_data.get("expires_in_days"),
                tenant_id=serializer.validated_data.get("tenant_id"),
                caller_tenant_id=bound_tenant_of(request),
                now=timezone.now(),
            )
            data = TokenSecretSerializer(token).data
            # Named by its id and the list that shows it: /v1/tokens/{id} has no GET.
            return Answer.of(
                201,
                data,
                resource=f"token {token.id} (GET /v1/tokens lists it)",
                located_at=f"/v1/tokens/{token.id}",
                location=True,
                shows_secret=True,
            )

        # A token belongs to its user, not to a tenant: its keys are the user's.
        scope = f"user:{request.user.pk}"
        return answer_once(request, issue, body=serializer.validated_data, scope=scope)


class CurrentTokenView(APIView):
    """Sign out: the calling token ends here."""

    permission_classes = [IsAuthenticated]
    extra_problem_statuses = {"DELETE": (409,)}

    @extend_schema(
        operation_id="tokens_current_destroy",
        responses={204: None},
        description="Revokes the token this request is made with (signing out): its next "
        "request is a 401. 409 `token-not-revocable` for an identity provider's JWT.",
    )
    def delete(self, request: Request) -> Response:
        tokens.token_revoke_current(credential=request.auth, now=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="tokens_destroy", parameters=[_TOKEN_ID], responses={204: None})
    def delete(self, request: Request, pk: str) -> Response:
        tokens.token_revoke(
            user=user_of(request),
            token_id=_path_id(pk),
            now=timezone.now(),
            bound_to=bound_tenant_of(request),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
