"""The jobs status endpoints: GET /v1/jobs?status= and GET /v1/jobs/{id}; the retry of a
dead-lettered job: POST /v1/jobs/{id}/retry; a task's progress: GET /v1/tasks/{id}.

Every query starts from `tenant_jobs(request)`, so no job of another tenant is reachable.
"""

from uuid import UUID

from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request

from jobs.models import Job
from jobs.registry import task_kinds
from jobs.serializers import JobDetailSerializer, JobRetrySerializer, JobSerializer, TaskSerializer
from jobs.services import job_retry
from jobs.states import FORMER_NAMES, JobStatus
from tenancy.api.idempotency import Answer, answer_once
from tenancy.api.permissions import tenant_of
from web.errors import InvalidInput
from web.pagination import NewestFirstCursorPagination
from web.query import single_query_param


def tenant_jobs(request: Request) -> QuerySet[Job]:
    """The jobs of the tenant the request is authorized for."""
    return Job.objects.filter(tenant=tenant_of(request))


class JobListView(generics.ListAPIView):
    serializer_class = JobSerializer
    pagination_class = NewestFirstCursorPagination
    query_filters = (
        OpenApiParameter(
            "status",
            OpenApiTypes.STR,
            OpenApiParameter.QUERY,
            enum=JobStatus.values,
            description=(
                "Only jobs in this status; an unknown value is a 400. The former names "
                "`enqueued` (running) and `failed` (dead_lettered) are still accepted."
            ),
        ),
    )

    def get_queryset(self) -> QuerySet[Job]:
        jobs = tenant_jobs(self.request)
        wanted = single_query_param(self.request, "status")
        if wanted is None:
            return jobs
        wanted = FORMER_NAMES.get(wanted, wanted)
        if wanted not in JobStatus.values:
            allowed = ", ".join(JobStatus.values)
            raise InvalidInput({"status": [f"Must be one of: {allowed}."]})
        return jobs.filter(status=wanted)


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class JobDetailView(generics.RetrieveAPIView):
    serializer_class = JobDetailSerializer

    def get_object(self) -> Job:
        return get_object_or_404(tenant_jobs(self.request), pk=self.kwargs["id"])


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class JobRetryView(generics.GenericAPIView):
    """POST /v1/jobs/{id}/retry: owners only; a dead-lettered job runs again like a new one."""

    serializer_class = JobSerializer
    owner_methods = ("*",)
    extra_problem_statuses = {"POST": (409,)}

    @extend_schema(operation_id="jobs_retry", request=None, responses={200: JobSerializer})
    def post(self, request: Request, id: UUID) -> HttpResponse:
        JobRetrySerializer(data=request.data).is_valid(raise_exception=True)

        def retry() -> Answer:
            job = job_retry(tenant=tenant_of(request), job_id=id, now=timezone.now())
            return Answer.of(status.HTTP_200_OK, JobSerializer(job).data, resource=f"/v1/jobs/{id}")

        return answer_once(request, retry)


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class TaskDetailView(generics.RetrieveAPIView):
    """GET /v1/tasks/{id}: a task's status and progress (`done` of `total`)."""

    serializer_class = TaskSerializer

    def get_object(self) -> Job:
        tasks = tenant_jobs(self.request).filter(kind__in=task_kinds())
        return get_object_or_404(tasks, pk=self.kwargs["id"])
