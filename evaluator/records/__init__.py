"""What persists: the Django models (models/), the database triggers that keep evidence immutable (triggers),
the queries pages and exports share (queries), the catalogs mirrored into the database (catalog_sync), the roles
and the permission check of every action (roles), which process holds an attempt (runners), personal API tokens
(tokens) and the leaderboards per protocol identity (leaderboards).

It may import the protocol core only.
"""
