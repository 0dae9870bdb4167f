from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "projects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs.registry import job_dead_lettered, job_retried, register
        from projects.models import PROVISION_KIND
        from projects.provisioning import PROVISION, project_job_dead_lettered, project_job_retried

        register(PROVISION_KIND, PROVISION)
        job_dead_lettered.connect(project_job_dead_lettered, dispatch_uid="project-failed")
        job_retried.connect(project_job_retried, dispatch_uid="project-reprovisioned")
