import json

from django.core.management.base import BaseCommand

from evaluator.readiness.determinism import determinism_probe
from evaluator.readiness.doctor import host_report


class Command(BaseCommand):
    help = (
        "Rendering and runtime preflight: Vulkan devices, SAPIEN's renderer, ray tracing, the OptiX denoiser, "
        "EGL / MUJOCO_GL, each benchmark's Python environment, and a verdict per benchmark "
        "(environment/RENDERING.md). Exits 0; the verdicts say what can run here. With --determinism, each "
        "benchmark that can run here is also run twice from the same seed and its observations compared."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")
        parser.add_argument(
            "--determinism", action="store_true", help="two identical short runs per ready benchmark, compared"
        )

    def handle(self, *args, **options):
        report = host_report()
        if options["determinism"]:
            ready = [name for name, verdict in report["benchmarks"].items() if verdict["ready"]]
            report["determinism"] = {name: determinism_probe(name) for name in ready}
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        vulkan = report["vulkan"]
        for way in ("with_layer", "without_layer"):
            listing = vulkan[way]
            devices = ", ".join(
                f"{d['name']} ({d['type']}, {d['driver']}; external fd {'yes' if d['external_fd'] else 'no'}, "
                f"ray tracing {'yes' if d['ray_tracing'] else 'no'})"
                for d in listing["devices"]
            )
            self.stdout.write(f"Vulkan {way.replace('_', ' '):<15}{devices or listing['reason']}")
        self.stdout.write(f"SAPIEN would use      {vulkan.get('sapien_would_use') or '-'}")
        layer = report["vulkan_layer"]
        self.stdout.write(
            f"RSI Vulkan layer      {'built' if layer['built'] else 'not built (make vulkan-layer)'}, "
            f"{'enabled' if layer['enabled'] else 'disabled'}"
        )
        for way in ("with_layer", "without_layer"):
            renderer = report["sapien_renderer"][way]
            verdict = "ok" if renderer["ok"] else "fails: " + renderer["reason"]
            self.stdout.write(f"SAPIEN {way.replace('_', ' '):<15}{verdict}")
        optix = any(report["optix_denoiser"].values())
        self.stdout.write(f"OptiX denoiser        {'present' if optix else 'absent (/usr/share/nvidia/nvoptix.bin)'}")
        gl = report["mujoco_gl"]
        self.stdout.write(f"MuJoCo GL             {gl['backend']}: {'ok' if gl['ok'] else 'fails'}")
        for name, env in report["environments"].items():
            if name != "simpler_env_upstream":
                self.stdout.write(f"{name + ' env':<22}{env['python']}  {env['packages']}")
        media = report["media_root"]
        space = f"{media['free_mb']} MB free (cells start with at least RSI_MIN_FREE_MB={media['min_free_mb']})"
        self.stdout.write(f"media root            {media['path']}: {space}{'' if media['ok'] else ': TOO LITTLE'}")
        self.stdout.write("")
        for name, verdict in report["benchmarks"].items():
            status = self.style.SUCCESS("ready") if verdict["ready"] else self.style.WARNING("not ready")
            note = f"  [{verdict['note']}]" if verdict["note"] else ""
            self.stdout.write(f"{name:<16} {status}: {verdict['reason']}{note}")
            for task, paths in verdict.get("missing_assets", {}).items():
                self.stdout.write(f"{'':<16}   {task}: missing {', '.join(paths)}")
        for name, probe in report.get("determinism", {}).items():
            if probe["identical"] is None:
                verdict = f"could not run: {probe['reason']}"
            elif probe["identical"]:
                verdict = (
                    f"identical over {probe['steps']} steps, twice from seed {probe['seed']} ({probe['seconds']} s)"
                )
            else:
                verdict = f"NOT identical: the runs differ from step {probe['first_divergent_step']}"
            self.stdout.write(f"{name:<16} determinism on {probe['task']}: {verdict}")
        scale = report["scale_out"]
        self.stdout.write("")
        self.stdout.write(f"executor         {scale['executor']} (database: {scale['database']})")
        if "broker" in scale:
            broker = scale["broker"]
            self.stdout.write(
                f"broker           {broker['url'] if broker['ok'] else 'unreachable: ' + broker['reason']}"
            )
            for name, worker in scale["workers"].items():
                devices = f", CUDA_VISIBLE_DEVICES={worker['devices']}" if worker["devices"] else ""
                self.stdout.write(f"worker           {name}: {', '.join(worker['queues'])}{devices}")
                for benchmark, verdict in worker["readiness"].items():
                    state = {True: "ready", False: "cannot run", None: "checking"}[verdict["ready"]]
                    self.stdout.write(f"{'':<16}   {benchmark}: {state}: {verdict['reason']}")
            if not scale["workers"]:
                self.stdout.write("worker           none answered (celery -A rsi_site worker -Q rsi.BENCHMARK)")
