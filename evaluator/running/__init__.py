"""One attempt: the episode loop (episode), its evidence on disk (evidence), the recorder that runs and stores an
attempt (recorder), where its wall time goes (timing), heartbeats, recovery of attempts whose process died,
verification of stored evidence, and the one-call policy check on a synthetic observation (policy_check).

It may import live, records, policies, native and the protocol core.
"""
