"""The embedded default serves its own static files; a path that tries to leave the static folders
(`/static/%2e%2e/...`) is a 404, not a server error (Django's handler only turns Http404 into a
response and lets SuspiciousFileOperation through)."""

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404


class StaticFilesHandler(ASGIStaticFilesHandler):
    def serve(self, request):
        try:
            return super().serve(request)
        except SuspiciousFileOperation:
            raise Http404("no such static file") from None
