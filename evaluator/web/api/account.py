"""Who the caller is: the user a token or session acts as, with its roles."""

from ninja import Router

from evaluator.records.roles import ROLES
from evaluator.web.api.common import AUTHENTICATED, operation
from evaluator.web.api.schemas import MeOut

router = Router(tags=["account"])


@operation(router, "GET", "/me", permission=AUTHENTICATED, response=MeOut)
def me(request):
    """The caller's user name, roles and permissions; how it authenticated."""
    user = request.auth
    roles = sorted(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    permissions = sorted(p.split(".", 1)[1] for p in user.get_all_permissions() if p.startswith("evaluator."))
    via = "token" if request.headers.get("Authorization", "").lower().startswith("bearer ") else "session"
    return {"username": user.username, "roles": roles, "permissions": permissions, "via": via}
