"""One attempt: the episode loop (episode), its evidence on disk (evidence), the recorder that runs and stores an
attempt (recorder), heartbeats, recovery of attempts whose process died, and verification of stored evidence.

It may import live, records, policies, native and the protocol core.
"""
