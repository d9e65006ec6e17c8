"""Explicit authorization helpers of the views: a permission the user's roles must grant, and an attempt a reviewer
may see."""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from evaluator.records.models import Attempt
from evaluator.records.roles import check_can


def require(request: HttpRequest, permission: str) -> None:
    """PermissionDenied (a 403 page naming the role to ask for) unless the user's roles grant `permission`."""
    check_can(request.user, permission)


def viewable_attempt(request: HttpRequest, attempt_id: int) -> Attempt:
    """The attempt with what its pages show of it, if the user may view attempts; a 404 if there is none."""
    require(request, "view_attempt")
    return get_object_or_404(
        Attempt.objects.select_related("campaign__policy", "campaign__protocol", "campaign__benchmark", "task"),
        pk=attempt_id,
    )
