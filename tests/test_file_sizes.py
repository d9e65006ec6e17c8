"""The team's style rule: "no file over 500 lines (split by job, not by size)". Every tracked source file (Python,
templates, scripts, styles) is read; a file past the limit is named with its length."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES = 500
SOURCE_PATTERNS = ("*.py", "*.html", "*.js", "*.css", "*.sh")


def tracked_sources() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *SOURCE_PATTERNS], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name]


def test_no_source_file_is_over_500_lines():
    sources = tracked_sources()
    assert any(path.name == "test_file_sizes.py" for path in sources)  # the listing reads this checkout
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in sources
        if path.is_file() and (lines := len(path.read_text(errors="replace").splitlines())) > MOST_LINES
    }
    assert too_long == {}
