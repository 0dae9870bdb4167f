"""POST/GET /v1/projects and GET/PATCH/DELETE /v1/projects/{id}: thin views over
projects.services."""

import uuid
from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from projects.serializers import (
    PROJECTS,
    ProjectCreateSerializer,
    ProjectPatchSerializer,
    ProjectSerializer,
    project_representation,
)
from projects.services import (
    project_create,
    project_delete,
    project_pages,
    project_queryset,
    project_rename,
)
from tenancy.api.idempotency import insert_once
from tenancy.api.permissions import tenant_of, user_of
from tenancy.api.schema import location_header
from web.pagination import NewestFirstCursorPagination
from web.representation import RepresentedListView


class ProjectListCreateView(RepresentedListView):
    serializer_class = ProjectSerializer
    representation = PROJECTS
    pagination_class = NewestFirstCursorPagination
    idempotency_key_required = ("POST",)

    def get_queryset(self) -> Any:
        return project_pages(tenant=tenant_of(self.request), fields=self.representation.attributes)

    @extend_schema(
        operation_id="projects_create",
        request=ProjectCreateSerializer,
        parameters=[
            location_header("Path of the created project, `/v1/projects/{id}`.", status=202)
        ],
        responses={
            202: OpenApiResponse(
                ProjectSerializer,
                description="Accepted: the project is provisioning (also a replay).",
            ),
        },
    )
    def post(self, request: Request) -> HttpResponse:
        serializer = ProjectCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return insert_once(
            request,
            lambda key_row: project_create(
                tenant=tenant_of(request),
                user=user_of(request),
                key_row=key_row,
                render=project_representation,
                now=timezone.now(),
                **serializer.validated_data,
            ),
            # The validated body: `{"name": "A"}` and `{"name": "A", "invite": []}` are
            # the same request, so a retry that spells it differently still replays.
            body=serializer.validated_data,
        )


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class ProjectDetailView(APIView):
    owner_methods = ("DELETE",)

    @extend_schema(responses={200: ProjectSerializer})
    def get(self, request: Request, id: uuid.UUID) -> Response:
        project = get_object_or_404(project_queryset(tenant=tenant_of(request)), pk=id)
        return Response(PROJECTS.one(project))

    @extend_schema(request=ProjectPatchSerializer, responses={200: ProjectSerializer})
    def patch(self, request: Request, id: uuid.UUID) -> Response:
        serializer = ProjectPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        project = project_rename(
            tenant=tenant_of(request),
            project_id=id,
            name=serializer.validated_data["name"],
            now=timezone.now(),
        )
        return Response(PROJECTS.one(project))

    @extend_schema(
        responses={204: None},
        description="Deletes the project and its jobs: a pending provision job is cancelled; "
        "one running now finishes and its result is discarded. The project's notifications "
        "stay, without a project. A second delete is 404.",
    )
    def delete(self, request: Request, id: uuid.UUID) -> Response:
        project_delete(tenant=tenant_of(request), project_id=id)
        return Response(status=status.HTTP_204_NO_CONTENT)
