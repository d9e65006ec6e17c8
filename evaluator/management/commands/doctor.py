import json

from django.core.management.base import BaseCommand

from evaluator.doctor import diagnose


class Command(BaseCommand):
    help = (
        "Rendering and runtime preflight: Vulkan devices, SAPIEN's renderer, ray tracing, the OptiX denoiser, "
        "EGL / MUJOCO_GL, each benchmark's Python environment, and a verdict per benchmark "
        "(environment/RENDERING.md). Exits 0; the verdicts say what can run here."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        report = diagnose()
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        vulkan = report["vulkan"]
        devices = ", ".join(f"{d['name']} ({d['type']}, {d['driver']})" for d in vulkan["devices"]) or vulkan["reason"]
        self.stdout.write(f"Vulkan devices        {devices}")
        self.stdout.write(f"SAPIEN would use      {vulkan.get('sapien_would_use') or '-'}")
        self.stdout.write(f"ray tracing           {'yes' if vulkan.get('ray_tracing') else 'no'}")
        layer = report["vulkan_layer"]
        self.stdout.write(f"RSI Vulkan layer      {'built' if layer['built'] else 'not built (make vulkan-layer)'}, "
                          f"{'enabled' if layer['enabled'] else 'disabled'}")
        renderer = report["sapien_renderer"]
        self.stdout.write(f"SAPIEN renderer       {'ok' if renderer['ok'] else 'fails: ' + renderer['reason']}")
        optix = any(report["optix_denoiser"].values())
        self.stdout.write(f"OptiX denoiser        {'present' if optix else 'absent (/usr/share/nvidia/nvoptix.bin)'}")
        gl = report["mujoco_gl"]
        self.stdout.write(f"MuJoCo GL             {gl['backend']}: {'ok' if gl['ok'] else 'fails'}")
        for name, env in report["environments"].items():
            if name != "simpler_env_upstream":
                self.stdout.write(f"{name + ' env':<22}{env['python']}  {env['packages']}")
        self.stdout.write("")
        for name, verdict in report["benchmarks"].items():
            status = self.style.SUCCESS("ready") if verdict["ready"] else self.style.WARNING("not ready")
            note = f"  [{verdict['note']}]" if verdict["note"] else ""
            self.stdout.write(f"{name:<16} {status}: {verdict['reason']}{note}")
