"""Mirror the validated task catalogs into the database."""

from django.db import transaction

from evaluator.protocol.catalogs import Catalog, catalog_benchmarks, load_catalog, plain
from evaluator.records.models import Benchmark, Task


@transaction.atomic
def sync_catalog(catalog: Catalog) -> Benchmark:
    benchmark, _ = Benchmark.objects.update_or_create(
        name=catalog.benchmark,
        defaults={
            "title": catalog.title,
            "catalog_file": catalog.filename,
            "catalog_sha256": catalog.sha256,
            "upstream": catalog.provenance["upstream"],
        },
    )
    for position, spec in enumerate(catalog.tasks.values()):
        Task.objects.update_or_create(
            benchmark=benchmark,
            name=spec.name,
            defaults={
                "position": position,
                "env_id": spec.env_id,
                "native_horizon": spec.native_horizon,
                "instruction": spec.instruction,
                "robot": spec.robot,
                "camera": spec.camera,
                "rgb_shape": list(spec.rgb_shape),
                "control_hz": spec.control_hz,
                "controller": spec.controller,
                "details": plain(spec.details),
                "in_catalog": True,
            },
        )
    # Tasks dropped from the catalog stay for the attempts that used them.
    benchmark.tasks.exclude(name__in=list(catalog.tasks)).update(in_catalog=False)
    return benchmark


def sync_all_catalogs() -> list[Benchmark]:
    return [sync_catalog(load_catalog(name)) for name in catalog_benchmarks()]
