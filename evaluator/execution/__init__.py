"""Where started attempts run and how they get there: launching campaigns and starting cells, re-runs and replays
(launching: check_* then do_*), the executor seam (executor: the embedded pool or Celery) and how many episodes it
runs at once (capacity), the Celery tasks (tasks), the media-root probe of the workers (media_probe), and who may
check a policy before a launch, and on what (policy_checks).

It may import every layer below it: exports, readiness, running, live, records, policies, native, protocol.
"""
