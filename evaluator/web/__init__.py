"""The dashboard: views split by page group (views/), their twin the HTTP API (api/: /api/v1/, tokens, OpenAPI), their
forms, authorization helpers (access), the admin and the URLs. A view calls the services below it (execution's
check_*/do_*, records' queries); it never talks to a worker or a policy. The template tags are in
evaluator/templatetags/, where Django looks for them.

It may import every other layer.
"""
