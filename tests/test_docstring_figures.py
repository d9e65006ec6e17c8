"""Issue 56, point 8: "no number from a measurement in a docstring" (they go stale: a docstring's "about 0.2 ms"
outlived the code it timed). A docstring of the app or the client names the bench that measures what it claims; the
figures live in docs/measurements.md, dated, with the command that gave them."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A time (12 ms, 0.4 µs), a speed-up (1.7x faster, 0.61x the CPU) or a relative size or cost (4-11% larger).
FIGURE = re.compile(
    r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:ms|µs|us)\b"
    r"|\b\d+(?:\.\d+)?x (?:faster|slower|the|as)\b"
    r"|\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?% (?:larger|smaller|faster|slower|less|more|of the)\b"
)


def figures_in_docstrings(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found += FIGURE.findall(ast.get_docstring(node) or "")
    return found


def test_no_docstring_of_the_app_or_the_client_carries_a_measured_figure():
    found = {}
    for folder in ("evaluator", "rsi_client"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "migrations" not in path.parts and (figures := figures_in_docstrings(path.read_text())):
                found[str(path.relative_to(ROOT))] = figures
    assert found == {}


def test_a_measured_figure_is_found_in_any_docstring():
    source = '"""A module: 12 ms a frame."""\n\nclass A:\n    def f(self):\n        """1.7x faster, 4-11% larger."""\n'
    assert figures_in_docstrings(source) == ["12 ms", "1.7x faster", "4-11% larger"]
    assert figures_in_docstrings('"""A 10 x 60 map of 600 cells, 20 steps a second."""') == []
