from django.urls import path

from jobs.views import JobDetailView, JobListView, JobRetryView, TaskDetailView

urlpatterns = [
    path("jobs", JobListView.as_view(), name="job-list"),
    path("jobs/<uuid:id>", JobDetailView.as_view(), name="job-detail"),
    path("jobs/<uuid:id>/retry", JobRetryView.as_view(), name="job-retry"),
    path("tasks/<uuid:id>", TaskDetailView.as_view(), name="task-detail"),
]
