"""What persists: the Django models (models/), the database triggers that keep evidence immutable (triggers),
the queries pages and exports share (queries), the catalogs mirrored into the database (catalog_sync), the roles
and the permission check of every action (roles), which process holds an attempt (runners), personal API tokens
(tokens), the leaderboards per protocol identity (leaderboards) and where a campaign's time goes (throughput).

It may import the protocol core only.
"""
