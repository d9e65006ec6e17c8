"""Logging filters: a refused request (4xx) is logged in one line; tracebacks are for server errors."""

import logging


class NoTracebackBelow500(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = record.exc_text = None  # Django passes the PermissionDenied it answered with 403
        return True
