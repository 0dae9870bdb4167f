from django.urls import path

from projects.views import ProjectDetailView, ProjectListCreateView

urlpatterns = [
    path("projects", ProjectListCreateView.as_view(), name="project-list"),
    path("projects/<uuid:id>", ProjectDetailView.as_view(), name="project-detail"),
]
