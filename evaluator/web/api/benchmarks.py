"""Benchmarks with their readiness on this deployment, and their tasks."""

from django.shortcuts import get_object_or_404
from ninja import Router

from evaluator.protocol.identity import configure
from evaluator.protocol.registry import PROTOCOLS
from evaluator.readiness.verdicts import readiness
from evaluator.records.models import Benchmark
from evaluator.web.api.common import operation
from evaluator.web.api.schemas import BenchmarkOut, TaskOut

router = Router(tags=["benchmarks"])


@operation(router, "GET", "/benchmarks", permission="view_benchmark", response=list[BenchmarkOut])
def list_benchmarks(request):
    """Every benchmark, whether it can run here (and why not), its default protocol and its tasks."""
    rows = []
    for benchmark in Benchmark.objects.prefetch_related("tasks").order_by("name"):
        verdict = readiness(benchmark.name, wait=False)
        rows.append(
            {
                "name": benchmark.name,
                "title": benchmark.title,
                "ready": None if verdict.checking else verdict.ready,
                "readiness": verdict.reason,
                "default_protocol": configure(benchmark.name).protocol_id if benchmark.name in PROTOCOLS else None,
                "tasks": [t.name for t in benchmark.tasks.all() if t.in_catalog],
            }
        )
    return rows


@operation(router, "GET", "/benchmarks/{name}/tasks", permission="view_task", response=list[TaskOut])
def list_tasks(request, name: str):
    """A benchmark's tasks in its catalog: horizon, instruction, robot and the frame size its policy sees."""
    benchmark = get_object_or_404(Benchmark, name=name)
    return [
        {
            "name": t.name,
            "env_id": t.env_id,
            "native_horizon": t.native_horizon,
            "instruction": t.instruction,
            "robot": t.robot,
            "rgb_shape": list(t.rgb_shape),
        }
        for t in benchmark.tasks.filter(in_catalog=True).order_by("position")
    ]
