"""The evaluator's side of the native workers, without Django: the subprocess client of the worker protocol
(client), how a worker's environment is made on this host (environment), one host entry per benchmark backend
(backends) with its probe of whether it can run here (probes), and what is computed from a worker's frames as they
arrive (png, fingerprints).

It may import the protocol core only.
"""
