"""evaluator/protocol/__init__.py: "Nothing here imports Django, a native worker or a policy"."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_protocol_core_imports_without_django():
    code = (
        "import sys, pkgutil, importlib, evaluator.protocol as p\n"
        "for m in pkgutil.iter_modules(p.__path__): importlib.import_module('evaluator.protocol.' + m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('django', 'channels', 'daphne'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
