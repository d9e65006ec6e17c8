"""evaluator/__init__.py: "Layers import downward only (tests/test_layering.py keeps it so) ... A lower layer that
must call up is handed a function or a registry entry; no module imports another's `_private` name. Of
environment/, the app imports one module, the seam both sides share: environment/workers/wire.py ...; the protocol
core imports none of it." This is that test. It reads every module of evaluator/ (migrations apart) with `ast`, and
counts an import inside a function as much as one at the top: a lazy import is still a dependency."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "evaluator"

# What each layer may import besides itself. evaluator/__init__.py says the same in words.
BELOW_EXECUTION = {"exports", "readiness", "running", "live", "records", "policies", "native", "protocol"}
MAY_IMPORT = {
    "protocol": set(),
    "native": {"protocol"},
    "policies": {"native", "protocol"},
    "records": {"protocol"},
    "live": {"records", "protocol"},
    "running": {"live", "records", "policies", "native", "protocol"},
    "readiness": {"records", "native", "protocol"},
    "exports": {"readiness", "running", "records", "native", "protocol"},
    "execution": BELOW_EXECUTION,
    "web": {"execution"} | BELOW_EXECUTION,
    "management": {"execution"} | BELOW_EXECUTION,
    "app": {"web", "execution"} | BELOW_EXECUTION,  # apps.py: Django's entry into the app
}


def read_sources(package: Path = PACKAGE) -> dict[str, str]:
    """{dotted module name: source} of every module of the app, migrations apart."""
    sources = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if "migrations" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        sources[name] = path.read_text()
    return sources


def imports_of(name: str, source: str, modules: set[str]) -> list[tuple[str, str]]:
    """(imported module, imported name or "") of every import of an app module in `source`, at any depth."""
    is_package = f"{name}.__init__" in modules or any(m.startswith(name + ".") for m in modules)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.split(".")[0] == "evaluator"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(anchor[: len(anchor) - node.level + 1] + ([node.module] if node.module else []))
            if base.split(".")[0] != "evaluator":
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((submodule, "") if submodule in modules else (base, alias.name))
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "apps":
        return "app"
    return {"templatetags": "web"}.get(parts[1], parts[1])


def upward_imports(sources: dict[str, str]) -> list[str]:
    modules = set(sources)
    wrong = []
    for name, source in sources.items():
        for target, _ in imports_of(name, source, modules):
            mine, theirs = layer_of(name), layer_of(target)
            if mine != theirs and theirs not in MAY_IMPORT[mine]:
                wrong.append(f"{name} ({mine}) imports {target} ({theirs})")
    return sorted(set(wrong))


SEAM = "environment.workers.wire"


def environment_imports(sources: dict[str, str]) -> list[str]:
    """Every import of environment/ by the app but the seam's, and any by the protocol core, at any depth."""
    wrong = []
    for name, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] != "environment":
                    continue
                if layer_of(name) == "protocol" or not (target == SEAM or target.startswith(SEAM + ".")):
                    wrong.append(f"{name} imports {target}")
    return sorted(set(wrong))


def import_circles(sources: dict[str, str]) -> list[list[str]]:
    """The strongly connected components of the module graph with more than one module (Tarjan's algorithm)."""
    modules = set(sources)
    edges = {name: {t for t, _ in imports_of(name, src, modules) if t in modules} for name, src in sources.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(edges[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in edges[module]:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return circles


def private_imports(sources: dict[str, str]) -> list[str]:
    """`from module import _name`, and `module._name` on an app module bound by an import, across modules."""
    modules = set(sources)
    wrong = []
    for name, source in sources.items():
        wrong += [f"{name} imports {t}.{n}" for t, n in imports_of(name, source, modules) if _private(n)]
        bound = {
            alias.asname or alias.name
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if f"{node.module}.{alias.name}" in modules
        }
        wrong += [
            f"{name} uses {node.value.id}.{node.attr}"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            if node.value.id in bound and _private(node.attr)
        ]
    return sorted(set(wrong))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_every_import_goes_down_the_layers():
    assert upward_imports(read_sources()) == []


def test_no_modules_import_each_other_in_a_circle():
    assert import_circles(read_sources()) == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports(read_sources()) == []


def test_the_app_imports_nothing_of_environment_but_its_wire_module():
    assert environment_imports(read_sources()) == []


def test_an_import_of_environment_past_the_seam_is_reported_wherever_it_is():
    sources = read_sources()
    sources["evaluator.policies.openpi"] += "\n\ndef f():\n    from environment.workers import fetch_worker\n"
    sources["evaluator.native.client"] += "\nimport environment.workers.sapien_worker\n"
    sources["evaluator.protocol.scoring"] += "\nfrom environment.workers.wire import jsonable\n"
    assert environment_imports(sources) == [
        "evaluator.native.client imports environment.workers.sapien_worker",
        "evaluator.policies.openpi imports environment.workers.fetch_worker",
        "evaluator.protocol.scoring imports environment.workers.wire.jsonable",
    ]


def test_every_module_belongs_to_a_layer():
    assert {layer_of(name) for name in read_sources()} <= set(MAY_IMPORT)


def test_an_upward_import_and_the_circle_it_closes_are_both_reported():
    # The queries asking the attempts page for its sorts (the page imports the queries): planted in a copy.
    sources = read_sources()
    sources["evaluator.records.queries"] += "\nfrom evaluator.web.views.attempts import SORTS\n"
    assert upward_imports(sources) == ["evaluator.records.queries (records) imports evaluator.web.views.attempts (web)"]
    assert import_circles(sources) == [["evaluator.records.queries", "evaluator.web.views.attempts"]]


def test_a_lazy_private_import_is_reported():
    sources = read_sources()
    sources["evaluator.running.recovery"] += "\n\ndef f():\n    from evaluator.running.recorder import _finish\n"
    sources["evaluator.web.urls"] += "\nfrom evaluator.native import probes\nprobes._run\n"
    assert private_imports(sources) == [
        "evaluator.running.recovery imports evaluator.running.recorder._finish",
        "evaluator.web.urls uses probes._run",
    ]


def test_the_native_layer_imports_without_django():
    """native/ is "the evaluator's side of the native workers, without Django" (evaluator/native/__init__.py)."""
    code = (
        "import sys, pkgutil, importlib, evaluator.native as n\n"
        "for m in pkgutil.iter_modules(n.__path__): importlib.import_module('evaluator.native.' + m.name)\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'channels'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
