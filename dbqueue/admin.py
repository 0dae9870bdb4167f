from django.contrib import admin

from dbqueue.models import ConcurrencySlot, WorkerTotal
from web.admin import ReadOnlyModelAdmin


@admin.register(WorkerTotal)
class WorkerTotalAdmin(ReadOnlyModelAdmin):
    """The workers' cumulative counters, for support staff without a Prometheus: read-only,
    since only the workers themselves may count."""

    list_display = ("worker", "name", "total", "updated_at")
    list_filter = ("worker",)
    ordering = ("worker", "name")


@admin.register(ConcurrencySlot)
class ConcurrencySlotAdmin(ReadOnlyModelAdmin):
    """Which tick holds which of an endpoint's delivery slots, and until when: an endpoint
    whose rows wait while no tick delivers to it is held by a tick that died or froze,
    until the lease shown here lapses. Read-only: only the holders may take or free them."""

    list_display = ("scope", "slot", "holder", "held_until")
    search_fields = ("scope",)
    ordering = ("scope", "slot")

    @admin.display(description="held until")
    def held_until(self, slot: ConcurrencySlot) -> str:
        return slot.held_until.isoformat() if slot.holder else "free"
