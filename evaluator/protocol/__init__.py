"""The protocol core: every rule of the evaluation protocols, in plain Python.

Nothing here imports Django, a native worker or a policy; everything else may import it.
Modules: identity, catalogs, budgets, actions, scoring, aggregates, leaderboard, interventions, errors,
numbers (whole numbers written outside RSI), text (free text people write into records).
"""
