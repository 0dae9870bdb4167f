"""Projects."""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from tenancy.models import Tenant

# The job kind that provisions a new project (projects.provisioning registers its handler).
PROVISION_KIND = "provision"


class ProjectStatus(models.TextChoices):
    PROVISIONING = "provisioning", "Provisioning"
    ACTIVE = "active", "Active"
    FAILED = "failed", "Failed"


class Project(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=ProjectStatus.choices, default=ProjectStatus.PROVISIONING
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(
                fields=["tenant", "-created_at", "-id"], name="project_tenant_created_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ProjectStatus.values), name="project_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name
