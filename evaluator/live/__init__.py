"""Live rollouts: the hub of this process (hub: in-memory, memory, or Redis, redis_hub) that carries each running
attempt's events, pictures and control; watchers' interventions (interventions); the WebSocket consumers.

It may import records and the protocol core. Running publishes to it; nothing here runs an attempt.
"""
