"""Policies behind one interface. A policy sees only the sanitized mailbox message."""
