"""Whether this executor can run a benchmark now, asked before cells are created or started (verdicts: this host's
probes, kept a while, or the Celery workers' answers), doctor's report of the host (doctor), and whether a benchmark
repeats itself here (determinism).

It may import records, native and the protocol core.
"""
