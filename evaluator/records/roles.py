"""The four roles, as groups with permissions. Made after every migrate; users join them in the admin
or with `manage.py rsi_user NAME --role ROLE`."""

from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied

READ = ["view_campaign", "view_attempt", "view_task", "view_benchmark", "view_policy", "view_protocolidentity"]
ROLES = {
    "reviewer": READ + ["tag_attempt"],
    "operator": READ + ["launch_campaign", "start_attempt", "tag_attempt", "extend_vocabulary"],
    "watcher": READ + ["watch_attempt"],
    "intervener": READ + ["watch_attempt", "intervene_attempt"],
}


# What each role lets its holder do, as the error pages tell a user what to ask for.
ROLE_DESCRIPTIONS = {
    "reviewer": "read campaigns, attempts and their evidence, and tag and note episodes",
    "operator": "launch campaigns and start cells, tag episodes and add failure modes (and read)",
    "watcher": "watch live rollouts (and read)",
    "intervener": "watch live rollouts and intervene in them (and read)",
}


def ensure_roles(sender=None, **kwargs) -> None:
    for role, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=role)
        permissions = Permission.objects.filter(content_type__app_label="evaluator", codename__in=codenames)
        group.permissions.set(permissions)


def check_can(user, permission: str) -> None:
    """The explicit authorization of every action: the user's roles grant `permission`, or PermissionDenied."""
    if not user.has_perm(f"evaluator.{permission}"):
        raise PermissionDenied(f"{user} may not {permission.replace('_', ' ')}")
