"""A throwaway site for the in-process benches, set up before they import any model: a SQLite database and
a media folder in a new temporary folder, Django over them (the test client's host allowed), migrated, with
the catalogs and the built-in policies loaded. The bench removes the folder when done."""

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def throwaway_site(prefix: str = "rsi-bench-") -> Path:
    sys.path.insert(0, str(ROOT))
    work = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["DATABASE_URL"] = f"sqlite:///{work / 'db.sqlite3'}"
    os.environ["RSI_MEDIA_ROOT"] = str(work / "media")
    os.environ["RSI_ALLOWED_HOSTS"] = "testserver"  # the in-process test client
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rsi_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from evaluator.execution.launching import ensure_builtin_policies

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("load_catalogs", verbosity=0, stdout=quiet)
    ensure_builtin_policies()
    return work
