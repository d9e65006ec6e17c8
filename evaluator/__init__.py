"""RSI's Django app, one subpackage per job. Layers import downward only (tests/test_layering.py keeps it so):

    web, management commands    the pages, their forms and admin; the command line
    execution                   launching and starting cells, the executor seam, Celery tasks
    exports                     LeRobot datasets, replays, reading stored evidence back
    readiness                   whether this executor can run a benchmark; doctor's report
    running                     one attempt: episode loop, evidence, recorder, recovery
    live                        the live hub, interventions, the consumers
    records                     models, triggers, queries, roles
    policies, native            the policy transports; the native worker client and host entries
    protocol                    the rules, plain Python

A lower layer that must call up is handed a function or a registry entry; no module imports another's
`_private` name. Of environment/, the app imports one module, the seam both sides share:
environment/workers/wire.py (the frames a worker or model host speaks, and what both sides compute alike); the
protocol core imports none of it. Django finds apps.py, migrations/, management/commands/ and templatetags/ where it
expects them; the models are records.models (apps.py tells Django).
"""
