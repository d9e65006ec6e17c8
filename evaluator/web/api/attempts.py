"""Attempts: the run table's search (the same query parameters as the attempts page) and one attempt's stored
record with links to its artifacts."""

from ninja import Router

from evaluator.records.queries import attempt_record
from evaluator.records.tagging import current_tags, tag_history
from evaluator.web.access import viewable_attempt
from evaluator.web.api.common import link, operation, page_of
from evaluator.web.api.schemas import AttemptOut, AttemptSearchOut
from evaluator.web.views import review
from evaluator.web.views.attempts import export_row, search_attempts

router = Router(tags=["attempts"])


@operation(router, "GET", "/attempts", permission="view_attempt", response=AttemptSearchOut)
def search(
    request,
    benchmark: str = "",
    task: str = "",
    policy: str = "",
    protocol: str = "",
    outcome: str = "",
    error_type: str = "",
    autonomous: str = "",
    since: str = "",
    until: str = "",
    tag: str = "",
    cell: str = "",
    campaign: int | None = None,
    sort: str = "-created",
    page: int = 1,
):
    """Every attempt matching the filters (task and policy match a part of the name; since and until are
    YYYY-MM-DD; autonomous is yes or no; tag: a failure mode tagged on it now; cell: a full matrix's dimension and
    its level, variant=darker), sorted by a column of the run table (- in front: descending)."""
    _, queryset, _ = search_attempts(request)
    found, count, pages = page_of(queryset, page)
    tags = current_tags(a.pk for a in found)
    rows = [{**export_row(a, tags), "url": link(request, "evaluator:review", a.pk)} for a in found]
    return {"count": count, "page": page, "pages": pages, "attempts": rows}


@operation(router, "GET", "/attempts/{attempt_id}", permission="view_attempt", response=AttemptOut)
def get_attempt(request, attempt_id: int):
    """The attempt's stored record, as `manage.py evaluate --json` prints it, and its artifacts' download links."""
    attempt = viewable_attempt(request, attempt_id)
    record = attempt_record(attempt)
    return {
        "record": record,
        "tags": tag_history(attempt),
        "campaign": attempt.campaign_id,
        "url": link(request, "evaluator:review", attempt.pk),
        "artifacts": {
            a.name: link(request, "api:attempt_file", attempt.pk, a.name) for a in attempt.artifacts.order_by("path")
        },
    }


@operation(
    router,
    "GET",
    "/attempts/{attempt_id}/files/{path:path}",
    permission="view_attempt",
    file="application/octet-stream",
    url_name="attempt_file",
)
def attempt_file(request, attempt_id: int, path: str):
    """One of the attempt's registered artifacts (video, frames, manifest, logs), by its name in the evidence
    folder, with HTTP range requests: the review page's file, readable with a token."""
    return review.artifact(request, attempt_id, path)
