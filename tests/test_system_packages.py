"""Every external program the code runs is installed by the setup script (issue "Fidelity and
recovery", point 2: `doctor` shelled out to vulkaninfo, which a fresh machine did not have).

The code's programs are found by reading it: the literal program of each subprocess call (and of
Playwright's executable_path); interpreters named by variables are the venvs the Makefile builds.
"""

import ast
import glob
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / "scripts" / "system-packages.sh").read_text()
SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call"}


def _table(name: str) -> dict[str, str]:
    body = re.search(rf'^{name}="\n(.*?)^"', SCRIPT, re.S | re.M).group(1)
    return {line.split()[0]: line.split()[1] for line in body.splitlines() if line.strip()}


PROGRAMS = {**_table("PROGRAMS_RUN"), **_table("PROGRAMS_TEST")}


def _first_strings(node: ast.AST) -> list[str]:
    """The string each list literal inside `node` starts with (both arms of `a if c else b`)."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.List) and sub.elts and isinstance(sub.elts[0], ast.Constant):
            found.append(sub.elts[0].value)
    return found


def _program(element: ast.AST, assignments: dict) -> list[str]:
    if isinstance(element, ast.Constant) and isinstance(element.value, str):
        return [element.value]
    if isinstance(element, ast.BinOp) and isinstance(element.op, ast.Div) and isinstance(element.right, ast.Constant):
        return [element.right.value]  # bindir / "initdb"
    if isinstance(element, ast.Name) and element.id in assignments:
        value = assignments[element.id]
        return [value.value] if isinstance(value, ast.Constant) else _first_strings(value)
    return []  # an interpreter held in a variable (sys.executable, a venv's python)


def _sources() -> dict[Path, ast.Module]:
    paths = [*ROOT.glob("*.py"), *ROOT.glob("[!.]*/**/*.py")]
    skipped = lambda path: any(p.startswith(".venv") or p in ("media", "test-artifacts") for p in path.parts)  # noqa: E731
    return {path: ast.parse(path.read_text()) for path in paths if not skipped(path)}


def _assignments(tree: ast.Module) -> dict[str, ast.AST]:
    return {
        target.id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _is_subprocess_call(call: ast.Call) -> bool:
    function = call.func
    return (
        isinstance(function, ast.Attribute)
        and function.attr in SUBPROCESS_CALLS
        and getattr(function.value, "id", None) == "subprocess"
        and bool(call.args)
    )


def programs_in_code() -> dict[str, set[str]]:
    sources = _sources()
    # Module constants of every file: a program's path may be imported (CHROMIUM).
    constants = {
        name: value
        for tree in sources.values()
        for name, value in _assignments(tree).items()
        if isinstance(value, ast.Constant) and isinstance(value.value, str)
    }
    found: dict[str, set[str]] = {}
    for path, tree in sources.items():
        assignments = {**constants, **_assignments(tree)}
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            names = []
            function = call.func
            if _is_subprocess_call(call):
                command = call.args[0]
                elements = command.elts if isinstance(command, (ast.List, ast.Tuple)) else [command]
                for element in elements:  # a leading *prefix may be empty: the next one runs then
                    if isinstance(element, ast.Starred):
                        names += _program(element.value, assignments)
                        continue
                    names += _program(element, assignments)
                    break
            if isinstance(function, ast.Attribute) and function.attr == "which" and call.args:
                names += _program(call.args[0], assignments)
            for keyword in call.keywords:
                if keyword.arg == "executable_path":
                    names += _program(keyword.value, assignments)
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def _listed(program: str) -> bool:
    return any(program == entry or entry.endswith("/" + program) for entry in PROGRAMS)


def test_the_code_runs_no_program_the_setup_script_does_not_install():
    found = programs_in_code()
    assert {"git", "initdb", "runuser", "/usr/bin/chromium"} <= set(found)  # the reader sees them
    unlisted = {program: sorted(files) for program, files in found.items() if not _listed(program)}
    assert unlisted == {}


def test_every_listed_program_is_installed_after_the_setup_script_ran():
    # make test runs `scripts/system-packages.sh test` first, so on a fresh machine this checks it.
    missing = [p for p in PROGRAMS if not (glob.glob(p) if p.startswith("/") else shutil.which(p))]
    assert missing == []


def test_doctor_needs_no_vulkaninfo():
    assert "vulkaninfo" not in programs_in_code()
    assert not (ROOT / "evaluator" / "native" / "probes.py").read_text().count("vulkaninfo")
