from django.contrib import admin
from django.utils import timezone

from evaluator.records import models


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class DecisionInline(ReadOnlyInline):
    model = models.Decision
    fields = ("index", "kind", "actor", "observation_step", "executed", "latency_ms", "violation")
    readonly_fields = fields


class InterventionInline(ReadOnlyInline):
    model = models.Intervention
    fields = ("kind", "username", "user", "step_index", "note", "created_at")
    readonly_fields = fields


class ArtifactInline(ReadOnlyInline):
    model = models.Artifact
    fields = ("kind", "path", "sha256", "size")
    readonly_fields = fields


class ViewOnlyAdmin(admin.ModelAdmin):
    """Evidence and what produced it are written by RSI alone: the admin shows them and changes nothing."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.ApiToken)
class ApiTokenAdmin(ViewOnlyAdmin):
    """Users make and revoke their own tokens (/account/tokens/); the admin sees them, and revokes any."""

    list_display = ("name", "user", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("user", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")
    exclude = ("key_hash",)
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} token(s) revoked.")


@admin.register(models.ProtocolIdentity)
class ProtocolIdentityAdmin(ViewOnlyAdmin):
    list_display = ("protocol_id", "benchmark", "created_at")
    list_filter = ("benchmark",)
    search_fields = ("protocol_id",)
    readonly_fields = ("protocol_id", "benchmark", "configuration", "created_at")


class TaskInline(ReadOnlyInline):
    model = models.Task
    fields = ("name", "env_id", "native_horizon", "robot", "in_catalog")
    readonly_fields = fields


@admin.register(models.Benchmark)
class BenchmarkAdmin(ViewOnlyAdmin):
    list_display = ("name", "title", "catalog_file", "catalog_sha256", "loaded_at")
    readonly_fields = ("name", "title", "catalog_file", "catalog_sha256", "upstream", "loaded_at")
    inlines = [TaskInline]


@admin.register(models.Task)
class TaskAdmin(ViewOnlyAdmin):
    list_display = ("name", "benchmark", "env_id", "native_horizon", "robot", "camera", "in_catalog")
    list_filter = ("benchmark", "robot", "in_catalog")
    search_fields = ("name", "env_id")
    readonly_fields = [f.name for f in models.Task._meta.fields]


@admin.register(models.Policy)
class PolicyAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "spec", "identity", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "spec", "identity")

    def get_readonly_fields(self, request, obj=None):
        # Once a campaign's plan names it, what it is cannot change (only its description).
        if obj is not None and obj.is_referenced():
            return [f.name for f in models.Policy._meta.fields if f.name != "description"]
        return ("identity", "created_at")

    def has_delete_permission(self, request, obj=None) -> bool:
        # Only an unreferenced policy's own page offers Delete: no bulk action that the database would refuse.
        return obj is not None and not obj.is_referenced()

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions


@admin.register(models.Campaign)
class CampaignAdmin(admin.ModelAdmin):
    # Campaigns are launched from the form or `manage.py evaluate`, which check the plan.
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    list_display = ("name", "benchmark", "protocol", "policy", "mode", "seed", "created_at")
    list_filter = ("benchmark", "mode")
    search_fields = ("name", "protocol__protocol_id")

    def get_readonly_fields(self, request, obj=None):
        # The plan is frozen once the campaign exists.
        if obj is None:
            return ("created_at",)
        return [f.name for f in models.Campaign._meta.fields if f.name != "name"]


@admin.register(models.Attempt)
class AttemptAdmin(ViewOnlyAdmin):
    list_display = (
        "__str__",
        "campaign",
        "task",
        "status",
        "outcome",
        "error_type",
        "success",
        "environment_steps",
        "policy_calls",
        "autonomous",
        "rerun_of",
    )
    list_filter = ("status", "outcome", "error_type", "autonomous", "task__benchmark")
    search_fields = ("task__name", "campaign__name")
    inlines = [DecisionInline, InterventionInline, ArtifactInline]

    def get_inline_instances(self, request, obj=None):
        inlines = super().get_inline_instances(request, obj)
        if obj is not None and obj.is_finished:
            for inline in inlines:  # a finished attempt has hundreds of rows: shown on demand
                inline.classes = ["collapse"]
        return inlines


@admin.register(models.Decision)
class DecisionAdmin(ViewOnlyAdmin):
    list_display = ("attempt", "index", "kind", "actor", "executed", "latency_ms")
    list_filter = ("kind", "actor")
    readonly_fields = [f.name for f in models.Decision._meta.fields]


@admin.register(models.Step)
class StepAdmin(ViewOnlyAdmin):
    list_display = ("attempt", "index", "decision", "native_success", "terminated", "truncated")
    list_filter = ("native_success",)
    readonly_fields = [f.name for f in models.Step._meta.fields]


@admin.register(models.Intervention)
class InterventionAdmin(ViewOnlyAdmin):
    list_display = ("attempt", "kind", "username", "step_index", "created_at")
    list_filter = ("kind",)
    readonly_fields = [f.name for f in models.Intervention._meta.fields]


@admin.register(models.Artifact)
class ArtifactAdmin(ViewOnlyAdmin):
    list_display = ("attempt", "kind", "path", "size", "sha256")
    list_filter = ("kind",)
    readonly_fields = [f.name for f in models.Artifact._meta.fields]


@admin.register(models.Replay)
class ReplayAdmin(ViewOnlyAdmin):
    list_display = ("attempt", "verdict", "steps_compared", "human_steps", "requested_by", "started_at")
    list_filter = ("verdict",)
    readonly_fields = [f.name for f in models.Replay._meta.fields]


@admin.register(models.CampaignCheck)
class CampaignCheckAdmin(ViewOnlyAdmin):
    list_display = ("campaign", "cells", "pick_seed", "requested_by", "created_at")
    readonly_fields = [f.name for f in models.CampaignCheck._meta.fields]
