"""A user's own page: their personal API tokens, made (shown once), listed and revoked."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from evaluator.records.models import ApiToken
from evaluator.records.tokens import TokenRefused, do_create_token, do_revoke_token
from evaluator.web.account_forms import TokenForm


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """Any logged-in user may hold tokens: a token acts with its user's roles and no more."""
    form = TokenForm(request.POST or None)
    made = None
    if request.method == "POST" and form.is_valid():
        try:
            token, made = do_create_token(request.user, form.cleaned_data["name"], form.cleaned_data["expires_in_days"])
        except TokenRefused as exc:
            form.add_error(None, str(exc))
        else:
            form = TokenForm()
    rows = ApiToken.objects.filter(user=request.user)
    response = render(
        request,
        "evaluator/tokens.html",
        {
            "form": form,
            "made": made,
            "tokens": rows,
            "now": timezone.now(),
            "site_url": request.build_absolute_uri("/").rstrip("/"),
        },
    )
    if made:  # the page that shows the token once must not be kept by a cache
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = do_revoke_token(request.user, token_id)
    except TokenRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Token {token.name!r} ({token.prefix}…) is revoked: it authenticates no more.")
    return redirect("evaluator:tokens")
