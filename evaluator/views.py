from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from evaluator.models import Attempt, Benchmark, Campaign
from evaluator.protocol.identity import FAMILIES, configure


def home(request: HttpRequest) -> HttpResponse:
    benchmarks = Benchmark.objects.annotate(
        task_count=Count("tasks", filter=Q(tasks__in_catalog=True))
    ).prefetch_related("tasks")
    rows = [
        {
            "benchmark": b,
            "default_protocol": configure(b.name).protocol_id if b.name in FAMILIES else None,
            "tasks": [t for t in b.tasks.all() if t.in_catalog],
        }
        for b in benchmarks
    ]
    context = {
        "rows": rows,
        "campaigns": Campaign.objects.select_related("benchmark", "policy", "protocol")[:10],
        "attempt_counts": dict(Attempt.objects.values_list("status").annotate(n=Count("id"))),
        "attempts": Attempt.objects.select_related("task__benchmark", "campaign__policy", "campaign__protocol")
        .order_by("-created_at")[:20],
    }
    return render(request, "evaluator/home.html", context)
