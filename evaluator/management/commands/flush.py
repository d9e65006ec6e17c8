"""Django's `flush`, which empties every table, with the immutability triggers lifted for it.

Erasing a whole database is an explicit operator action (and how transactional tests reset);
the triggers guard single records against change, so they are dropped first and made again
by the post_migrate signal that flush sends.
"""

from django.core.management.commands.flush import Command as FlushCommand

from evaluator.records.triggers import create_triggers, drop_triggers


class Command(FlushCommand):
    def handle(self, **options):
        drop_triggers(sender=None, using=options["database"])
        super().handle(**options)
        if options.get("inhibit_post_migrate"):
            create_triggers(sender=None, using=options["database"])
